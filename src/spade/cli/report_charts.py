"""The charts of ``spade report``: matplotlib figures of a run's metrics, rendered to inline SVG.

Each builder takes the metrics rows (one dict per step, as in ``metrics.jsonl``) and returns a
:class:`Chart`, or None when the run logged none of the metrics it draws (e.g. no ``eval/*`` scores).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spade.cli.summary import eval_suites

Rows = Sequence[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Chart:
    """One rendered chart."""

    key: str
    """Short identifier (the figure's ``data-chart`` attribute)."""
    title: str
    svg: str
    """A complete ``<svg>`` element."""


def _series(rows: Rows, key: str) -> tuple[list[int], list[float]]:
    pts = [(int(r["step"]), float(r[key])) for r in rows if isinstance(r.get(key), int | float)]
    return [p[0] for p in pts], [p[1] for p in pts]


def _keys(rows: Rows, prefix: str) -> list[str]:
    return sorted({k for r in rows for k in r if k.startswith(prefix)})


def _figure() -> tuple[Any, Any]:
    import matplotlib as mpl  # noqa: PLC0415 - heavy; only the report needs it

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(5.6, 3.0), dpi=100)
    # Steps are whole numbers. With the default min_n_ticks=2 the locator gives up on integers when the view
    # holds fewer than two (a 1-step run: -0.05..0.05) and ticks -0.04, -0.02, ...
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.grid(alpha=0.3)
    ax.set_xlabel("step")
    return fig, ax


def _legend(ax: Any) -> None:
    """Below the plot, so it never hides data."""
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.24), ncol=3, frameon=False)


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "spade"}):
        fig.tight_layout()
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _lines(
    key: str,
    title: str,
    rows: Rows,
    keys: Sequence[str],
    ylabel: str = "",
    *,
    ylim: tuple[float, float] | None = None,
) -> Chart | None:
    present = [k for k in keys if _series(rows, k)[0]]
    if not present:
        return None
    fig, ax = _figure()
    for k in present:
        x, y = _series(rows, k)
        ax.plot(x, y, marker="o", markersize=3, label=k)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    _legend(ax)
    return Chart(key, title, _svg(fig))


def validity(rows: Rows) -> Chart | None:
    """Designs per regeneration: accepted and rejected by reason (stacked bars)."""
    design = [r for r in rows if isinstance(r.get("designer/envs"), int | float)]
    if not design:
        return None
    reasons = _keys(design, "designer/rejected/")
    fig, ax = _figure()
    steps = [int(r["step"]) for r in design]
    bottom = [
        float(round(float(r.get("designer/valid_rate", 0.0)) * float(r["designer/envs"]))) for r in design
    ]
    ax.bar(steps, bottom, label="valid", color="#2a9d8f")
    _stack(ax, design, reasons, prefix="designer/rejected/", bottom=bottom)
    ax.set_ylabel("designs")
    _legend(ax)
    return Chart("validity", "Design validity by reason", _svg(fig))


def regret(rows: Rows) -> Chart | None:
    """Mean regret of credited designs, with its standard error as error bars when logged."""
    x, y = _series(rows, "designer/regret_mean")
    if not x:
        return None
    se = {int(r["step"]): float(r["designer/regret_se"]) for r in rows if "designer/regret_se" in r}
    fig, ax = _figure()
    yerr = [se.get(s, 0.0) for s in x] if se else None
    ax.errorbar(x, y, yerr=yerr, marker="o", markersize=3, capsize=3, label="designer/regret_mean")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_ylabel("regret (with hint − without)")
    _legend(ax)
    return Chart("regret", "Hint-based regret" + (" ± SE" if se else ""), _svg(fig))


def tokens_before(rows: Rows) -> dict[int, float]:
    """Step -> sampled tokens the run had spent before it: an in-training evaluation at the top of step ``s``
    scores the policy those tokens trained (the final evaluation's row is the step after the last)."""
    spent = {
        int(r["step"]) + 1: float(r["budget/sampled_tokens"]) for r in rows if "budget/sampled_tokens" in r
    }
    return {0: 0.0, **spent}


def heldout(rows: Rows) -> Chart | None:
    """Each in-training evaluation suite's score against the sampled tokens spent, with its 95% interval."""
    suites = eval_suites(rows)
    spent = tokens_before(rows)
    if not suites:
        return None
    fig, ax = _figure()
    for suite in suites:
        scored = [r for r in rows if f"eval/{suite}/score" in r and int(r["step"]) in spent]
        x = [spent[int(r["step"])] for r in scored]
        y = [float(r[f"eval/{suite}/score"]) for r in scored]
        lo = [float(r.get(f"eval/{suite}/ci95_lo", v)) for r, v in zip(scored, y, strict=True)]
        hi = [float(r.get(f"eval/{suite}/ci95_hi", v)) for r, v in zip(scored, y, strict=True)]
        (line,) = ax.plot(x, y, marker="o", markersize=3, label=suite)
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xlabel("sampled tokens (agent, designs and hints)")
    ax.set_ylabel("score (95% interval)")
    _legend(ax)
    return Chart("heldout", "Held-out score against sampled tokens", _svg(fig))


