"""Merge a LoRA adapter into its base model's weights, one tensor at a time.

A merged model folder is what an engine without LoRA kernels loads after every update. Building it through
peft (load the base, wrap it, ``merge_and_unload``, save) holds a second full model in memory; on a laptop
that is the largest transient of a step. Here each base tensor is read from its safetensors file with plain
reads (no memory map: the pages stay in the page cache, not in the process), the adapter's ``scale · B @ A``
is added where it applies, and the result goes to shards of at most ``shard_bytes`` with a
``model.safetensors.index.json``, as transformers writes large models. At most one shard is held at once.

Only plain LoRA adapters merge this way (what :class:`~spade.training.trainer.TorchTrainer` writes: no DoRA,
bias, modules to save or per-module ranks); any other adapter is merged through peft.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

INDEX = "model.safetensors.index.json"
_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_PLAIN = {  # adapter_config.json fields that must keep these values (or be absent) for ``scale · B @ A``
    "use_dora": False,
    "fan_in_fan_out": False,
    "bias": "none",
    "lora_bias": False,
}
_EMPTY = ("modules_to_save", "rank_pattern", "alpha_pattern", "target_parameters", "layer_replication")


def merge_adapter(
    base_dir: Path,
    adapter_dir: Path,
    out_dir: Path,
    *,
    shard_bytes: int = 64 << 20,
    dtype: torch.dtype | None = None,
) -> Path:
    """Write ``base + adapter`` (merged) as a model folder (config, sharded weights, index); returns ``out_dir``.

    ``dtype``: write floating-point weights in this dtype (the loading engine's), after merging at the base's
    precision; None keeps the base's.

    Raises:
        ValueError: an adapter tensor names no weight of the base model.
    """
    base_dir, adapter_dir, out_dir = Path(base_dir), Path(adapter_dir), Path(out_dir)
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    if not _is_plain(config):
        return _merge_with_peft(base_dir, adapter_dir, out_dir, dtype)
    deltas = _lora_pairs(adapter_dir)
    scale = config["lora_alpha"] / (config["r"] ** 0.5 if config.get("use_rslora") else config["r"])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "generation_config.json"):
        if (base_dir / name).is_file():
            shutil.copyfile(base_dir / name, out_dir / name)
    writer = _ShardWriter(out_dir, shard_bytes)
    for name, tensor in _read_tensors(base_dir):
        pair = deltas.pop(name, None)
        if pair is not None:
            a, b = pair
            tensor.add_((scale * (b.to(torch.float32) @ a.to(torch.float32))).to(tensor.dtype))
        writer.add(name, tensor.to(dtype) if dtype is not None and tensor.is_floating_point() else tensor)
    writer.close()
    if deltas:
        raise ValueError(f"{adapter_dir}: adapter weights for {sorted(deltas)[:3]} match no base weight")
    return out_dir


def _is_plain(config: dict[str, Any]) -> bool:
    if config.get("peft_type") != "LORA":
        return False
    if any(config.get(k, v) != v for k, v in _PLAIN.items()):
        return False
    return not any(config.get(k) for k in _EMPTY)


def _lora_pairs(adapter_dir: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{base weight name: (A, B)}`` from the adapter's tensors (peft names them ``base_model.model.<module>``)."""
    from safetensors.torch import load_file  # noqa: PLC0415

    tensors = load_file(adapter_dir / "adapter_model.safetensors")
    pairs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for key, a in tensors.items():
        if not key.endswith(".lora_A.weight"):
            if not key.endswith(".lora_B.weight"):
                raise ValueError(f"{adapter_dir}: {key} is not a LoRA A/B weight")
            continue
        module = key.removesuffix(".lora_A.weight").removeprefix("base_model.model.")
        pairs[module + ".weight"] = (a, tensors[key.replace(".lora_A.", ".lora_B.")])
    return pairs


def _read_tensors(model_dir: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor of the model's safetensors files, read into fresh memory one at a time."""
    index = model_dir / INDEX
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = [p.name for p in sorted(model_dir.glob("*.safetensors"))]
    for file in files:
        with (model_dir / file).open("rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
            header.pop("__metadata__", None)
            for name, meta in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
                begin, end = meta["data_offsets"]
                tensor = torch.empty(meta["shape"], dtype=_DTYPES[meta["dtype"]])
                if end - begin != tensor.numel() * tensor.element_size():
                    raise ValueError(f"{file}: {name} holds {end - begin} bytes, not {meta['shape']}")
                f.seek(8 + size + begin)
                if f.readinto(tensor.view(-1).view(torch.uint8).numpy()) != end - begin:
                    raise ValueError(f"{file}: {name} is cut short (a truncated file)")
                yield name, tensor


class _ShardWriter:
    """Collects tensors into safetensors shards of at most ``limit`` bytes (one larger tensor: its own shard)."""

    def __init__(self, out_dir: Path, limit: int) -> None:
        self.out_dir, self.limit = out_dir, limit
        self.pending: dict[str, torch.Tensor] = {}
        self.pending_bytes = 0
        self.weight_map: dict[str, str] = {}
        self.total = 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending and self.pending_bytes + size > self.limit:
            self._flush()
        self.pending[name] = tensor
        self.pending_bytes += size
        self.total += size

    def close(self) -> None:
        self._flush()
        index = {"metadata": {"total_size": self.total}, "weight_map": self.weight_map}
        (self.out_dir / INDEX).write_text(json.dumps(index, indent=2))

    def _flush(self) -> None:
        from safetensors.torch import save_file  # noqa: PLC0415

        if not self.pending:
            return
        file = f"model-{len(set(self.weight_map.values())) + 1:05d}.safetensors"
        save_file(self.pending, self.out_dir / file, metadata={"format": "pt"})
        self.weight_map.update(dict.fromkeys(self.pending, file))
        self.pending, self.pending_bytes = {}, 0


def _merge_with_peft(base_dir: Path, adapter_dir: Path, out_dir: Path, dtype: torch.dtype | None) -> Path:
    from peft import PeftModel  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    base = AutoModelForCausalLM.from_pretrained(base_dir)
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    if dtype is not None:
        merged = merged.to(dtype)
    merged.save_pretrained(out_dir)
    return out_dir
