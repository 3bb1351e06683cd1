"""Smoke tests of the benchmark entry points (``benchmarks/README.md``)."""

from __future__ import annotations

import importlib
import json
import math

import pytest

DATASETS = ["diabetes", "synthetic_poisson"]
MODELS = ["graphglm", "graphglm_global", "glum"]

pytest.importorskip("glum")


@pytest.fixture
def runner():
    """``benchmarks/run.py`` imported as a module."""
    return importlib.import_module("benchmarks.run")


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
def insurance():
    """``benchmarks/insurance.py`` imported as a module."""
    return importlib.import_module("benchmarks.insurance")


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


def test_ablation_fits_a_parameter_value_and_parses_values():
    ablation = importlib.import_module("benchmarks.ablation")

    params = ablation.variant_params("hidden_channels", 16)
    assert params == {"hidden_channels": 16}
    fit = ablation.fit_once("wa_churn", 0, params)
    assert fit["epochs"] >= 0 and math.isfinite(fit["deviance"])
    # A tuple field of the policy is written with commas.
    assert ablation.parse_value("4,6,8") == (4, 6, 8)
    assert ablation.parse_value("0.006") == 0.006
    assert ablation.parse_value("False") is False


def test_ablation_passes_a_fit_policy_and_sets_no_library_attribute():
    from autoglm_graph import FitPolicy

    ablation = importlib.import_module("benchmarks.ablation")
    params = ablation.variant_params("policy.screening_epochs", 1)
    assert params == {"fit_policy": FitPolicy(screening_epochs=1)}
    changed = ablation.policy_params(["distinct_rows=False", "recovery_epochs=3"])
    assert changed["fit_policy"] == FitPolicy(distinct_rows=False, recovery_epochs=3)


def test_ablation_model_seed_spread_is_within_splits_only():
    """The spread of one fit is the model seeds' noise on a split: a shift
    between splits (a harder split) is not counted in it."""
    defaults = importlib.import_module("benchmarks.ablation")
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


def test_exact_search_benchmark_compares_equal_lists():
    exact_search = importlib.import_module("benchmarks._lib.exact_search")

    (row,) = exact_search.main(["--sizes", "200:300", "--repeats", "1"])
    assert row["equal lists"] == 1.0
    assert row["faiss s"] > 0 and row["tiled s"] > 0


def test_revision_step_runs_its_prepare_hook():
    revisions = importlib.import_module("benchmarks._lib.revisions")
    import autoglm_graph
    from autoglm_graph.modules import GraphGLMNet

    prepared = []
    step, _ = revisions.make_step(autoglm_graph, 200, 4, 0, prepare=prepared.append)
    assert len(prepared) == 1 and isinstance(prepared[0], GraphGLMNet)
    assert step() > 0


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
