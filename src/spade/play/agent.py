"""Multi-turn play of one environment instance by a policy (games and tool use).

The conversation is kept as a :class:`~spade.backends.template.TokenStream`: the policy samples from the
stream's own tokens and the stream records every sampled token and its log-probability, so the trainer sees
exactly what was sampled. A thinking model (the template's ``thinking``, ``model.thinking``) is instead
prompted each turn with the template's rendering of the conversation, earlier replies passed as content and
reasoning (Qwen3-style templates leave that reasoning out), and each turn becomes a training sample on the
prompt it was sampled from (:attr:`~spade.types.Trajectory.turns`). The opening messages are
``play.agent_prompt``'s (:mod:`spade.play.prompts`). Every way an episode can end is a
:class:`~spade.types.PlayStatus`; environment and model failures become data on the trajectory, never
exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spade.backends.template import TokenStream, TurnTemplate
from spade.config import PlayConfig
from spade.play.demos import Demo
from spade.play.prompts import HINT_TEMPLATE, opening_messages
from spade.play.returns import episode_return, is_success, with_format_reward
from spade.replies import (
    has_answer,
    last_boxed,
    parse_action,
    parse_tool_calls,
    split_reasoning,
    strip_reasoning,
)
from spade.sandbox import EnvInstance, SandboxError
from spade.toolcalls import OPEN as TOOL_CALL_OPEN
from spade.types import (
    Completion,
    Message,
    PlayStatus,
    Policy,
    SamplingParams,
    ToolSchema,
    Trajectory,
    Transition,
    TurnTokens,
)

LENIENT_MAX_CHARS = 24
FORMAT_REMINDER = (
    '[FORMAT] Your tool call could not be read. Call a tool as <tool_call>{"name": "<tool name>", '
    '"arguments": {<arguments as JSON>}}</tool_call>, or finish with <answer>...</answer>.'
)
"""Put before the next observation after a malformed tool call (``play.mask_malformed_tool_calls``)."""


@dataclass(frozen=True, slots=True)
class Episode:
    """What one play needs besides the policy and the instance."""

    env_id: str
    seed: int
    hint: str | None = None
    options: dict[str, Any] | None = None
    demos: tuple[Demo, ...] = ()
    """Solved episodes of the same environment shown before the game (see :mod:`spade.play.demos`)."""


class _Play:
    """The mutable state of one episode while it runs.

    The stream is the episode as sampled (every reply verbatim). Without ``template.thinking`` each turn is
    sampled from the stream itself; with it, from the template's rendering of ``messages`` (earlier replies
    split into content and reasoning), and each turn is kept in ``turns`` with the prompt it was sampled from.
    """

    def __init__(self, template: TurnTemplate, messages: list[Message], tools: list[ToolSchema]) -> None:
        self.template = template
        self.stream = TokenStream.from_messages(template, messages, tools or None)
        self.messages = messages
        self.tools = tools
        self.turns: list[TurnTokens] = []
        self.transitions: list[Transition] = []
        self.rewards: list[float] = []
        self.well_formed = 0
        self.terminated = False
        self.status = PlayStatus.TURN_BUDGET
        self.error = ""
        self.format_reminder = False
        """The last reply held a tool call that did not parse: the next observation reminds of the format."""

    def prompt(self) -> tuple[int, ...]:
        """The tokens the next reply is sampled from."""
        if not self.template.thinking:
            return self.stream.tokens_T
        return tuple(self.template.render(self.messages, self.tools or None, add_generation_prompt=True))

    def add_completion(self, prompt: tuple[int, ...], completion: Completion) -> None:
        """Record a reply sampled from ``prompt``."""
        self.stream.add_completion(completion)
        if not self.template.thinking:
            return
        turn = TokenStream(self.template, prompt)
        turn.add_completion(completion)
        self.turns.append(TurnTokens(turn.tokens_T, turn.mask_T, turn.logprobs_T))
        reasoning, answer = split_reasoning(completion.text)
        reply: Message = {"role": "assistant", "content": answer}
        if reasoning:
            reply["reasoning_content"] = reasoning
        self.messages.append(reply)

    def drop_last_reply_loss(self) -> None:
        """Train nothing of the last reply (``play.mask_malformed_tool_calls``)."""
        self.stream.drop_last_reply_loss()
        if self.turns:
            last = self.turns[-1]
            self.turns[-1] = TurnTokens(last.tokens_T, (0,) * len(last.mask_T), last.sample_logprobs_T)

    def add_messages(self, messages: list[Message]) -> None:
        """Append the environment's next messages (observation or tool results)."""
        self.stream.add_messages(messages)
        self.messages.extend(messages)


def reply_budget(prompt_tokens: int, cfg: PlayConfig) -> int:
    """Tokens the next reply may take after a prompt of ``prompt_tokens``; 0: the context ends the episode.

    Without ``cfg.stop_margin_tokens``, a whole ``turn_tokens`` reply or nothing; with a margin N, as
    released, what remains beyond the last N tokens of ``context_tokens``, at most ``turn_tokens``.
    """
    room = cfg.context_tokens - prompt_tokens
    if cfg.stop_margin_tokens is None:
        return cfg.turn_tokens if room >= cfg.turn_tokens else 0
    return max(0, min(cfg.turn_tokens, room - cfg.stop_margin_tokens))


