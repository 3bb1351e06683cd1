"""Under treatment coding the network varies every level of a categorical
column (its head over the all-levels design) and its deviations are reported
in the treatment basis (issue #37): the expand/reduce maps of ``GLMTerms``,
the reported coefficients against predictions, constraints and saving."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from numpy.testing import assert_allclose

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.persistence._io import load_model, save_model

FAST = dict(max_epochs=3, random_state=0, device="cpu", fit_policy=None)


def _frame(n: int = 1000, seed: int = 0):
    """Counts whose age effect is far from linear and whose region effect
    changes sign with age: a network that beats the global GLM."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "region": rng.choice(
                ["north", "south", "east", "west"], n, p=[0.2, 0.4, 0.3, 0.1]
            ),
            "car": rng.choice(["small", "large"], n, p=[0.6, 0.4]),
        }
    )
    effect = X["region"].map({"north": 0.0, "south": 0.3, "east": -0.2, "west": 0.6})
    eta = (
        1
        + 1.5 * np.sin(X["age"] / 5)
        + effect * np.sign(X["age"] - 40)
        + 0.4 * (X["car"] == "large")
    )
    return X, rng.poisson(np.exp(eta)).astype(float)


def _user_design(model, X) -> np.ndarray:
    """The GLM's terms of X in the user's units (one-hot levels as 0/1)."""
    terms = model.predictor().glm_terms
    design = model.predictor().design(X)[:, terms.columns]
    return design * terms.scale + terms.shift


def _bases(model) -> set:
    terms = model.predictor().glm_terms
    names = model.preprocessor_.get_feature_names_out()
    return {str(names[b]) for b, _ in terms.varied_bases or ()}


@pytest.fixture(scope="module")
def fitted():
    X, y = _frame()
    return GraphGLMRegressor(family="poisson", **FAST).fit(X, y), X, y


def test_reduce_keeps_the_linear_predictor_of_one_hot_rows(fitted):
    model, X, _ = fitted
    terms = model.predictor().glm_terms
    design = model.predictor().design(X)
    assert _bases(model) == {"region_south", "car_small"}
    rng = np.random.default_rng(1)
    full = rng.normal(size=(len(X), 1, 1 + terms.n_network_terms))
    reduced = terms.reduce(full)
    assert reduced.shape == (len(X), 1, 1 + terms.n_terms)
    eta_full = full[:, 0, 0] + np.sum(
        full[:, 0, 1:] * design[:, terms.network_columns], 1
    )
    eta_reduced = reduced[:, 0, 0] + np.sum(
        reduced[:, 0, 1:] * design[:, terms.columns], 1
    )
    assert_allclose(eta_reduced, eta_full, rtol=1e-12, atol=1e-12)
    as_tensor = terms.reduce(torch.as_tensor(full))
    assert_allclose(as_tensor.numpy(), reduced, rtol=1e-12, atol=1e-12)
    theta = rng.normal(size=(1, 1 + terms.n_terms))
    assert_allclose(terms.reduce(terms.expand(theta)), theta)


def test_a_base_levels_deviation_moves_into_the_intercept(fitted):
    model, _, _ = fitted
    terms = model.predictor().glm_terms
    names = ["intercept", *map(str, terms.names)]
    (base, levels), _ = terms.varied_bases  # region's base and its other levels
    network = ["intercept", *(str(n) for n in terms.network_columns)]
    delta = np.zeros((1, 1, 1 + terms.n_network_terms))
    delta[0, 0, 1 + list(terms.network_columns).index(base)] = 0.7
    reduced = dict(zip(names, terms.reduce(delta)[0, 0], strict=True))
    level_names = {str(model.preprocessor_.get_feature_names_out()[c]) for c in levels}
    assert len(network) == len(names) + 2
    assert reduced["intercept"] == pytest.approx(0.7)
    for name, value in reduced.items():
        expected = -0.7 if name in level_names else 0.0
        if name != "intercept":
            assert value == pytest.approx(expected)


def test_predictions_are_the_reported_coefficients_on_the_treatment_design(fitted):
    model, X, _ = fitted
    terms = model.predictor().glm_terms
    head = model._fitted.net.head[-1]
    assert head.out_features == 1 + terms.n_terms + 2  # two base levels more
    local = model.local_coef(X)
    assert list(local.columns) == ["intercept", *model.feature_names_out_]
    eta = local["intercept"].to_numpy() + np.sum(
        local[list(model.feature_names_out_)].to_numpy() * _user_design(model, X), 1
    )
    assert_allclose(np.log(model.predict(X)), eta, rtol=1e-6, atol=1e-9)
    # The network moved the base levels too: the reported levels of a row
    # differ from the global contrasts by more than the intercept's move.
    assert local["region_west"].std() > 0


