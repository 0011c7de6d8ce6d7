"""scripts/rehearse in a short form: the paper preset through the GPU path's components on CPU.

Two vLLM OpenAI servers as the fleet, ``accelerate launch`` with 2 gloo processes and full fine-tuning,
full-weight sync to both servers after the update, Ray workers for plays and checks; one step, then a
resume for one more, at ``--scale 512`` (every count at its floor). It takes about 5 minutes of 2 cores and
17 GB of memory, so it runs on its own, after the suite: ``make test-rehearsal`` (which ``.ci/run`` runs),
or ``SPADE_REHEARSAL=1 pytest tests/test_rehearse.py``. The full rehearsal (both presets, two steps and a
resume) is run by hand; see docs/scaling.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("SPADE_REHEARSAL"),
    reason="5 minutes of 2 cores and 17 GB on its own, after the suite: make test-rehearsal",
)
@pytest.mark.xdist_group("vllm")  # one vLLM-heavy test at a time per worker (memory of 2 shared cores)
@pytest.mark.timeout(1200)
def test_the_rehearsal_runs_the_paper_preset_through_the_gpu_path_and_stops_everything(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rehearse"), "--presets", "paper", "--steps", "1",
         "--resume-steps", "1", "--scale", "512", "--out", str(tmp_path / "rehearse")],
        capture_output=True, text=True, timeout=1100, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    rows = [json.loads(line) for line in (tmp_path / "rehearse" / "paper" / "metrics.jsonl").open()]
    steps = [r for r in rows if "time/step_s" in r]
    assert [r["step"] for r in steps] == [0, 1]  # the resume continued at step 1
    for row in steps:
        assert row["train/tokens"] > 0  # a full fine-tuning update at every step ...
        assert row["time/weight_sync_s"] > 0  # ... synced to the fleet
        assert row["fleet/endpoints_up"] == 2
        assert row["cluster/workers_live"] == 2
    assert all(row.get(f"fleet/requests/{i}", 0) > 0 for i in range(2) for row in steps)
    # the retries ran: no 64-token design passes the checker, so every slot is tried twice
    assert max(row.get("designer/attempts_mean", 0) for row in steps) > 1
    for heading in ("phase", "design", "check", "play", "update", "weight sync", "projected", "rank 1"):
        assert heading in out.stdout, out.stdout[-3000:]
    seen = json.loads((tmp_path / "rehearse" / "processes.json").read_text())
    assert len(seen) > 8  # 2 servers and their engines, the launcher, 2 ranks, Ray and its workers
    assert not [pid for pid, created in seen.items() if _running(int(pid), created)]


def _running(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
