"""Behaviour of GraphGLMRegressor and GraphGLMClassifier (invariants of DESIGN.md)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import (
    GammaRegressor,
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    TweedieRegressor,
)
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients

# Small, fast networks for tests: the invariants hold at any size.
FAST = {"hidden_channels": 16, "heads": 2, "max_epochs": 15, "n_neighbors": 8}


def _standardised(n=400, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = StandardScaler().fit_transform(rng.normal(size=(n, p)))
    eta = 0.3 + X @ np.linspace(-0.4, 0.5, p)
    return rng, X, eta


# ------------------------------------------------------------------- nesting
@pytest.mark.parametrize(
    ("family", "reference", "make_y"),
    [
        ("poisson", PoissonRegressor, lambda r, eta: r.poisson(np.exp(eta))),
        ("gamma", GammaRegressor, lambda r, eta: r.gamma(2.0, np.exp(eta) / 2.0)),
        ("tweedie", None, lambda r, eta: r.poisson(np.exp(eta)) * r.gamma(2.0, 1.0)),
        ("gaussian", None, lambda r, eta: eta + r.normal(size=eta.shape)),
    ],
)
@pytest.mark.parametrize("alpha", [1e-3, 0.1])
def test_nests_sklearn_glm_regressors(family, reference, make_y, alpha):
    rng, X, eta = _standardised()
    y = make_y(rng, eta).astype(float)
    # The default balance="auto" leaves the gamma and tweedie MLEs as fitted.
    model = GraphGLMRegressor(family=family, alpha=alpha, local_penalty=np.inf)
    model.fit(X, y)
    if family == "tweedie":
        ref = TweedieRegressor(
            power=1.5, link="log", alpha=alpha, tol=1e-12, max_iter=10_000
        )
    elif family == "gaussian":
        ref = Ridge(alpha=alpha * len(y), tol=1e-12)  # sum of squares scaling
    else:
        ref = reference(alpha=alpha, tol=1e-12, max_iter=10_000)
    ref.fit(X, y)
    assert model.is_global_only_
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(model.predict(X), ref.predict(X), rtol=1e-3)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_nests_logistic_regression(n_classes):
    rng, X, _ = _standardised(n=500)
    logits = X @ rng.normal(size=(X.shape[1], n_classes))
    y = np.array([rng.choice(n_classes, p=np.exp(r) / np.exp(r).sum()) for r in logits])
    alpha = 1e-2
    model = GraphGLMClassifier(alpha=alpha, local_penalty=np.inf).fit(X, y)
    ref = LogisticRegression(C=1.0 / (alpha * len(y)), tol=1e-12, max_iter=10_000)
    ref.fit(X, y)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-3, atol=1e-6)
    centred = lambda b: b - b.mean() if n_classes > 2 else b  # noqa: E731
    np.testing.assert_allclose(
        centred(model.intercept_), centred(ref.intercept_), rtol=1e-3, atol=1e-6
    )
    np.testing.assert_allclose(model.predict_proba(X), ref.predict_proba(X), atol=1e-5)


# ------------------------------------------- prediction is a function of the row
@pytest.fixture(scope="module")
def fitted_poisson():
    X, y, _ = make_varying_coefficients(600, 4, 3, family="poisson", random_state=0)
    # Determinism to the bit is the CPU's invariant (CUDA's atomic sums may
    # add in another order).
    model = GraphGLMRegressor(
        family="poisson", random_state=0, device="cpu", **FAST
    ).fit(X, y)
    return model, X, y


def test_batch_independence(fitted_poisson):
    model, X, _ = fitted_poisson
    assert model.network_ is not None
    full = model.predict(X[:40])
    single = np.array([model.predict(X[i : i + 1])[0] for i in range(40)])
    np.testing.assert_allclose(full, single, rtol=1e-5)
    # A new row's neighbours are training rows only: other query rows don't matter.
    np.testing.assert_allclose(model.predict(X[:40][::-1])[::-1], full, rtol=1e-5)


def test_determinism_and_pickle(fitted_poisson):
    model, X, y = fitted_poisson
    again = clone(model).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), again.predict(X))
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model.predict(X), restored.predict(X))
    assert restored.network_ is not None


def test_state_round_trip(fitted_poisson):
    """from_state(to_state()) is the same model; an unfitted estimator's
    state is its parameters, validated as fit validates them."""
    model, X, _ = fitted_poisson
    state = model.to_state()
    assert state["estimator"] == "GraphGLMRegressor"
    assert state["params"] == model.get_params(deep=False)
    same = GraphGLMRegressor.from_state(state)
    assert same.get_params() == model.get_params()
    np.testing.assert_array_equal(same.predict(X), model.predict(X))
    pd.testing.assert_frame_equal(same.local_coef(X[:5]), model.local_coef(X[:5]))
    pd.testing.assert_frame_equal(same.explain(X[:2]), model.explain(X[:2]))
    assert same.best_epoch_ == model.best_epoch_
    assert same.history_ == model.history_
    unfitted = GraphGLMRegressor(alpha=0.5).to_state()
    assert set(unfitted) == {"estimator", "params"}
    assert not hasattr(GraphGLMRegressor.from_state(unfitted), "global_glm_")
    with pytest.raises(ValueError, match="heads"):
        GraphGLMRegressor.from_state({"params": {"heads": 3, "hidden_channels": 8}})


@pytest.mark.parametrize("cls", [GraphGLMRegressor, GraphGLMClassifier])
def test_estimators_are_one_class_of_the_package(cls):
    """No mixin of the package: the estimator's parts are objects it calls."""
    from autoglm_graph.estimators import BaseGraphGLM

    ours = [k for k in cls.__mro__ if k.__module__.startswith("autoglm_graph")]
    assert ours == [cls, BaseGraphGLM]