def time_per_phase(rows: Rows) -> Chart | None:
    """Seconds per phase and step (stacked)."""
    phases = [k for k in ("time/design_s", "time/check_s", "time/play_s", "time/update_s") if _keys(rows, k)]
    if not phases:
        return None
    fig, ax = _figure()
    _stack(ax, rows, phases, prefix="time/", bottom=[0.0] * len(rows))
    ax.set_ylabel("seconds")
    _legend(ax)
    return Chart("time", "Time per phase", _svg(fig))


def _stack(ax: Any, rows: Rows, keys: list[str], *, prefix: str, bottom: list[float]) -> None:
    """One bar per key and step, stacked on ``bottom``, labelled without ``prefix``."""
    steps = [int(r["step"]) for r in rows]
    for k in keys:
        values = [float(r.get(k, 0.0)) for r in rows]
        ax.bar(steps, values, bottom=bottom, label=k.removeprefix(prefix))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]


RATE_SUFFIX = "_per_s"
"""``speed/`` metrics ending so are rates (tokens/s); the others are shares of prompt tokens, 0 to 1."""


def _rates(rows: Rows) -> list[str]:
    return [k for k in _keys(rows, "speed/") if k.endswith(RATE_SUFFIX)]


_LINE_CHARTS: tuple[tuple[str, str, Callable[[Rows], list[str]], str], ...] = (
    (
        "win",
        "Win rate with and without hint",
        lambda r: ["agent/win_rate", "agent/win_rate_hint"],
        "win rate",
    ),
    ("returns", "Returns and designer reward", lambda r: ["agent/return_mean", "designer/reward_mean"], ""),
    ("loss", "Losses", lambda r: _keys(r, "loss/"), "loss"),
    ("eval", "Evaluation scores", lambda r: _keys(r, "eval/"), "score"),
    ("speed", "Tokens per second", _rates, "tokens/s"),
    ("archive", "Environment archive", lambda r: _keys(r, "memory/"), "environments"),
)


def reuse(rows: Rows) -> Chart | None:
    """The ``speed/`` shares (``prompt_reuse``, ``prefix_cache_hit_rate``) on their own 0-1 axis: on the
    tokens/s axis beside hundreds of tokens per second they would lie flat at zero."""
    shares = [k for k in _keys(rows, "speed/") if not k.endswith(RATE_SUFFIX)]
    return _lines(
        "reuse",
        "Prompt reuse and prefix-cache hits",
        rows,
        shares,
        "share of prompt tokens",
        ylim=(0.0, 1.05),
    )


_MEMORY = re.compile(r"(mem|rss)_(mb|gb)$")
"""Memory metrics: the trainer's ``train/peak_mem_mb`` (MiB) and ``resources/*rss_gb`` (GB, 10^9 bytes)."""


def memory(rows: Rows) -> Chart | None:
    """Memory series on one axis in GB (10^9 bytes): MiB series are converted, so 3 GB never draws as 3."""
    keys = [k for k in _keys(rows, "") if _MEMORY.search(k)]
    scale = {k: 2**20 / 1e9 if k.endswith("_mb") else 1.0 for k in keys}
    in_gb = [
        {"step": r["step"], **{k: float(r[k]) * scale[k] for k in keys if isinstance(r.get(k), int | float)}}
        for r in rows
    ]
    return _lines("mem", "Memory", in_gb, keys, "GB")


def all_charts(rows: Rows) -> list[Chart]:
    """Every chart the run has data for, in reading order."""
    lines = {key: (title, keys, ylabel) for key, title, keys, ylabel in _LINE_CHARTS}

    def line(key: str) -> Chart | None:
        title, keys, ylabel = lines[key]
        return _lines(key, title, rows, keys(rows), ylabel)

    out = [validity(rows), line("win"), line("returns"), regret(rows), heldout(rows), line("loss"), line("eval"),
           time_per_phase(rows), line("speed"), reuse(rows), memory(rows), line("archive")]  # fmt: skip
    return [Chart(c.key, c.title, _scope(c.svg, c.key)) for c in out if c is not None]


def _scope(svg: str, key: str) -> str:
    """Prefix the SVG's element ids with the chart key: many inline SVGs share one page (one id space)."""
    svg = re.sub(r'\bid="', f'id="{key}-', svg)
    svg = svg.replace("url(#", f"url(#{key}-")
    return re.sub(r'href="#', f'href="#{key}-', svg)
