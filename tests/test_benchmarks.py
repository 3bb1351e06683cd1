"""Smoke tests of the benchmark entry points (``benchmarks/README.md``)."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

DATASETS = ["diabetes", "synthetic_poisson"]
MODELS = ["graphglm", "graphglm_global", "glum"]
BENCHMARKS = Path(__file__).parents[1] / "benchmarks"

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


def test_training_subset_keeps_rows_aligned_and_the_test_split_whole():
    from autoglm_graph.datasets import load_dataset

    revisions = importlib.import_module("benchmarks._lib.revisions")
    full = load_dataset("randhie", random_state=0)  # offset and groups
    small = revisions.training_subset(full, 200, seed=0)
    assert len(small.X_train) == len(small.y_train) == 200
    assert len(small.offset_train) == len(small.groups_train) == 200
    assert small.X_test is full.X_test and len(small.y_test) == len(full.y_test)
    # Each kept row is one of the full split's, with its own target and offset.
    key = full.X_train.assign(y=full.y_train, offset=full.offset_train)
    kept = small.X_train.assign(y=small.y_train, offset=small.offset_train)
    merged = kept.merge(key.drop_duplicates(), how="left", indicator=True)
    assert (merged["_merge"] == "both").all()
    again = revisions.training_subset(full, 200, seed=0)
    np.testing.assert_array_equal(again.y_train, small.y_train)


def test_unit_deviances_are_the_terms_of_the_mean_deviance():
    from autoglm_graph import get_family

    suite = importlib.import_module("benchmarks._lib.suite")
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), size=40)
    cases = {
        "poisson": (rng.poisson(2.0, 40), rng.uniform(0.5, 4.0, 40)),
        "binomial": (
            rng.integers(0, 2, 40),
            proba[:, :2] / proba[:, :2].sum(1)[:, None],
        ),
        "multinomial": (rng.integers(0, 3, 40), proba),
    }
    for name, (y, mean) in cases.items():
        family = get_family(name)
        rows = suite.unit_deviances(family, y, mean)
        assert rows.shape == (40,) and np.all(rows >= 0)
        assert rows.mean() == pytest.approx(suite.mean_deviance(family, y, mean))
        weights = rng.uniform(0.0, 2.0, 40)
        weighted = suite.mean_deviance(family, y, mean, weights)
        assert np.average(rows, weights=weights) == pytest.approx(weighted)


@pytest.mark.timeout(180)
def test_ablation_fallback_scores_each_rule_on_a_dropped_network():
    gam_fallback = importlib.import_module("benchmarks._lib.gam_fallback")
    (row,) = gam_fallback.main(["--datasets", "wa_churn", "--model-seeds", "0"])
    assert row["network kept"] is False  # wa_churn's network is dropped
    split = gam_fallback._Split("wa_churn")
    glm = split.test_deviance(split.fit(gam_fallback.GLOBAL_ONLY)[0])
    gam = split.fit({**gam_fallback.GLOBAL_ONLY, "splines": True})[0]
    gam = split.test_deviance(gam)
    assert row["test glm"] == pytest.approx(glm, rel=1e-4)
    change = float(row["GAM change"].rstrip("%"))
    se = float(row["se"].rstrip("%"))
    assert row["test lower"] == pytest.approx(gam if change < 0 else glm, rel=1e-4)
    assert row["test one se"] == pytest.approx(gam if -change > se else glm, rel=1e-4)


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
    from autoglm_graph.network.modules import GraphGLMNet

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


def _count_data(n: int = 240, seed: int = 0):
    """Small Poisson counts with an exposure, a numeric and a category column."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": pd.Categorical(rng.choice(list("xyz"), n)),
        }
    )
    offset = np.log(rng.uniform(0.5, 2.0, n))
    y = rng.poisson(np.exp(0.5 * X["a"].to_numpy() + offset)).astype(float)
    return X, y, offset


def test_tuned_lightgbm_runs_its_trials_and_scores_them_by_cv_deviance():
    pytest.importorskip("lightgbm")
    import numpy as np

    from benchmarks._lib.peers import LightGBMTunedModel
    from benchmarks._lib.task import Task

    X, y, offset = _count_data()
    task = Task("poisson", seed=1, threads=1, tuning_trials=4, tuning_folds=3)
    model = LightGBMTunedModel(task).fit(X, y, offset)

    assert len(model.study_.trials) == 4
    assert 4 <= model.best_params_["num_leaves"] <= 256
    # The best value is the family's CV deviance of the best parameters.
    folds = model._folds(X, y, None)
    again = model.cv_deviance(model.best_params_, X, y, offset, None, folds)
    assert again == pytest.approx(model.study_.best_value, rel=1e-10)
    # The refit takes the offset: twice the exposure, twice the mean.
    mean = model.predict(X, offset)
    assert np.all(mean > 0)
    np.testing.assert_allclose(model.predict(X, offset + np.log(2.0)), 2 * mean)
    assert model.note().startswith("4 trials, best CV deviance")