def test_different_seeds_differ(fitted_poisson):
    model, X, y = fitted_poisson
    other = clone(model).set_params(random_state=1).fit(X, y)
    assert not np.array_equal(model.predict(X), other.predict(X))


def test_local_coef_and_explain(fitted_poisson):
    model, X, _ = fitted_poisson
    coef = model.local_coef(X[:5])
    assert list(coef.columns) == ["intercept", *model.feature_names_out_]
    eta = coef["intercept"].to_numpy() + np.einsum(
        "np,np->n", coef.iloc[:, 1:].to_numpy(), np.asarray(X[:5], dtype=float)
    )
    np.testing.assert_allclose(np.exp(eta), model.predict(X[:5]), rtol=1e-5)
    explanation = model.explain(X[:3])
    assert set(explanation["row"]) == {0, 1, 2}
    sums = explanation.groupby("row")["attention"].sum()
    np.testing.assert_allclose(sums, 1.0, rtol=1e-5)
    assert explanation["neighbor"].between(0, len(X) - 1).all()


def test_pipeline_and_grid_search():
    X, y, _ = make_varying_coefficients(300, 3, 3, family="gaussian", random_state=1)
    pipe = make_pipeline(StandardScaler(), GraphGLMRegressor(random_state=0, **FAST))
    glm = GraphGLMRegressor(local_penalty=np.inf).fit(X, y)
    assert pipe.fit(X, y).score(X, y) > glm.score(X, y) + 0.1
    search = GridSearchCV(
        GraphGLMRegressor(random_state=0, **FAST), {"threshold": [0.0, 0.5]}, cv=2
    )
    search.fit(X, y)
    assert search.best_params_["threshold"] in (0.0, 0.5)


def test_dataframe_with_categoricals_and_nan(mixed_frame, mixed_target):
    model = GraphGLMRegressor(family="gamma", random_state=0, **FAST)
    model.fit(mixed_frame, mixed_target)
    pred = model.predict(mixed_frame.iloc[:10])
    assert np.all(np.isfinite(pred)) and np.all(pred > 0)
    assert list(model.feature_names_in_) == list(mixed_frame.columns)
    unseen = mixed_frame.iloc[:3].copy()
    unseen["region"] = ["atlantis", None, "north"]
    assert np.all(np.isfinite(model.predict(unseen)))
    explanation = model.explain(mixed_frame.iloc[[5]])
    assert explanation["neighbor"].isin(mixed_frame.index).all()


def test_sample_weight_equals_repeated_rows():
    rng, X, eta = _standardised(n=200)
    y = rng.poisson(np.exp(eta)).astype(float)
    w = rng.integers(1, 4, size=len(y))
    # Unpenalised, so that the preprocessing's (unweighted) standardisation,
    # which repetition changes, cannot move the predictions.
    weighted = GraphGLMRegressor(family="poisson", alpha=0.0, local_penalty=np.inf)
    weighted.fit(X, y, sample_weight=w)
    repeated = clone(weighted).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-5)
    # The graph model too: same data, same held-out quality (approximately).
    X_test, y_test = X[:100], y[:100]
    full_w = GraphGLMRegressor(family="poisson", random_state=0, **FAST)
    full_r = clone(full_w)
    score_w = full_w.fit(X, y, sample_weight=w).score(X_test, y_test)
    score_r = full_r.fit(np.repeat(X, w, axis=0), np.repeat(y, w)).score(X_test, y_test)
    assert abs(score_w - score_r) < 0.1