async def play_episode(
    policy: Policy, env: EnvInstance, episode: Episode, cfg: PlayConfig, *, is_tool_env: bool
) -> Trajectory:
    """Play one episode of ``env`` to its end or a budget; failures are recorded on the trajectory."""
    template = policy.template
    if not isinstance(template, TurnTemplate):
        raise TypeError("the policy's template cannot do multi-turn token accounting (needs render_suffix)")
    try:
        obs, _ = await env.areset(seed=episode.seed, options=episode.options)
        tools = await env.atools() if is_tool_env else []
    except SandboxError as exc:
        return _failed(episode, PlayStatus.ENV_ERROR, f"{exc.kind}: {exc}")
    if episode.hint:
        obs = HINT_TEMPLATE.format(observation=obs, hint=episode.hint)
    messages = opening_messages(cfg.agent_prompt, obs, is_tool_env=is_tool_env, demos=episode.demos)
    play = _Play(template, messages, tools)
    for _ in range(cfg.max_turns):
        prompt = play.prompt()
        budget = reply_budget(len(prompt), cfg)
        if budget < 1:
            play.status = PlayStatus.CONTEXT_BUDGET
            break
        # One parameter set for every turn until the context's end nears, so concurrent requests batch.
        params = SamplingParams(
            temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k, max_tokens=budget
        )
        completion = (await policy.sample([prompt], params))[0]
        if completion.finish_reason == "error":
            play.status, play.error = PlayStatus.MODEL_ERROR, completion.error or "policy failed"
            break
        play.add_completion(prompt, completion)
        if completion.finish_reason == "length" and cfg.on_length == "end":
            play.status = PlayStatus.LENGTH
            break
        try:
            done = await _take_turn(env, play, obs, completion, cfg, is_tool_env=is_tool_env)
        except SandboxError as exc:
            play.status, play.error = PlayStatus.ENV_ERROR, f"{exc.kind}: {exc}"
            break
        if done:
            break
        obs = play.transitions[-1].observation
    play.stream.close()
    return _finish(episode, play, cfg)


async def _take_turn(
    env: EnvInstance, play: _Play, obs: str, completion: Completion, cfg: PlayConfig, *, is_tool_env: bool
) -> bool:
    """Apply one reply to the environment; returns whether the episode is over."""
    reply = completion.text
    body = strip_reasoning(reply)
    calls = parse_tool_calls(body, play.tools) if is_tool_env and not has_answer(body) else []
    if calls:
        outputs = [await env.acall_tool(c.name, c.arguments) for c in calls]
        tool_messages: list[Message] = [
            {"role": "tool", "name": c.name, "content": out, "tool_call_id": c.id or f"call_{i}"}
            for i, (c, out) in enumerate(zip(calls, outputs, strict=True))
        ]
        play.transitions.append(Transition(obs, reply, "tool_calls", 0.0, False, False))
        play.well_formed += 1
        play.add_messages(tool_messages)
        return False
    if is_tool_env:
        action = body.strip()
        play.well_formed += has_answer(body)
        if cfg.mask_malformed_tool_calls and not has_answer(body) and TOOL_CALL_OPEN in body:
            play.drop_last_reply_loss()
            play.format_reminder = True
    else:
        action = parse_action(reply, cfg.action_mode)
        play.well_formed += _well_formed_game_action(body, action, cfg)
    next_obs, reward, terminated, truncated, _ = await env.astep(action)
    play.rewards.append(reward)
    play.transitions.append(Transition(next_obs, reply, action, reward, terminated, truncated))
    if terminated or truncated:
        play.terminated = terminated
        play.status = PlayStatus.TERMINATED if terminated else PlayStatus.TRUNCATED
        return True
    if play.format_reminder:
        next_obs, play.format_reminder = f"{FORMAT_REMINDER}\n\n{next_obs}", False
    play.add_messages([{"role": "user", "content": next_obs}])
    return False


def _well_formed_game_action(body: str, action: str, cfg: PlayConfig) -> bool:
    """A boxed action; in lenient mode also a concise one (a short final line, as a move should be)."""
    if last_boxed(body) is not None:
        return True
    return cfg.action_mode == "lenient" and 0 < len(action) <= LENIENT_MAX_CHARS and len(action.split()) <= 4


def _finish(episode: Episode, play: _Play, cfg: PlayConfig) -> Trajectory:
    ret = episode_return(play.rewards, play.terminated, cfg.return_mode)
    success = is_success(ret, play.terminated, cfg.success_threshold)
    formatted = play.well_formed / len(play.transitions) if play.transitions else 0.0
    return Trajectory(
        env_id=episode.env_id,
        seed=episode.seed,
        hinted=episode.hint is not None,
        status=play.status,
        transitions=tuple(play.transitions),
        episode_return=max(-1.0, min(1.0, with_format_reward(ret, formatted, cfg.format_reward))),
        success=success,
        tokens_T=play.stream.tokens_T,
        mask_T=play.stream.mask_T,
        sample_logprobs_T=play.stream.logprobs_T,
        error=play.error,
        turns=tuple(play.turns),
    )


def _failed(episode: Episode, status: PlayStatus, error: str) -> Trajectory:
    return Trajectory(
        env_id=episode.env_id,
        seed=episode.seed,
        hinted=episode.hint is not None,
        status=status,
        transitions=(),
        episode_return=0.0,
        success=False,
        error=error,
    )
