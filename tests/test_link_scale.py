"""Link-scale predictions: predict_linear, decision_function, predict_log_proba (#16).

Each is checked against the response-scale method it must agree with.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from scipy.special import expit, softmax

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients

FAST = dict(max_epochs=5, hidden_channels=16, heads=2, random_state=0, device="cpu")


@pytest.mark.parametrize("family", ["poisson", "gaussian", "gamma"])
def test_regressor_predict_linear(family):
    X, y, _ = make_varying_coefficients(300, 3, family=family, random_state=0)
    offset = np.random.default_rng(0).uniform(-0.5, 0.5, len(y))
    model = GraphGLMRegressor(family=family, **FAST).fit(X, y, offset=offset)
    eta = model.predict_linear(X, offset=offset)
    assert eta.shape == (len(y),)
    mean = model.family_.inverse_link(torch.as_tensor(eta)).numpy()
    assert_allclose(model.predict(X, offset=offset), mean)
    if family != "gaussian":  # log link
        assert_allclose(np.exp(eta), model.predict(X, offset=offset), rtol=1e-6)
    # The offset enters additively.
    with pytest.warns(UserWarning, match="fitted with an offset"):
        assert_allclose(model.predict_linear(X) + offset, eta, atol=1e-10)


def test_binary_classifier_link_scale():
    X, y, _ = make_varying_coefficients(300, 3, family="binomial", random_state=0)
    labels = np.where(y == 1, "yes", "no")
    model = GraphGLMClassifier(**FAST).fit(X, labels)
    proba = model.predict_proba(X)
    scores = model.decision_function(X)
    assert scores.shape == (len(y),)
    assert_allclose(expit(scores), proba[:, 1], rtol=1e-10)
    assert_allclose(model.predict_linear(X), scores)
    assert np.array_equal(model.classes_[(scores > 0).astype(int)], model.predict(X))
    log_proba = model.predict_log_proba(X)
    assert log_proba.shape == (len(y), 2)
    assert_allclose(np.exp(log_proba), proba, rtol=1e-10, atol=1e-300)


def test_multinomial_classifier_link_scale():
    X, y, _ = make_varying_coefficients(300, 3, family="multinomial", random_state=0)
    model = GraphGLMClassifier(**FAST).fit(X, y)
    proba = model.predict_proba(X)
    scores = model.decision_function(X)
    assert scores.shape == proba.shape == (len(y), len(model.classes_))
    assert_allclose(softmax(scores, axis=1), proba, rtol=1e-10)
    assert np.array_equal(model.classes_[scores.argmax(axis=1)], model.predict(X))
    assert_allclose(np.exp(model.predict_log_proba(X)), proba, rtol=1e-10)


def test_log_proba_is_finite_where_proba_rounds_to_zero():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] > 0).astype(int)  # separable: huge coefficients with no penalty
    model = GraphGLMClassifier(local_penalty=np.inf, alpha=0.0, device="cpu")
    model.fit(X, y)
    far = np.array([[60.0, 0.0], [-60.0, 0.0]])
    assert (model.predict_proba(far) == 0).any()
    log_proba = model.predict_log_proba(far)
    assert np.isfinite(log_proba).all()
    assert_allclose(np.exp(log_proba), model.predict_proba(far), atol=1e-300)