@pytest.mark.parametrize(
    "global_terms, kept",
    [
        (["region_west"], {"car_small"}),
        (["region"], {"car_small"}),
        (["intercept"], set()),
        (["age"], {"region_south", "car_small"}),
    ],
)
def test_a_term_held_global_has_no_spread(global_terms, kept):
    X, y = _frame()
    model = GraphGLMRegressor(family="poisson", global_terms=global_terms, **FAST).fit(
        X, y
    )
    assert _bases(model) == kept
    local = model.local_coef(X)
    columns = [c for c in local.columns if c.startswith(global_terms[0])]
    assert columns
    for column in columns:
        assert np.ptp(local[column].to_numpy()) <= 1e-12
    others = [c for c in local.columns if c not in columns]
    assert max(np.ptp(local[c].to_numpy()) for c in others) > 1e-6


@pytest.mark.parametrize(
    "local_sign, kept",
    [
        ({"region_west": "positive"}, {"car_small"}),
        ({"age": "positive"}, {"region_south", "car_small"}),
    ],
)
def test_a_signed_term_keeps_its_sign(local_sign, kept):
    X, y = _frame()
    model = GraphGLMRegressor(family="poisson", local_sign=local_sign, **FAST).fit(X, y)
    assert _bases(model) == kept
    ((term, _),) = local_sign.items()
    local = model.local_coef(X)[term].to_numpy()
    assert np.all(local > 0)
    assert np.ptp(local) > 0
    eta = model.local_coef(X).to_numpy()
    eta = eta[:, 0] + np.sum(eta[:, 1:] * _user_design(model, X), 1)
    assert_allclose(np.log(model.predict(X)), eta, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "params",
    [
        dict(fit_intercept=False),
        dict(categorical_coding="all_levels"),
        dict(splines=["age"]),
    ],
)
def test_the_network_varies_the_glms_terms_only(params):
    X, y = _frame()
    model = GraphGLMRegressor(family="poisson", **params, **FAST).fit(X, y)
    terms = model.predictor().glm_terms
    assert terms.varied_bases is None
    assert terms.n_network_terms == terms.n_terms
    if model._fitted is not None:  # (splines may leave the network nothing)
        assert model._fitted.net.head[-1].out_features == 1 + terms.n_terms


def test_a_formula_keeps_its_terms():
    X, y = _frame()
    model = GraphGLMRegressor(
        family="poisson", formula="y ~ age + C(region)", **FAST
    ).fit(X.assign(y=y))
    terms = model.predictor().glm_terms
    assert terms.varied_bases is None
    assert terms.n_network_terms == terms.n_terms
    if model._fitted is not None:  # (splines may leave the network nothing)
        assert model._fitted.net.head[-1].out_features == 1 + terms.n_terms


def test_save_load_keeps_the_network_basis(fitted, tmp_path):
    model, X, _ = fitted
    same = load_model(save_model(model, tmp_path / "m.zip"))
    assert same.predictor().glm_terms.varied_bases == (
        model.predictor().glm_terms.varied_bases
    )
    assert_allclose(same.predict(X), model.predict(X), rtol=1e-12)
    assert_allclose(same.local_coef(X), model.local_coef(X), rtol=1e-12)


def test_the_base_levels_reported_coefficient_is_zero(fitted):
    model, X, y = fitted
    table = model.factor_table(X, y).set_index("term")
    for base in ("region_south", "car_small"):
        row = table.loc[base]
        assert row["coef"] == 0.0
        assert row["local_q05"] == row["local_q95"] == 1.0
    assert table.loc["region_west", "local_q05"] < table.loc["region_west", "local_q95"]


def test_classifier_probabilities_are_the_reported_coefficients():
    X, y = _frame()
    classes = np.digitize(y, [2, 5])
    model = GraphGLMClassifier(**FAST).fit(X, classes)
    assert model.predictor().glm_terms.varied_bases is not None
    assert model._fitted is not None
    local = model.local_coef(X)
    design = _user_design(model, X)
    terms = list(model.feature_names_out_)
    eta = np.stack(
        [
            local[k]["intercept"].to_numpy()
            + np.sum(local[k][terms].to_numpy() * design, 1)
            for k in model.classes_
        ],
        axis=1,
    )
    proba = np.exp(eta - eta.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    assert_allclose(model.predict_proba(X), proba, rtol=1e-6, atol=1e-9)
