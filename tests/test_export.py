"""`spade export`: the released-pool folder and the Parquet dataset, checksums, provenance, fixed-pool round trip."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from scripted_run import tiny_config, tiny_run
from spade.cli.app import main
from spade.cli.export import ExportError, export_run, verify_checksums
from spade.memory.archive import EnvStatus, Memory
from spade.run.loop import train
from spade.rundir import RunDir


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    return tiny_run(tmp_path_factory.mktemp("runs"), steps=4)


def _valid_designed(run: RunDir) -> dict[str, str]:
    with Memory.in_run_dir(run.root) as memory:
        return {r.env_id: r.code for r in memory.records(status=EnvStatus.VALID) if not r.is_seed}


def test_pool_layout_manifest_and_checksums(run: RunDir, tmp_path: Path) -> None:
    summary = export_run(run.root, tmp_path / "out")
    valid = _valid_designed(run)
    assert summary.environments == len(valid) > 0
    files = sorted((summary.pool / "games").glob("*.py"))
    assert [f.name[:11] for f in files] == [f"game_{i:05d}_" for i in range(1, len(files) + 1)]
    manifest = [json.loads(line) for line in (summary.pool / "manifest.jsonl").read_text().splitlines()]
    for row, f in zip(manifest, files, strict=True):
        assert row["file"] == f"games/{f.name}"
        assert f.name.endswith(f"_{row['created_step']:03d}_{row['skill']}.py")
        assert f.read_text() == valid[row["env_id"]]
        assert row["run"] == run.root.name
        assert {"parent_id", "doc_id", "findings", "hint", "win_rate", "regret", "plays", "history"} <= set(
            row
        )
    assert verify_checksums(summary.pool) == []
    if shutil.which("sha256sum"):
        check = subprocess.run(
            ["sha256sum", "-c", "checksums.sha256"], check=False, cwd=summary.pool, capture_output=True
        )
        assert check.returncode == 0, check.stdout
    files[0].write_text(files[0].read_text() + "\n# tampered\n")
    assert verify_checksums(summary.pool) == [f"games/{files[0].name}"]


def test_dataset_is_parquet_with_code_and_provenance(run: RunDir, tmp_path: Path) -> None:
    summary = export_run(run.root, tmp_path / "out")
    table = pq.read_table(summary.dataset / "data" / "train-00000-of-00001.parquet")
    rows = table.to_pylist()
    valid = _valid_designed(run)
    assert {r["env_id"]: r["code"] for r in rows} == valid
    assert {"skill", "created_step", "parent_id", "doc_id", "findings", "history", "sha256"} <= set(
        table.column_names
    )
    assert all(isinstance(r["history"], list) for r in rows)
    card = (summary.dataset / "README.md").read_text()
    assert "path: data/train-*.parquet" in card  # the configs entry datasets.load_dataset(folder) follows


def test_every_format_keeps_the_run_ids_and_its_line_gives_the_next_command(
    run: RunDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = {}
    for fmt in ("pool", "openenv", "verifiers"):
        out = tmp_path / fmt
        assert main(["export", str(run.root), "--out", str(out), "--format", fmt]) == 0
        line = capsys.readouterr().out
        manifest = next(out.rglob("manifest.jsonl"))
        ids[fmt] = [json.loads(row)["env_id"] for row in manifest.read_text().splitlines()]
        package = out / fmt
        name = f"spade_{fmt}_{run.root.name}"
        if fmt == "pool":
            assert f"`spade train --mode fixed_pool --pool {out / 'pool'}`" in line
            assert f"`spade eval envs {out / 'pool'} --run RUN`" in line
        elif fmt == "openenv":
            assert (package / name / "server" / "app.py").is_file()
            assert f"`cd {package} && python -m {name}.server.app --port 8000`" in line
            assert "`spade train --mode fixed_pool --pool openenv:http://127.0.0.1:8000`" in line
        else:
            assert (package / name / "taskset.py").is_file()
            assert f"`pip install {package}`" in line
            assert f"`spade train --mode fixed_pool --pool verifiers:{name}`" in line
    assert ids["pool"] == ids["openenv"] == ids["verifiers"] == list(_valid_designed(run))


def test_exported_pool_trains_with_fixed_pool(run: RunDir, tmp_path: Path) -> None:
    summary = export_run(run.root, tmp_path / "out")
    cfg = tiny_config(tmp_path, "pool-run", steps=1, mode="fixed_pool", pool=str(summary.pool))
    trained = train(cfg)
    row = trained.read_metrics()[0]
    assert row["agent/plays"] > 0
    assert row.get("agent/status/env_error", 0.0) == 0.0
    with Memory.in_run_dir(trained.root) as memory:
        pool = {r.env_id: r.skill for r in memory.records(status=EnvStatus.VALID)}
    files = sorted(p.stem for p in (summary.pool / "games").glob("*.py"))
    assert pool == {f"pool_{f}": f.split("_", 3)[3] for f in files}  # skills recovered from the file names


def test_export_refuses_to_overwrite_and_errors_are_one_line(
    run: RunDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["export", str(run.root), "--out", str(out)]) == 0
    assert "--mode fixed_pool --pool" in capsys.readouterr().out
    assert main(["export", str(run.root), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--overwrite" in err
    assert main(["export", str(run.root), "--out", str(out), "--overwrite", "--include-seeds"]) == 0
    capsys.readouterr()
    assert len(list((out / "pool" / "games").glob("*.py"))) > len(_valid_designed(run))
    with pytest.raises(ExportError, match="no environment archive"):
        export_run(tmp_path / "nothing", tmp_path / "o2")