def test_offset_acts_as_exposure():
    rng, X, eta = _standardised(n=800)
    exposure = rng.uniform(0.2, 5.0, size=len(eta))
    y = rng.poisson(exposure * np.exp(eta)).astype(float)
    model = GraphGLMRegressor(family="poisson", random_state=0, **FAST)
    model.fit(X, y, offset=np.log(exposure))
    naive = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    truth = np.linspace(-0.4, 0.5, X.shape[1])
    assert np.abs(model.coef_ - truth).max() < 0.1
    assert np.abs(model.coef_ - truth).max() < np.abs(naive.coef_ - truth).max()
    base = model.predict(X[:20])
    np.testing.assert_allclose(
        model.predict(X[:20], offset=np.full(20, np.log(3.0))), 3.0 * base, rtol=1e-5
    )


# --------------------------------------------------- heterogeneous data: it wins
@pytest.mark.parametrize("family", ["gaussian", "poisson", "binomial"])
def test_beats_global_glm_on_varying_coefficients(family):
    X, y, coef = make_varying_coefficients(
        2000, 4, 3, family=family, noise=0.5, random_state=0
    )
    train, test = slice(0, 1500), slice(1500, None)
    est = GraphGLMClassifier if family == "binomial" else GraphGLMRegressor
    params = {} if family == "binomial" else {"family": family}
    graph = est(random_state=0, max_epochs=150, **params).fit(X[train], y[train])
    glm = est(local_penalty=np.inf, **params).fit(X[train], y[train])
    assert not graph.is_global_only_
    assert _test_deviance(graph, X[test], y[test]) < 0.9 * _test_deviance(
        glm, X[test], y[test]
    )
    # local_coef is in the user's units, as the true coefficients are.
    truth = coef[test]
    rmse = lambda m: np.sqrt(  # noqa: E731
        ((m.local_coef(X[test]).to_numpy() - truth) ** 2).mean()
    )
    assert rmse(graph) < 0.95 * rmse(glm)


def _test_deviance(model, X, y):
    family = model.family_
    if isinstance(model, GraphGLMClassifier):
        eta = torch.logit(torch.as_tensor(model.predict_proba(X)[:, 1]))
        yt = torch.as_tensor(model.classes_.searchsorted(y), dtype=torch.float64)
    else:
        eta = family.link(torch.as_tensor(model.predict(X)))
        yt = torch.as_tensor(y, dtype=torch.float64)
    return family.deviance(yt, eta).item()


# ------------------------------------------------------------------- no leakage
def test_no_leakage_on_noise_targets():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 5))
    y = rng.normal(size=1200)  # pure noise: nothing to learn
    train, test = slice(0, 900), slice(900, None)
    model = GraphGLMRegressor(random_state=0, **{**FAST, "max_epochs": 60})
    model.fit(X[train], y[train])
    history = [h["train_deviance"] for h in model.history_ if "train_deviance" in h]
    assert min(history) > 0.5 * np.var(y[train])  # never learns its own target
    glm = GraphGLMRegressor(local_penalty=np.inf).fit(X[train], y[train])
    mse = lambda m: np.mean((m.predict(X[test]) - y[test]) ** 2)  # noqa: E731
    assert mse(model) > 0.97 * mse(glm)


# ------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "y", "match"),
    [
        ({"family": "poisson"}, -np.ones(30), "poisson.*y >= 0"),
        ({"family": "gamma"}, np.zeros(30), "gamma.*y > 0"),
        ({"family": "multinomial"}, np.ones(30), "classification"),
        ({"family": "nonsense"}, np.ones(30), "Unknown family"),
        ({"heads": 3}, np.ones(30), "'heads' parameter must divide hidden_channels=64"),
        ({"n_neighbors": 0}, np.ones(30), "n_neighbors"),
        ({"graph_space": "latent"}, np.ones(30), "graph_space"),
        ({}, np.r_[np.nan, np.ones(29)], "NaN"),
        ({}, np.r_[np.inf, np.ones(29)], "infinity"),
        # Each failed inside scikit-learn or torch with another message.
        ({"validation_fraction": 1.0}, np.ones(30), "'validation_fraction'.*< 1"),
        ({"callbacks": [1]}, np.ones(30), "on_epoch_end.*got 1"),
        ({"callbacks": 5}, np.ones(30), "'callbacks' parameter must be a list"),
        ({"device": "meta"}, np.ones(30), "'device' parameter.*got 'meta'"),
        # A numpy scalar is printed as the number, not as np.float64(-1.0).
        ({"alpha": np.float64(-1.0)}, np.ones(30), r"'alpha'.*>= 0; got -1\.0\.$"),
    ],
)
def test_bad_input_raises(params, y, match):
    X = np.random.default_rng(0).normal(size=(30, 3))
    with pytest.raises(ValueError, match=match):
        GraphGLMRegressor(**params).fit(X, y)


