"""`spade report`: the page renders in a real headless browser; transcripts are kept readable and pruned."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path
from typing import get_args

import pytest

from scripted_run import tiny_run
from spade import transcripts
from spade.cli.app import main
from spade.cli.report import write_report
from spade.cli.report_charts import all_charts, tokens_before
from spade.cli.report_html import transcript
from spade.config import TranscriptConfig
from spade.design.hints import HintReason
from spade.rundir import RunDir


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    return tiny_run(tmp_path_factory.mktemp("runs"), steps=6)


def _browser() -> tuple[object, str]:
    """Playwright's sync API and the system chromium (scripts/setup-system installs it)."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415
    except ImportError:
        sync_playwright = None
    if chromium is None or sync_playwright is None:
        message = "needs Debian's chromium and the playwright package (scripts/setup-system, make setup)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright, chromium


def test_report_loads_in_headless_chromium_and_every_chart_renders(run: RunDir, tmp_path: Path) -> None:
    sync_playwright, chromium = _browser()
    summary = write_report(run.root, tmp_path / "report.html")
    assert summary.charts >= 8
    assert summary.environments > 0
    assert summary.episodes > 0
    errors: list[str] = []
    remote: list[str] = []
    with sync_playwright() as p:  # type: ignore[operator]
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None
        )
        page.goto(summary.path.as_uri())
        boxes = page.evaluate(
            "Array.from(document.querySelectorAll('figure.chart')).map(f => {"
            "const s = f.querySelector('svg'); const b = s ? s.getBoundingClientRect() : {width: 0, height: 0};"
            "return [f.dataset.chart, b.width, b.height, s ? s.querySelectorAll('path').length : 0]; })"
        )
        page.screenshot(path=str(tmp_path / "report-top.png"))
        # the archive table is interactive: filtering hides rows, a click opens a record's details
        page.fill("#filter", "rejected")
        shown = page.evaluate(
            "Array.from(document.querySelectorAll('tr.rec')).filter(r => r.style.display !== 'none')"
            ".map(r => r.cells[1].textContent)"
        )
        page.fill("#filter", "")
        page.click("tr.rec >> nth=0")
        detail_visible = page.is_visible("tr.detail >> nth=0")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert errors == []
    assert remote == []
    assert len(boxes) == summary.charts
    for key, width, height, paths in boxes:
        assert min(width - 100, height - 50, paths - 3) > 0, key
    assert shown
    assert set(shown) == {"rejected"}
    assert detail_visible
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_report_is_self_contained(run: RunDir, tmp_path: Path) -> None:
    html = write_report(run.root, tmp_path / "r.html").path.read_text()
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", html)
    assert "@import" not in html
    assert "url(http" not in html
    for section in ("curves", "archive", "rejected", "episodes"):
        assert f'id="{section}"' in html
    assert 'class="hl"' in html  # highlighted source (pygments)
    assert "shown to the model" in html
    assert "HINT:" in html


def test_eval_scores_and_regret_error_are_drawn_when_logged() -> None:
    rows = [
        {"step": s, "designer/regret_mean": 0.1 * s, "designer/regret_se": 0.05, "eval/gsm8k": 0.2 + s / 10}
        for s in range(3)
    ]
    charts = {c.key: c for c in all_charts(rows)}
    assert "eval" in charts
    assert "gsm8k" in charts["eval"].svg
    assert "± SE" in charts["regret"].title
    assert "validity" not in charts  # nothing designed, nothing drawn
    ids = re.findall(r'id="([^"]+)"', "".join(c.svg for c in charts.values()))
    assert len(ids) == len(set(ids))  # inline SVGs share one page: ids must not collide
    assert "heldout" not in charts  # no eval/<suite>/score: nothing to draw against tokens


def test_held_out_scores_are_drawn_against_sampled_tokens() -> None:
    rows = [
        {"step": 0, "agent/plays": 8.0, "budget/sampled_tokens": 500.0, "eval/envs/score": 0.1,
         "eval/envs/ci95_lo": 0.0, "eval/envs/ci95_hi": 0.2},
        {"step": 1, "agent/plays": 8.0, "budget/sampled_tokens": 1100.0},
        {"step": 2, "eval/envs/score": 0.3, "eval/envs/ci95_lo": 0.2, "eval/envs/ci95_hi": 0.4},
    ]  # fmt: skip
    assert tokens_before(rows) == {0: 0.0, 1: 500.0, 2: 1100.0}  # the final evaluation follows the last step
    chart = {c.key: c for c in all_charts(rows)}["heldout"]
    assert chart.title == "Held-out score against sampled tokens"
    assert "sampled tokens" in chart.svg
    assert ">envs<" in chart.svg


