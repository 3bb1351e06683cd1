"""Smoke test of the benchmark runner ``benchmarks/run.py``."""

from __future__ import annotations

import importlib
import json
import math
import time
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


@pytest.fixture
def insurance(monkeypatch):
    """``benchmarks/insurance.py`` imported as a module."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("insurance")


def test_insurance_skips_without_data(insurance, tmp_path, capsys):
    out = tmp_path / "insurance"
    assert insurance.main(["--quick", "--data", str(tmp_path / "absent")]) == 0
    assert "insurance data not found" in capsys.readouterr().out
    assert not out.with_suffix(".md").exists()


@pytest.mark.timeout(300)
def test_insurance_quick_run_on_one_portfolio(insurance, tmp_path):
    if not insurance.DEFAULT_DATA.is_dir():
        pytest.skip(f"no insurance data at {insurance.DEFAULT_DATA}")
    out = tmp_path / "insurance"
    models = ["glum", "glum_cv", "graphglm", "lightgbm"]
    argv = ["--quick", "--subsample", "1000", "--portfolios", "australian"]
    assert insurance.main([*argv, "--models", *models, "--out", str(out)]) == 0
    records = json.loads(out.with_suffix(".json").read_text())["records"]
    assert len(records) == 2 * 2 * len(models)  # 2 tasks x 2 folds x models
    for record in records:
        assert math.isfinite(record["deviance"]), record
        assert -1 <= record["gini"] <= 1
        if record["model"] == "graphglm":  # balanced on its training rows
            assert abs(record["balance_train"] - 1) < 1e-8, record
        if record["model"] == "glum_cv":  # the penalty its CV chose
            assert record["note"].startswith("alpha "), record
    assert "| australian | severity | graphglm |" in out.with_suffix(".md").read_text()


def test_insurance_location_models_run_on_the_belgian_portfolio(insurance, tmp_path):
    if not insurance.DEFAULT_DATA.is_dir():
        pytest.skip(f"no insurance data at {insurance.DEFAULT_DATA}")
    out = tmp_path / "belgian"
    argv = ["--quick", "--subsample", "3000", "--portfolios", "belgian"]
    argv += ["--tasks", "frequency", "--models", "glum", "glm_location"]
    assert insurance.main([*argv, "--out", str(out)]) == 0
    records = json.loads(out.with_suffix(".json").read_text())["records"]
    assert len(records) == 2 * 2  # 2 folds x 2 models
    for record in records:
        assert math.isfinite(record["deviance"]), record
        if record["model"] == "glm_location":
            assert abs(record["balance_train"] - 1) < 1e-8, record
            assert "network" not in record["note"], record  # max_epochs=0


def test_memory_benchmark_charges_phases_to_methods_that_exist(monkeypatch):
    # memory.py wraps these by name: a rename must fail here, not in the smoke run.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    memory = importlib.import_module("memory")
    from autoglm_graph.training import TrainingState

    for name in memory.PHASES:
        assert callable(getattr(TrainingState, name)), name


def test_fit_profile_phases_cover_the_fit_and_are_unwrapped_after(monkeypatch):
    # fit_profile.py wraps these by name: a rename must fail here.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    fit_profile = importlib.import_module("fit_profile")
    originals = {
        (owner, name): getattr(owner, name)
        for targets in fit_profile.PHASES.values()
        for owner, name in targets
    }
    seconds: dict = {}
    with fit_profile.timed_phases(seconds):
        fit = fit_profile.make_suite_fit(
            fit_profile.autoglm_graph, "synthetic_multinomial", threads=1, seed=0
        )
        start = time.perf_counter()
        result = fit()
        total = time.perf_counter() - start
    for (owner, name), function in originals.items():
        assert getattr(owner, name) is function, name
    assert result["epochs"] > 0
    for phase in ("refresh", "step", "validation", "glm"):
        assert seconds[phase] > 0, phase
    # Nested phases are subtracted from the outer one: no time counted twice.
    assert sum(seconds.values()) <= total


def test_defaults_sets_a_module_constant_for_one_fit_only(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    defaults = importlib.import_module("defaults")
    from autoglm_graph import training

    saved = training.SCREENING_EPOCHS
    seen = []
    original = training.EarlyStopping.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append(self.screening)

    monkeypatch.setattr(training.EarlyStopping, "__init__", spy)
    fit = defaults.fit_once("wa_churn", 0, "training.SCREENING_EPOCHS", 1)
    assert seen == [1]
    assert training.SCREENING_EPOCHS == saved
    assert fit["epochs"] >= 1 and math.isfinite(fit["deviance"])
    # A tuple constant (an IVF ladder) is written with commas.
    assert defaults.parse_value("4,6,8") == (4, 6, 8)
    assert defaults.parse_value("0.006") == 0.006


def test_defaults_model_seed_spread_is_within_splits_only(monkeypatch):
    """The spread of one fit is the model seeds' noise on a split: a shift
    between splits (a harder split) is not counted in it."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    defaults = importlib.import_module("defaults")
    key = "deviance 0.006"
    rest = {"epochs 0.006": 10, "s 0.006": 1.0}
    fits = [
        {"dataset": "d", "seed": 0, key: 1.0, **rest},
        {"dataset": "d", "seed": 0, key: 3.0, **rest},
        {"dataset": "d", "seed": 1, key: 11.0, **rest},
        {"dataset": "d", "seed": 1, key: 13.0, **rest},
    ]
    # Residuals +-1 in each split, 2 degrees of freedom: sd sqrt(4 / 2).
    assert defaults.model_seed_spread(fits, key) == pytest.approx(math.sqrt(2) / 7)
    table = defaults.per_dataset(fits, [0.006])
    assert table[0]["mean deviance 0.006"] == 7.0
    assert table[0]["one fit's spread 0.006"] == f"{math.sqrt(2) / 7:.2%}"
    assert math.isnan(defaults.model_seed_spread(fits[::2], key))