def test_bad_shapes_and_weights_raise():
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = np.abs(X[:, 0])
    with pytest.raises(ValueError, match="0 sample"):
        GraphGLMRegressor().fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="offset"):
        GraphGLMRegressor().fit(X, y, offset=np.zeros(5))
    with pytest.raises(ValueError, match="sample_weight"):
        GraphGLMRegressor().fit(X, y, sample_weight=np.ones(5))
    with pytest.raises(ValueError, match="Negative values"):
        GraphGLMRegressor().fit(X, y, sample_weight=-np.ones(30))
    with pytest.raises(ValueError, match=r"got 1 class \(1\)\.$"):  # not np.int64(1)
        GraphGLMClassifier().fit(X, np.ones(30, dtype=np.int64))
    model = GraphGLMRegressor(local_penalty=np.inf).fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        model.predict(X[:, :2])
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    model = GraphGLMRegressor(local_penalty=np.inf).fit(frame, y)
    with pytest.raises(ValueError, match="feature names"):
        model.predict(frame.rename(columns={"c": "d"}))


def test_string_labels_multiclass():
    X, y, _ = make_varying_coefficients(400, 3, 3, family="gaussian", random_state=0)
    bins = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    labels = np.array(["low", "mid", "high"])[bins]
    model = GraphGLMClassifier(random_state=0, **FAST).fit(X, labels)
    assert set(model.predict(X)) <= {"low", "mid", "high"}
    proba = model.predict_proba(X[:7])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    # One coefficient per class and term (a GAM fallback adds spline terms).
    assert model.coef_.shape == (3, len(model.feature_names_out_))
    assert model.feature_names_out_.size >= X.shape[1]
    assert model.local_coef(X[:2]).columns.nlevels == 2


def test_groups_keep_units_apart():
    rng = np.random.default_rng(0)
    unit = np.repeat(np.arange(150), 4)  # 150 people, 4 rows each
    X = rng.normal(size=(150, 3))[unit] + 0.05 * rng.normal(size=(600, 3))
    # Slopes that flip with the sign of x0 (learnable), plus a personal level.
    y = 2 * np.sign(X[:, 0]) * X[:, 1] + 0.3 * rng.normal(size=150)[unit]
    model = GraphGLMRegressor(random_state=0, **FAST).fit(X, y, groups=unit)
    assert not model.is_global_only_
    positions = model._fitted.positions
    train_units = set(unit[positions])
    val_units = set(unit) - train_units
    assert val_units and not val_units & train_units
    graph = model._fitted.training_graph()
    own = unit[positions][graph.indices.cpu().numpy()]
    rows = unit[positions][:, None]
    assert not np.any((own == rows) & graph.mask.cpu().numpy())
    with pytest.raises(ValueError, match="groups"):
        GraphGLMRegressor(local_penalty=np.inf).fit(X, y, groups=unit[:10])


def test_targets_too_large_for_float32_are_named_not_blamed_on_the_lr():
    """Before: "The training loss became nan at epoch 1; lower learning_rate"
    for data the global GLM fits; huge weights failed the same way."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + rng.normal(size=300)) * 1e20  # (y - mu)**2 overflows float32
    with pytest.raises(FloatingPointError, match=r"first epoch.*largest \|y\| [0-9]"):
        GraphGLMRegressor(**FAST).fit(X, y)
    glm = GraphGLMRegressor(local_penalty=np.inf).fit(X, y)  # the way out it names
    assert np.isfinite(glm.coef_).all()
    counts = rng.poisson(np.exp(0.3 * X[:, 0])).astype(float)
    # One seed for both: the same fit but for the weights' scale (without it,
    # each fit's seed came from numpy's global state, which earlier tests move).
    huge = GraphGLMRegressor(family="poisson", random_state=0, **FAST)
    huge.fit(X, counts, sample_weight=np.full(300, 1e300))  # relative weights
    same = GraphGLMRegressor(family="poisson", random_state=0, **FAST).fit(X, counts)
    np.testing.assert_allclose(huge.predict(X), same.predict(X), rtol=1e-5)


@pytest.mark.parametrize(
    ("estimator", "y", "match"),
    [
        (GraphGLMRegressor, ["1", "a"] * 15, r"numeric y; 15 value\(s\).*'a'"),
        (GraphGLMClassifier, ["p", None] * 15, r"15 missing label\(s\) \(row 1"),
        (GraphGLMClassifier, ["p", 1] * 15, "mix strings and other values"),
    ],
    ids=["regressor-text", "classifier-missing", "classifier-mixed"],
)
def test_bad_targets_are_named(estimator, y, match):
    """Each failed with an inherited message that did not name the problem
    ("could not convert string to float", "'<' not supported between
    instances of 'NoneType' and 'str'", "Unknown label type")."""
    X = np.random.default_rng(0).normal(size=(30, 3))
    with pytest.raises(ValueError, match=match):
        estimator(local_penalty=np.inf).fit(X, np.array(y, dtype=object))