def _ticks(svg: str, axis: str) -> list[str]:
    """The tick labels of one axis of a chart's SVG."""
    return re.findall(rf'<g id="[a-z]+-{axis}tick_\d+">.*?<text[^>]*>([^<]*)</text>', svg, re.S)


def test_a_one_step_run_gets_whole_step_ticks() -> None:
    rows = [{"step": 0, "agent/win_rate": 0.5, "time/play_s": 3.0, "designer/envs": 4, "memory/valid": 2}]
    charts = all_charts(rows)
    assert {"win", "time", "validity", "archive"} <= {c.key for c in charts}
    for chart in charts:
        labels = [t.replace("\u2212", "-").lstrip("-") for t in _ticks(chart.svg, "x")]
        assert labels, chart.key
        assert all(label.isdigit() for label in labels), (chart.key, labels)


def test_memory_is_drawn_in_one_unit() -> None:
    """The trainer logs MiB and resources/ GB: on one axis, 3 GB must not draw as 0 next to 2048 MiB."""
    rows = [
        {"step": s, "resources/peak_rss_gb": 3.0, "resources/rss_gb": 2.5, "train/peak_mem_mb": 2048.0}
        for s in range(3)
    ]
    svg = {c.key: c for c in all_charts(rows)}["mem"].svg
    assert ">GB<" in svg
    assert ">MB<" not in svg
    values = [float(t.replace("\u2212", "-")) for t in _ticks(svg, "y")]
    assert 2.9 <= max(values) < 4  # 3 GB tops the axis; 2048 MiB is 2.15 GB, not 2048
    assert min(values) <= 2.2


def test_shares_get_their_own_axis_not_the_tokens_per_second_one() -> None:
    """speed/prompt_reuse and speed/prefix_cache_hit_rate are 0-1 shares: beside 400 tokens/s they would lie
    flat at zero, so they go on a 0-1 chart of their own and the tokens/s chart holds only rates."""
    rows = [
        {"step": s, "speed/sampled_tokens_per_s": 400.0 + s, "speed/prompt_reuse": 0.8,
         "speed/prefix_cache_hit_rate": 0.7}
        for s in range(3)
    ]  # fmt: skip
    charts = {c.key: c for c in all_charts(rows)}
    legend = {key: set(re.findall(r">(speed/[a-z_]+)<", c.svg)) for key, c in charts.items()}
    assert legend["speed"] == {"speed/sampled_tokens_per_s"}
    assert legend["reuse"] == {"speed/prompt_reuse", "speed/prefix_cache_hit_rate"}
    assert ">tokens/s<" in charts["speed"].svg
    shares = [float(t.replace("\u2212", "-")) for t in _ticks(charts["reuse"].svg, "y")]
    assert max(shares) <= 1.05
    assert min(shares) >= 0.0


