"""Chat templating and multi-turn token accounting: the real SmolLM2 tokenizer and a Qwen-style template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spade.backends.embedded import resolve_model
from spade.backends.template import HFChatTemplate, TemplateError, TokenStream
from spade.types import ChatTemplate, Completion

# A Qwen3-style template: tools in the system turn, consecutive tool results grouped in one user turn, and
# <think> blocks of assistant turns before the last user message stripped on re-render.
QWEN_STYLE = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n<tools>' }}"
    "{%- for t in tools %}{{- '\\n' + (t | tojson) }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}{%- endif %}"
    "{%- set ns = namespace(last_user=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}"
    "{%- endfor %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'user' or m.role == 'system' %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- elif m.role == 'assistant' %}"
    "{%- set content = m.content %}{%- set reasoning = '' %}"
    "{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if loop.index0 > ns.last_user %}{{- '<think>\\n' + reasoning + '\\n</think>\\n\\n' }}{%- endif %}"
    "{{- content + '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

TOOLS = [
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer  # noqa: PLC0415 -- heavy import, keep collection fast

    return AutoTokenizer.from_pretrained(resolve_model("embedded"))


@pytest.fixture(scope="module")
def smol(tokenizer: Any) -> HFChatTemplate:
    return HFChatTemplate(tokenizer)


@pytest.fixture(scope="module")
def qwen(tokenizer: Any) -> HFChatTemplate:
    return HFChatTemplate(tokenizer, chat_template=QWEN_STYLE)


def _reply(template: HFChatTemplate, text: str, *, end: bool, logprob: float = -0.5) -> Completion:
    ids = template.encode(text) + (
        [template.end_of_turn_id] if end and template.end_of_turn_id is not None else []
    )
    return Completion(text, tuple(ids), tuple([logprob] * len(ids)), "stop" if end else "length")


def test_embedded_tokenizer_has_a_working_chat_template(smol: HFChatTemplate) -> None:
    assert isinstance(smol, ChatTemplate)
    text = smol.decode(smol.render([{"role": "user", "content": "hi"}], add_generation_prompt=True))
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert smol.end_of_turn_id == smol.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert smol.end_of_turn_id in smol.stop_token_ids()


def test_stream_equals_canonical_render_for_a_plain_template(smol: HFChatTemplate) -> None:
    msgs = [{"role": "user", "content": "Guess a number from 1 to 4."}]
    stream = TokenStream.from_messages(smol, msgs)
    stream.add_completion(_reply(smol, "I guess 3.", end=True, logprob=-0.25))
    stream.add_messages([{"role": "user", "content": "Too low."}])
    stream.add_completion(_reply(smol, "4", end=True, logprob=-0.75))
    stream.close()
    convo = [*msgs, {"role": "assistant", "content": "I guess 3."}, {"role": "user", "content": "Too low."}]
    canonical = smol.render([*convo, {"role": "assistant", "content": "4"}], add_generation_prompt=False)
    # The canonical render ends with "<|im_end|>\n"; the stream stops at the end-of-turn token.
    assert [*stream.tokens_T, *smol.encode("\n")] == canonical
    n_reply = len(smol.encode("I guess 3.")) + 1
    prompt_len = len(smol.render(msgs, add_generation_prompt=True))
    assert stream.mask_T[prompt_len : prompt_len + n_reply] == (1,) * n_reply
    assert sum(stream.mask_T) == n_reply + len(smol.encode("4")) + 1
    assert {lp for lp, m in zip(stream.logprobs_T, stream.mask_T, strict=True) if m} == {-0.25, -0.75}
    assert all(lp == 0.0 for lp, m in zip(stream.logprobs_T, stream.mask_T, strict=True) if not m)
    assert stream.exact


def test_missing_end_of_turn_is_appended_with_mask_zero(smol: HFChatTemplate) -> None:
    stream = TokenStream.from_messages(smol, [{"role": "user", "content": "Count."}])
    cut = _reply(smol, "1 2 3", end=False)
    stream.add_completion(cut)
    n = len(stream)
    stream.add_messages([{"role": "user", "content": "Go on."}])
    assert stream.tokens_T[n] == smol.end_of_turn_id
    assert stream.mask_T[n] == 0
    assert stream.tokens_T[n - len(cut.token_ids_T) : n] == cut.token_ids_T  # sampled ids untouched
    stream.add_completion(_reply(smol, "4 5", end=False))
    stream.close()
    assert stream.tokens_T[-1] == smol.end_of_turn_id
    assert stream.mask_T[-1] == 0


def test_sampled_ids_are_kept_verbatim_even_when_retokenisation_differs(smol: HFChatTemplate) -> None:
    # " hello" as single characters is a valid but non-canonical tokenisation of the same text.
    chars = [smol.encode(c)[0] for c in " hello"]
    assert chars != smol.encode(" hello")
    stream = TokenStream.from_messages(smol, [{"role": "user", "content": "Say hello."}])
    stream.add_completion(Completion(" hello", (*chars, 2), (-1.0,) * 7, "stop"))
    stream.add_messages([{"role": "user", "content": "Again."}])
    assert [t for t, m in zip(stream.tokens_T, stream.mask_T, strict=True) if m] == [*chars, 2]


def test_qwen_style_tool_turns_and_reasoning_kept_as_sampled(qwen: HFChatTemplate) -> None:
    msgs = [{"role": "user", "content": "Find the capital."}]
    stream = TokenStream.from_messages(qwen, msgs, TOOLS)
    first = "<think>\nuse the tool\n</think>\n\n<tool_call>{}</tool_call>"
    stream.add_completion(_reply(qwen, first, end=True))
    tool_msgs = [{"role": "tool", "content": "Paris"}, {"role": "tool", "content": "France"}]
    stream.add_messages(tool_msgs, TOOLS)
    text = qwen.decode(stream.tokens_T)
    assert text.endswith(
        "use the tool\n</think>\n\n<tool_call>{}</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nParis\n</tool_response>\n<tool_response>\nFrance\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    stream.add_completion(_reply(qwen, "<think>\nok\n</think>\n\nParis", end=True))
    stream.add_messages([{"role": "user", "content": "Thanks."}])
    # A canonical re-render strips the earlier reasoning; the stream keeps what was sampled.
    assert "use the tool" in qwen.decode(stream.tokens_T)
    canonical = qwen.render_text(
        [
            *msgs,
            {"role": "assistant", "content": first},
            *tool_msgs,
            {"role": "assistant", "content": "Paris"},
            {"role": "user", "content": "Thanks."},
        ],
        TOOLS,
        add_generation_prompt=True,
    )
    assert "use the tool" not in canonical.split("</tools>")[1]


def test_stream_alternation_is_enforced(smol: HFChatTemplate) -> None:
    stream = TokenStream.from_messages(smol, [{"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="must follow a completion"):
        stream.add_messages([{"role": "user", "content": "y"}])
    stream.add_completion(_reply(smol, "a", end=True))
    with pytest.raises(ValueError, match="two completions in a row"):
        stream.add_completion(_reply(smol, "b", end=True))
    with pytest.raises(ValueError, match="failed completion"):
        TokenStream(smol, [1]).add_completion(Completion("", (), (), "error", error="boom"))


def test_text_only_completion_is_retokenised_and_flagged(smol: HFChatTemplate) -> None:
    stream = TokenStream.from_messages(smol, [{"role": "user", "content": "x"}])
    stream.add_completion(Completion("hello", (), (), "stop"))
    assert not stream.exact
    sample = stream.train_sample(advantage=0.5, role="agent")
    assert sum(sample.mask_T) == len(smol.encode("hello"))
    assert sample.advantage == 0.5


def test_tokenizer_without_template_is_rejected(tokenizer: Any, tmp_path: Path) -> None:
    class NoTemplate:
        chat_template = None

    with pytest.raises(TemplateError, match="no chat template"):
        HFChatTemplate(NoTemplate())