def test_exact_search_benchmark_compares_equal_lists(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    exact_search = importlib.import_module("exact_search")
    from autoglm_graph import graph

    threshold = graph._FAISS_EXACT_MIN_ROWS
    (row,) = exact_search.main(["--sizes", "200:300", "--repeats", "1"])
    assert row["equal lists"] == 1.0
    assert row["faiss s"] > 0 and row["tiled s"] > 0
    assert graph._FAISS_EXACT_MIN_ROWS == threshold  # put back for other fits


def test_compile_step_times_a_step_and_make_step_runs_its_prepare_hook(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    compile_step = importlib.import_module("compile_step")
    step_ab = importlib.import_module("step_ab")
    import autoglm_graph
    from autoglm_graph.modules import GraphGLMNet

    row = compile_step.run_mode("eager", 300, repeats=2)
    assert row["mode"] == "eager" and row["step ms"] > 0
    prepared = []
    step_ab.make_step(autoglm_graph, 200, 4, 0, prepare=prepared.append)
    assert len(prepared) == 1 and isinstance(prepared[0], GraphGLMNet)


def test_row_order_permutes_rows_and_graph_consistently(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    row_order = importlib.import_module("row_order")
    import torch

    from autoglm_graph.graph import cosine_topk

    context = torch.randn(200, 3, generator=torch.Generator().manual_seed(0))
    graph = cosine_topk(context, n_neighbors=4)
    for order in row_order.orders(context.numpy(), graph.indices.numpy()).values():
        positions = torch.sort(torch.from_numpy(order)).values
        assert torch.equal(positions, torch.arange(200))
        x, permuted = row_order.permute(context, graph, order)
        # New row i is old row order[i], and its neighbours are the same rows.
        assert torch.equal(x, context[torch.from_numpy(order)])
        assert torch.equal(x[permuted.indices], context[graph.indices[order]])
    rows = row_order.compare(300, repeats=1)
    assert [r["order"] for r in rows] == ["given", "rcm", "kmeans"]
    assert all(r["step ms"] > 0 for r in rows)


def test_step_ops_times_every_operator_of_a_step_by_kind(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    step_ops = importlib.import_module("step_ops")
    import torch

    plain, timed, per_step = step_ops.profile_step(300, repeats=2)
    assert plain > 0 and timed > 0
    kinds = {k for k, _ in per_step}
    assert {"dense products", "sparse attention", "dropout masks"} <= kinds
    # The CSR product is sparse attention, a dense addmm a dense product.
    sparse = torch.eye(3).to_sparse_csr()
    dense = torch.ones(3, 3)
    assert step_ops.kind("addmm", (dense, sparse, dense)) == "sparse attention"
    assert step_ops.kind("addmm", (dense, dense, dense)) == "dense products"
    assert step_ops.kind("gelu", (dense,)) == "element-wise and other"


def test_refresh_bumps_scores_each_refresh_and_leaves_the_fit_alone(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    refresh_bumps = importlib.import_module("refresh_bumps")
    import bench_models
    from run import family_parameters

    from autoglm_graph import training
    from autoglm_graph.datasets import load_dataset

    build = training.TrainingState.build_graphs
    rows, scored = refresh_bumps.scored_refreshes("synthetic_multinomial", 0)
    assert training.TrainingState.build_graphs is build
    # Refreshes every 10 epochs; the first has no previous graphs to compare.
    epochs = [row["epoch"] for row in rows]
    assert epochs == list(range(11, scored.n_iter_ + 1, 10)) and epochs
    for row in rows:
        for key in ("new train graph", "new validation graph", "both new"):
            assert math.isfinite(float(row[key].rstrip("%")))
    # The same fit as without the extra scores.
    ds = load_dataset("synthetic_multinomial", random_state=0)
    task = bench_models.Task(ds.family, seed=0, threads=1, **family_parameters(ds.name))
    plain = bench_models.GraphGLMModel(task)
    plain.fit(ds.X_train, ds.y_train, ds.offset_train, groups=ds.groups_train)
    assert plain.estimator.n_iter_ == scored.n_iter_
    assert [h.get("val_deviance") for h in plain.estimator.history_] == [
        h.get("val_deviance") for h in scored.history_
    ]


def test_fit_repeats_record_the_median_seconds_of_one_repeated_fit(runner):
    runs = [
        {"status": "ok", "deviance": 1.5, "fit_s": s, "predict_s": p}
        for s, p in ((3.0, 0.3), (1.0, 0.1), (2.0, 0.5))
    ]
    record = runner._median_seconds(runs)
    assert (record["fit_s"], record["predict_s"]) == (2.0, 0.3)
    assert record["deviance"] == 1.5 and runs[0]["fit_s"] == 3.0
    runs[2]["deviance"] = 1.6  # a seeded fit that does not repeat
    with pytest.raises(RuntimeError, match="different deviances"):
        runner._median_seconds(runs)
    failed = [{"status": "error", "note": "boom"}] * 2
    assert runner._median_seconds(failed) == failed[0]
