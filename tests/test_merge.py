"""Merging a LoRA adapter tensor by tensor gives the weights peft's ``merge_and_unload`` gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from spade.backends.merge import INDEX, merge_adapter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _adapter(tiny_dir: Path, out: Path, **kw: object) -> Path:
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False, **kw)  # type: ignore[arg-type]
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_dir), config).save_pretrained(out)
    return out


def _peft_merged(tiny_dir: Path, adapter: Path) -> dict[str, torch.Tensor]:
    from peft import PeftModel  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    merged = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_dir), adapter
    ).merge_and_unload()
    return merged.state_dict()


def _loaded(folder: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    return AutoModelForCausalLM.from_pretrained(folder).state_dict()


@pytest.mark.parametrize("rslora", [False, True])
def test_streamed_merge_equals_peft_and_loads_as_a_sharded_model(
    tiny_dir: Path, tmp_path: Path, rslora: bool
) -> None:
    adapter = _adapter(tiny_dir, tmp_path / "adapter", use_rslora=rslora)
    out = merge_adapter(tiny_dir, adapter, tmp_path / "merged", shard_bytes=1 << 16)
    index = json.loads((out / INDEX).read_text())
    assert len(set(index["weight_map"].values())) > 2  # small shards: the model is written in pieces
    expected, got = _peft_merged(tiny_dir, adapter), _loaded(out)
    base = _loaded(tiny_dir)
    assert expected.keys() == got.keys()
    changed = 0
    for name, want in expected.items():
        # Same operations in the same order as peft's merge: equal up to the last bit on any one machine,
        # compared with an fp32 round-off allowance all the same.
        assert torch.allclose(
            got[name], want, rtol=0, atol=8 * torch.finfo(torch.float32).eps * want.abs().max()
        )
        changed += not torch.equal(got[name], base[name])
    assert changed > 0


def test_other_adapters_are_merged_through_peft(tiny_dir: Path, tmp_path: Path) -> None:
    adapter = _adapter(tiny_dir, tmp_path / "adapter", use_dora=True)
    out = merge_adapter(tiny_dir, adapter, tmp_path / "merged")
    expected, got = _peft_merged(tiny_dir, adapter), _loaded(out)
    assert all(torch.allclose(got[n], w, atol=1e-6) for n, w in expected.items())


@pytest.mark.parametrize("dora", [False, True])
def test_a_merge_is_written_in_the_engines_dtype(tiny_dir: Path, tmp_path: Path, dora: bool) -> None:
    """A bfloat16 engine loads bfloat16 weights: the merge at full precision, rounded once when written."""
    adapter = _adapter(tiny_dir, tmp_path / "adapter", use_dora=dora)
    out = merge_adapter(tiny_dir, adapter, tmp_path / "merged", dtype=torch.bfloat16)
    from safetensors.torch import load_file  # noqa: PLC0415

    written = [t for f in out.glob("*.safetensors") for t in load_file(f).values()]
    assert written
    assert all(t.dtype == torch.bfloat16 for t in written)
    expected, got = _peft_merged(tiny_dir, adapter), _loaded(out)
    assert expected.keys() == got.keys()
    for name, want in expected.items():
        # rounding nearly equal float32 values may land one bfloat16 step apart
        step = torch.finfo(torch.bfloat16).eps * want.abs().max()
        assert torch.allclose(got[name].float(), want.to(torch.bfloat16).float(), rtol=0, atol=step)


def test_an_adapter_for_another_model_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file  # noqa: PLC0415

    adapter = _adapter(tiny_dir, tmp_path / "adapter")
    tensors = load_file(adapter / "adapter_model.safetensors")
    renamed = {k.replace("layers.0.", "layers.9."): v for k, v in tensors.items()}
    save_file(renamed, adapter / "adapter_model.safetensors")
    with pytest.raises(ValueError, match="match no base weight"):
        merge_adapter(tiny_dir, adapter, tmp_path / "merged")


def test_a_truncated_base_file_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    import shutil  # noqa: PLC0415

    adapter = _adapter(tiny_dir, tmp_path / "adapter")
    base = tmp_path / "base"
    shutil.copytree(tiny_dir, base)
    weights = next(base.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-64])
    with pytest.raises(ValueError, match="cut short"):
        merge_adapter(base, adapter, tmp_path / "merged")