def test_mean_deviance_weight_two_is_a_row_counted_twice():
    import numpy as np

    from autoglm_graph import get_family
    from benchmarks._lib.suite import mean_deviance

    family = get_family("poisson")
    y, mu = np.array([0.0, 1.0, 4.0]), np.array([0.5, 1.5, 2.0])
    weighted = mean_deviance(family, y, mu, sample_weight=np.array([1.0, 1.0, 2.0]))
    twice = mean_deviance(family, np.append(y, 4.0), np.append(mu, 2.0))
    assert weighted == pytest.approx(twice, rel=1e-12)
    assert weighted != pytest.approx(mean_deviance(family, y, mu), rel=1e-3)


def test_tuned_lightgbm_folds_keep_a_unit_in_one_fold():
    pytest.importorskip("lightgbm")
    import numpy as np

    from benchmarks._lib.peers import LightGBMTunedModel
    from benchmarks._lib.task import Task

    X, y, _ = _count_data(n=90)
    groups = np.repeat(np.arange(30), 3)
    model = LightGBMTunedModel(Task("poisson", tuning_folds=3))
    for train, test in model._folds(X, y, groups):
        assert not set(groups[train]) & set(groups[test])


@pytest.mark.timeout(300)
def test_ebm_takes_the_offset_and_reports_its_time_budget_as_na():
    pytest.importorskip("interpret")
    import numpy as np

    from benchmarks._lib.peers import EBMModel
    from benchmarks._lib.task import NotApplicable, Task

    X, y, offset = _count_data(n=150)
    task = Task("poisson", seed=0, threads=1)
    model = EBMModel(task).fit(X, y, offset)
    assert model.estimator_.objective == "poisson_deviance"
    mean = model.predict(X, offset)
    assert np.all(mean > 0)
    np.testing.assert_allclose(model.predict(X, offset + np.log(2.0)), 2 * mean)

    tweedie = EBMModel(Task("tweedie", power=1.3))._estimator(None)
    assert tweedie.objective == "tweedie_deviance:variance_power=1.3"
    with pytest.raises(NotApplicable, match="time budget"):
        EBMModel(Task("poisson", threads=1, ebm_budget_s=1e-3)).fit(X, y, offset)


@pytest.mark.timeout(300)
def test_peer_runs_merge_into_one_table_with_their_lines_and_costs(runner, tmp_path):
    pytest.importorskip("lightgbm")
    pytest.importorskip("interpret")
    common = ["--quick", "--no-plot", "--no-warm-up", "--max-rows", "200"]
    common += ["--datasets", "synthetic_poisson", "--tuning-trials", "2"]
    fits, peers = tmp_path / "fits", tmp_path / "peers"
    fitted = ["graphglm", "glum", "lightgbm"]
    runner.main([*common, "--models", *fitted, "--out", str(fits)])
    runner.main([*common, "--models", "lightgbm_tuned", "ebm", "--out", str(peers)])
    merged = tmp_path / "merged"
    paths = [str(fits.with_suffix(".json")), str(peers.with_suffix(".json"))]
    report = runner.main(["--no-plot", "--out", str(merged), "--merge", *paths])

    assert report["models"] == [*fitted, "lightgbm_tuned", "ebm"]
    for record in report["records"]:
        assert record["status"] == "ok", record
    assert set(report["wins"]) == {"glum", "lightgbm", "lightgbm_tuned", "ebm"}
    markdown = merged.with_suffix(".md").read_text()
    assert "- graphglm vs lightgbm_tuned: lower test deviance on" in markdown
    assert "- graphglm vs ebm: lower test deviance on" in markdown
    columns = "| lightgbm_tuned fit s | ratio to lightgbm_tuned | ebm fit s |"
    assert columns in markdown
    assert "Median ratio to ebm **" in markdown
    with pytest.raises(SystemExit, match="two of the merged parts"):
        runner.main(["--no-plot", "--out", str(merged), "--merge", *paths, paths[1]])
    # A newer run of one model replaces its records in an older part.
    newer = tmp_path / "newer"
    runner.main([*common, "--models", "lightgbm", "--out", str(newer)])
    keep = f"{fits.with_suffix('.json').name}=graphglm,glum"
    paths = [*paths, str(newer.with_suffix(".json"))]
    report = runner.main(
        ["--no-plot", "--out", str(merged), "--merge", *paths, "--merge-models", keep]
    )
    assert report["models"] == ["graphglm", "glum", "lightgbm_tuned", "ebm", "lightgbm"]
    lightgbm = [r for r in report["records"] if r["model"] == "lightgbm"]
    newer_record = json.loads(newer.with_suffix(".json").read_text())["records"]
    assert lightgbm == newer_record
    with pytest.raises(SystemExit):
        runner.main(["--no-plot", "--out", str(merged), "--merge-models", keep])


