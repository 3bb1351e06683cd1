"""Smoke test of the benchmark runner ``benchmarks/run.py``."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
DATASETS = ["diabetes", "synthetic_poisson"]
MODELS = ["graphglm", "graphglm_global", "glum"]

pytest.importorskip("glum")


@pytest.fixture
def runner(monkeypatch):
    """``benchmarks/run.py`` imported as a module (it imports its siblings)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("run")


@pytest.mark.timeout(180)
def test_quick_run_writes_one_finite_result_per_dataset_and_model(runner, tmp_path):
    out = tmp_path / "smoke"
    runner.main(
        [
            "--quick",
            "--no-plot",
            "--out",
            str(out),
            "--datasets",
            *DATASETS,
            "--models",
            *MODELS,
        ]
    )

    report = json.loads(out.with_suffix(".json").read_text())
    pairs = [(r["dataset"], r["model"]) for r in report["records"]]
    assert sorted(pairs) == sorted((d, m) for d in DATASETS for m in MODELS)
    for record in report["records"]:
        assert record["status"] == "ok", record
        assert math.isfinite(record["deviance"]), record
        assert record["deviance"] >= 0
    assert report["command"].startswith("python benchmarks/run.py --quick")
    assert {"cpu_count", "platform", "versions"} <= set(report["machine"])
    assert not out.with_suffix(".png").exists()

    markdown = out.with_suffix(".md").read_text()
    assert "| dataset | family | n_train | graphglm | graphglm_global | glum |" in (
        markdown
    )
    for name in DATASETS:
        assert f"| `{name}` |" in markdown
    assert "**mean rank**" in markdown
    assert "graphglm vs glum:" in markdown

    # The global GLM and glum fit the same penalised GLM on the same design.
    for name in DATASETS:
        stats = report["summary"][name]["models"]
        ours, glum = stats["graphglm_global"]["deviance"], stats["glum"]["deviance"]
        assert ours == pytest.approx(glum, rel=1e-4), name