def test_cli_report_and_a_damaged_transcript_is_named_not_fatal(
    run: RunDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run.root, copy)
    damaged = transcripts.files(copy, "play")[-1].path
    damaged.write_bytes(damaged.read_bytes()[:20])
    assert main(["report", str(copy)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Report: {copy / 'report.html'}")
    assert damaged.name in out
    assert main(["report", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "not a run directory" in err


# -- transcripts and samples ---------------------------------------------------------------------------------


def test_an_episode_says_in_words_how_it_ended() -> None:
    record = {
        "step": 3,
        "seed": 7,
        "hinted": False,
        "return": 0.0,
        "success": False,
        "status": "context_budget",
    }
    html = transcript(record)
    assert "ended: the context budget ran out (play.context_tokens)" in html
    assert "context_budget" not in html


def test_transcripts_hold_readable_episodes_and_designs(run: RunDir) -> None:
    plays = list(transcripts.iter_records(run.root, "play"))
    assert plays
    assert {p["hinted"] for p in plays} == {True, False}
    first = plays[0]
    assert {"env_id", "seed", "hinted", "return", "status", "success", "turns", "segments"} <= set(first)
    assert first["segments"][0]["role"] == "context"
    assert "You are playing a text game" in first["segments"][0]["content"]
    assert any(s["role"] == "assistant" and "\\boxed" in s["content"] for s in first["segments"])
    assert any(p["final_observation"] for p in plays if p["status"] == "terminated")
    designs = list(transcripts.iter_records(run.root, "design"))
    assert {d["valid"] for d in designs} == {True, False}
    rejected = [d for d in designs if not d["valid"] and d["findings"]]
    assert rejected
    assert rejected[0]["findings"][0]["message"]
    assert all(d["messages"][0]["role"] == "system" and d["reply"] for d in designs)
    for d in designs:  # every hint call, kept or refused, with what the model wrote
        assert all(call["reason"] in get_args(HintReason) and call["reply"] for call in d["hint_calls"])
        assert bool(d["hint_calls"]) == d["valid"]
        kept = any(call["reason"] in ("ok", "capped") for call in d["hint_calls"])
        assert kept == (d["hint"] is not None)
    # compact: a whole step of transcripts is smaller than one raw token-id sample used to be
    assert max(f.path.stat().st_size for f in transcripts.files(run.root)) < 40_000


def test_per_env_retention_keeps_paired_arms(run: RunDir) -> None:
    step0 = transcripts.read(transcripts.path_of(run.root, 0, "play"))
    per_arm: dict[tuple[str, bool], list[int]] = {}
    for r in step0:
        per_arm.setdefault((r["env_id"], r["hinted"]), []).append(r["seed"])
    assert max(len(v) for v in per_arm.values()) == TranscriptConfig().episodes_per_env
    for (env_id, hinted), seeds in per_arm.items():
        if hinted:
            assert seeds == per_arm[(env_id, False)]  # common random numbers: the same instances


def test_step_retention_keeps_recent_and_milestone_steps(tmp_path: Path) -> None:
    for step in range(25):
        transcripts.write(tmp_path, step, "play", [{"step": step}])
    gone = transcripts.prune(tmp_path, 24, keep_last=5, keep_every=10)
    kept = [f.step for f in transcripts.files(tmp_path)]
    assert kept == [0, 10, 20, 21, 22, 23, 24]
    assert len(gone) == 25 - len(kept)
    transcripts.prune(tmp_path, 24, keep_last=2, keep_every=0)
    assert [f.step for f in transcripts.files(tmp_path)] == [23, 24]


def test_designer_samples_are_pruned_once_no_checkpoint_needs_them(run: RunDir) -> None:
    names = {p.stem for p in (run.root / "samples").glob("*.json")}
    assert not any(n.startswith("s00000_") for n in names)  # credited at step 1, no checkpoint awaits them
    assert any(n.startswith("s00004_") for n in names)  # the newest regeneration's stay
    # their text is still readable in the design transcripts
    step0 = transcripts.read(transcripts.path_of(run.root, 0, "design"))
    assert step0
    assert all(d["env_id"].startswith("s00000_") for d in step0)


def test_transcripts_are_gzipped_json_lines(run: RunDir) -> None:
    f = transcripts.files(run.root)[0].path
    lines = gzip.decompress(f.read_bytes()).decode().splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)


@pytest.mark.slow
def test_segments_decode_a_real_chat_template(tiny_dir: Path) -> None:
    """The real path: a Hugging Face tokenizer's chat template, prompt (mask 0) then sampled ids (mask 1)."""
    from transformers import AutoTokenizer  # noqa: PLC0415

    from spade.backends.template import HFChatTemplate  # noqa: PLC0415

    template = HFChatTemplate(AutoTokenizer.from_pretrained(tiny_dir))
    prompt = template.render([{"role": "user", "content": "Guess 1-4."}], add_generation_prompt=True)
    reply = template.encode("I guess \\boxed{3}")
    tokens = (*prompt, *reply)
    mask = (0,) * len(prompt) + (1,) * len(reply)
    got = transcripts.segments(tokens, mask, template.decode)
    assert [s["role"] for s in got] == ["context", "assistant"]
    assert "Guess 1-4." in got[0]["content"]
    assert got[1]["content"] == "I guess \\boxed{3}"
