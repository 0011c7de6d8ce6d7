"""Token count of the paper presets' design prompts under the embedded model's tokenizer and chat template.

Builds the very first design prompt of a run exactly as the loop does (step 0, slot 0: warm-started
archive, the shipped corpus, the preset's document budget and worked example) and, as an upper bound, the
same prompt with a document at the full word budget and the largest memory examples the preset shows.
Prints one line per prompt (``--json``: one object) so the lead can check them against
``model.max_context`` minus ``designer.max_tokens``.

    .venv/bin/python bench/design_prompt_tokens.py [--preset paper] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from spade.backends.embedded import resolve_model
from spade.backends.template import HFChatTemplate
from spade.config import TrainConfig, preset
from spade.design import request
from spade.design.corpus import CorpusSampler, load_corpus
from spade.design.prompts import Exemplar, build_design_messages
from spade.memory.archive import Memory, seed_sources
from spade.types import CorpusDoc, Message


def first_request(cfg: TrainConfig, folder: Path) -> Any:
    """The DesignRequest of step 0, slot 0, built by the loop's own ``request.Requests``."""
    d = cfg.designer
    with Memory.in_run_dir(folder, cfg.memory) as memory:
        memory.warm_start(seed_sources(d.setting))
        sampler = CorpusSampler(load_corpus(cfg.corpus.path), seed=cfg.seed) if cfg.corpus.enabled else None
        requests = request.Requests(d, memory, sampler, steer=cfg.memory.enabled)
        rng = random.Random(f"{cfg.seed}/0/design")
        skills = list(d.skills) or None
        slot = request.plan_slots(
            skills or list(_skills(d.setting)), d.skills_per_regen, 0, d.envs_per_regen,
            edit_fraction=d.edit_fraction, rng=rng,
        )[0]  # fmt: skip
        return requests.make(slot, rng, slot.index)


def _skills(setting: str) -> dict[str, str]:
    from spade.config.skills import skills_for  # noqa: PLC0415

    return skills_for("tool_use" if setting == "tool_use" else "games")


def worst_case(request: Any, cfg: TrainConfig) -> Any:
    """The same request with a document past the word budget (cut to it) and full-size memory examples."""
    corpus = load_corpus(cfg.corpus.path)
    text: list[str] = []
    for doc in corpus.docs:  # real prose (the shipped documents back to back) past the word budget
        text += doc.text.split()
        if len(text) > cfg.designer.doc_tokens:
            break
    words = " ".join(text)
    code = request.worked_example * (
        1 + cfg.designer.example_code_chars // max(len(request.worked_example), 1)
    )
    examples = tuple(
        Exemplar(f"mem-{i}", code, request.skill, 0.5, 0.2) for i in range(cfg.designer.memory_examples)
    )
    return dataclasses.replace(
        request, document=CorpusDoc("long", "A long document", words), examples=examples
    )


def count(tokenizer: Any, messages: list[Message]) -> int:
    """Prompt tokens under the model's chat template as the policy renders them (generation prompt included)."""
    return len(HFChatTemplate(tokenizer).render(messages, add_generation_prompt=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cfg = preset(args.preset)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("embedded"))
    d = cfg.designer
    with tempfile.TemporaryDirectory() as tmp:
        request = first_request(cfg, Path(tmp))
    out: dict[str, Any] = {"preset": args.preset, "max_context": cfg.model.max_context,
                           "designer_max_tokens": d.max_tokens}  # fmt: skip
    for name, req in (("first_prompt", request), ("worst_case", worst_case(request, cfg))):
        messages = build_design_messages(req, doc_tokens=d.doc_tokens, example_chars=d.example_code_chars)
        out[f"{name}_tokens"] = count(tokenizer, messages)
        out[f"{name}_chars"] = sum(len(str(m["content"])) for m in messages)
    out["first_prompt_skill"] = request.skill
    out["first_prompt_doc_words"] = len(request.document.text.split()) if request.document else 0
    out["first_prompt_memory_examples"] = len(request.examples)
    out["fits"] = out["worst_case_tokens"] + d.max_tokens <= cfg.model.max_context
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