def test_win_counts_count_the_near_losses_within_the_tolerance():
    from benchmarks._lib.report import win_counts

    def stats(deviance):
        return {"deviance": deviance, "rank": 1.0}

    summary = {
        name: {"models": {"a": stats(ours), "b": stats(theirs)}}
        for name, ours, theirs in (
            ("win", 1.0, 1.1),
            ("near", 1.01, 1.0),
            ("far", 1.1, 1.0),
        )
    }
    w = win_counts(summary, "a", ("b",), tolerance=0.02)["b"]
    assert (w["wins"], w["losses"], w["within"]) == (1, 2, ["win", "near"])


@pytest.mark.parametrize(
    "module",
    sorted(
        f"benchmarks._lib.{path.stem}"
        for path in (Path(__file__).parents[1] / "benchmarks" / "_lib").glob("*.py")
        if path.stem != "__init__"
    ),
)
def test_every_benchmark_module_imports(module):
    # An import error here names the benchmark before a smoke run does.
    importlib.import_module(module)


def _benchmark_trees():
    for path in sorted(BENCHMARKS.rglob("*.py")):
        text = path.read_text()
        yield path.relative_to(BENCHMARKS), text, ast.parse(text)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_benchmarks_use_public_library_names_only():
    """No underscore module or name of the library, in code or in text, and no
    underscore attribute read of anything but the benchmark's own objects."""
    found = []
    for path, text, tree in _benchmark_trees():
        for match in re.finditer(r"\bautoglm_graph(?:\.\w+)+", text):
            if any(_private(part) for part in match.group().split(".")):
                found.append(f"{path}: {match.group()}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "autoglm_graph"
            ):
                found += [f"{path}: {a.name}" for a in node.names if _private(a.name)]
            if isinstance(node, ast.Attribute) and _private(node.attr):
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    found.append(f"{path}:{node.lineno}: .{node.attr}")
    assert not found, found


def test_benchmarks_set_no_attribute_of_the_library():
    """A benchmark passes public parameters or compares git revisions: it
    never assigns to (or ``setattr``s) a name it imported from the library,
    nor to a revision's package."""
    found = []
    for path, _, tree in _benchmark_trees():
        library = {"autoglm_graph", "package", "baseline"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                library |= {
                    (a.asname or a.name).split(".")[0]
                    for a in node.names
                    if a.name.startswith("autoglm_graph")
                }
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "autoglm_graph"
            ):
                library |= {a.asname or a.name for a in node.names}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "delattr")
            ):
                targets = [ast.Attribute(value=node.args[0], attr="?")]
            for target in targets:
                for part in ast.walk(target):
                    root = part
                    while isinstance(root, ast.Attribute):
                        root = root.value
                    if (
                        isinstance(part, ast.Attribute)
                        and isinstance(root, ast.Name)
                        and root.id in library
                    ):
                        found.append(f"{path}:{node.lineno}: {root.id}")
    assert not found, found


