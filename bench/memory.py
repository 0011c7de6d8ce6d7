"""Peak memory of the pieces of a cpu-tiny run, each against its baseline, every case in a fresh process.

- engine: the vllm engine (cpu-tiny's KV cache) in worker processes vs in this process
  (``model.vllm.in_process``); peak RSS summed over the process tree, and the start time;
- step: one trainer step on ``--episodes`` episodes of ``--tokens`` tokens (the length of a long lock game),
  plain vs checkpointed layers (``trainer.gradient_checkpointing``) vs that plus ``trainer.compact_heap``;
- merge: merging a rank-8 all-linear adapter into the embedded model through peft vs tensor by tensor
  (what the engine loads after every update).

    python bench/memory.py [--json] [--repeats 1] [--episodes 4] [--tokens 900]

Figures are the median over ``--repeats`` fresh processes; peaks are the high-water RSS (``VmHWM``) minus the
process's RSS after its imports, so each is what the piece adds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CASES = {
    "engine": ("processes", "in_process"),
    "step": ("plain", "checkpointed", "checkpointed+compact"),
    "merge": ("peft", "streamed"),
}


def _status_gb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / 1e9
    return 0.0


def _engine(variant: str) -> dict[str, float]:
    from spade.backends.vllm_engine import VLLMPolicy  # noqa: PLC0415
    from spade.config import CPU_TINY  # noqa: PLC0415
    from spade.resources import peak_rss_gb  # noqa: PLC0415

    base = _status_gb("VmRSS")
    vllm = dataclasses.replace(CPU_TINY.model.vllm, in_process=variant == "in_process")
    t0 = time.perf_counter()
    policy = VLLMPolicy.from_config(dataclasses.replace(CPU_TINY.model, vllm=vllm))
    seconds = time.perf_counter() - t0
    peak = peak_rss_gb()  # the tree: this process and the engine's
    policy.close()
    return {"peak_gb": peak - base, "seconds": seconds}


def _step(variant: str, episodes: int, tokens: int) -> dict[str, float]:
    from spade.config import CPU_TINY  # noqa: PLC0415
    from spade.training.trainer import TorchTrainer  # noqa: PLC0415
    from spade.types import TrainSample  # noqa: PLC0415

    trainer_cfg = dataclasses.replace(
        CPU_TINY.trainer,
        gradient_checkpointing=variant != "plain",
        compact_heap=variant == "checkpointed+compact",
    )
    trainer = TorchTrainer(trainer_cfg, CPU_TINY.model)
    rng = random.Random(0)
    samples = []
    for i in range(episodes):  # a lock game: every 8th-ish token is the agent's
        ids = tuple(rng.randrange(1000, 20000) for _ in range(tokens))
        mask = tuple(int(j % 60 > 52) for j in range(tokens))
        samples.append(TrainSample(ids, mask, tuple(-1.0 * m for m in mask), (-1.0) ** i, "agent"))
    base = _status_gb("VmRSS")
    t0 = time.perf_counter()
    trainer.train_step(samples)
    return {"peak_gb": _status_gb("VmHWM") - base, "seconds": time.perf_counter() - t0}


def _merge(variant: str) -> dict[str, float]:
    import peft  # noqa: F401, PLC0415 -- both variants start with the same modules loaded
    import transformers  # noqa: F401, PLC0415

    from spade.backends import merge  # noqa: PLC0415
    from spade.backends.embedded import resolve_model  # noqa: PLC0415

    base_dir = resolve_model("embedded")
    root = Path(tempfile.mkdtemp(prefix="bench-merge-"))
    script = (
        "import sys, torch; from peft import LoraConfig, get_peft_model; "
        "from transformers import AutoModelForCausalLM; torch.manual_seed(0); "
        "c = LoraConfig(r=8, lora_alpha=16, target_modules='all-linear', init_lora_weights=False); "
        "get_peft_model(AutoModelForCausalLM.from_pretrained(sys.argv[1]), c).save_pretrained(sys.argv[2])"
    )
    subprocess.run([sys.executable, "-c", script, str(base_dir), str(root / "adapter")], check=True)
    base = _status_gb("VmRSS")
    t0 = time.perf_counter()
    if variant == "peft":
        merge._merge_with_peft(base_dir, root / "adapter", root / "merged")
    else:
        merge.merge_adapter(base_dir, root / "adapter", root / "merged")
    return {"peak_gb": _status_gb("VmHWM") - base, "seconds": time.perf_counter() - t0}


def _one(case: str, variant: str, args: argparse.Namespace) -> dict[str, float]:
    if case == "engine":
        return _engine(variant)
    if case == "step":
        return _step(variant, args.episodes, args.tokens)
    return _merge(variant)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=900)
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--one", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(_one(*args.one, args)))
        return
    out: dict[str, Any] = {}
    for case in args.cases:
        rows: dict[str, dict[str, float]] = {}
        for variant in CASES[case]:
            runs = []
            for _ in range(args.repeats):
                cmd = [sys.executable, __file__, "--one", case, variant]
                cmd += ["--episodes", str(args.episodes), "--tokens", str(args.tokens)]
                done = subprocess.run(cmd, check=True, capture_output=True, text=True)
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            rows[variant] = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
        baseline = rows[CASES[case][0]]
        for row in rows.values():
            row["peak_ratio"] = round(row["peak_gb"] / baseline["peak_gb"], 2)
            row["time_ratio"] = round(row["seconds"] / baseline["seconds"], 2)
        out[case] = rows
        if not args.json:
            for variant, row in rows.items():
                print(f"{case:6s} {variant:22s} {row}", flush=True)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