def test_peers_do_not_import_the_models_registry():
    """``models`` registers the peers; both share ``task``: no import cycle."""
    tree = ast.parse((BENCHMARKS / "_lib" / "peers.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    }
    assert "benchmarks._lib.models" not in imported
    assert "benchmarks._lib.task" in imported
    models = importlib.import_module("benchmarks._lib.models")
    task = importlib.import_module("benchmarks._lib.task")
    assert models.Task is task.Task and models.NotApplicable is task.NotApplicable


def test_intervals_report_a_model_that_is_the_global_glm():
    """Such a model has no bootstrap members: its Wald intervals are read."""
    intervals = importlib.import_module("benchmarks._lib.intervals")
    args = argparse.Namespace(
        n_train=150,
        n_test=100,
        members=3,
        level=0.9,
        bias="pilot",
        pilot_rows_per_coef=15,
        local_penalty=math.inf,
    )
    row = intervals.run_seed("poisson", 0, args)
    assert row["global only"] == "True / 0 of 0"
    assert row["members fit s"] == 0.0 and row["bias est"] == 0.0
    for key in ("coverage", "coverage eta", "width", "members sd"):
        assert 0.0 < row[key] < math.inf, key
    assert row["far / near width"] == pytest.approx(1.0)  # the same on every row


def test_heterogeneity_oracle_replays_the_generators_centres():
    from autoglm_graph.datasets import make_varying_coefficients

    het = importlib.import_module("benchmarks._lib.heterogeneity")
    X, _, _, group = make_varying_coefficients(
        3000,
        4,
        n_groups=3,
        family="poisson",
        random_state=1,
        group_separation=3.0,
        return_groups=True,
        n_group_features=2,
    )
    centres = het.replay_centres(1, group, 3.0, 2)
    # Each row is its group's centre plus N(0, 1) noise; 1000 rows per group.
    for g in range(3):
        np.testing.assert_allclose(X[group == g].mean(axis=0), centres[g], atol=0.15)
    assert np.all(centres[:, 2:] == 0)
    closest = min(
        np.linalg.norm(centres[a] - centres[b]) for a, b in ((0, 1), (0, 2), (1, 2))
    )
    assert closest == pytest.approx(3.0)
    with pytest.raises(RuntimeError, match="draws its groups differently"):
        het.replay_centres(2, group, 3.0, 2)


def test_heterogeneity_oracle_fits_the_slope_of_least_deviance():
    het = importlib.import_module("benchmarks._lib.heterogeneity")
    rng = np.random.default_rng(0)
    base, step = rng.normal(size=500), rng.normal(size=500)
    y = rng.poisson(np.exp(base + 0.7 * step)).astype(float)
    eta = het.fitted_slope_eta(base, step, y)
    # The Poisson score equation of the slope holds at the fitted eta.
    assert abs(np.sum(step * (np.exp(eta) - y))) < 1e-8 * np.sum(y)
    slope = np.mean((eta - base) / step)
    assert slope == pytest.approx(0.7, abs=0.15)
    gains = np.array([rng.normal(1.0, 1.0, 400), rng.normal(0.0, 1.0, 400)])
    p = het.gain_p_values(gains)
    assert p[0] < 1e-6 < 0.01 < p[1]


def test_search_cache_runs_its_trials_in_order_in_one_search():
    from autoglm_graph.datasets import make_varying_coefficients

    search_cache = importlib.import_module("benchmarks._lib.search_cache")
    X, y, _ = make_varying_coefficients(1500, 4, family="poisson", random_state=0)
    args = argparse.Namespace(epochs=2, hidden=8)
    trials = [(8, 0.0), (4, 0.1)]
    done = search_cache.search_trials(X, y, trials, args)
    assert len(done) == 2
    assert all(seconds > 0 and math.isfinite(deviance) for seconds, deviance in done)


def test_ensemble_mean_averages_the_linear_predictors():
    suite = importlib.import_module("benchmarks._lib.suite")
    a, b = np.array([1.0, 4.0]), np.array([4.0, 1.0])
    np.testing.assert_allclose(suite.ensemble_mean("poisson", [a, b]), [2.0, 2.0])
    np.testing.assert_allclose(suite.ensemble_mean("gaussian", [a, b]), [2.5, 2.5])
    p = np.array([[0.2, 0.8], [0.5, 0.5]])
    q = np.array([[0.8, 0.2], [0.5, 0.5]])
    np.testing.assert_allclose(suite.ensemble_mean("binomial", [p, q]), 0.5)
    np.testing.assert_allclose(suite.ensemble_mean("multinomial", [p, p]), p)


def test_fingerprint_lines_hash_the_fit():
    from benchmarks._lib import fingerprint

    assert fingerprint.digest([1.0, 2.0]) == fingerprint.digest([1.0, 2.0 + 1e-12])
    assert fingerprint.digest([1.0, 2.0]) != fingerprint.digest([1.0, 2.001])
    (line,) = fingerprint.main(["--datasets", "diabetes", "--max-epochs", "2"])
    name, kept, _epoch, predictions, coefficients = line.split()
    assert name == "diabetes" and kept in ("True", "False")
    assert len(predictions) == len(coefficients) == 12
