"""``FitPolicy.network_baseline``: the GLM the network starts from and is
judged against on the validation rows."""

from __future__ import annotations

import numpy as np
import pytest

from autoglm_graph import FitPolicy, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients


@pytest.fixture(scope="module")
def counts():
    X, y, _ = make_varying_coefficients(
        600, 4, 2, family="poisson", noise=0.5, random_state=3
    )
    return X, y


def _fit(X, y, baseline: str, **params) -> GraphGLMRegressor:
    policy = FitPolicy(network_baseline=baseline)
    return GraphGLMRegressor(
        family="poisson", max_epochs=2, random_state=0, fit_policy=policy, **params
    ).fit(X, y)


def _glm_deviance(X, y, fit_rows: np.ndarray, scored_rows: np.ndarray) -> float:
    """Mean deviance on ``scored_rows`` of the GLM fitted on ``fit_rows``."""
    glm = GraphGLMRegressor(family="poisson", local_penalty=np.inf)
    glm.fit(X[fit_rows], y[fit_rows])
    eta = np.log(glm.predict(X[scored_rows]))
    return float(glm.family_.deviance(y[scored_rows], eta))


@pytest.mark.parametrize("baseline", ["training_rows", "all_rows"])
def test_the_network_is_judged_against_the_baseline_glm(counts, baseline):
    X, y = counts
    model = _fit(X, y, baseline)
    val = np.asarray(model._validation_positions)
    train = np.setdiff1d(np.arange(len(y)), val)
    # Epoch 0 is the network's start: no deviation from the baseline GLM.
    start = model.history_[0]["val_deviance"]
    fit_rows = train if baseline == "training_rows" else np.arange(len(y))
    assert start == pytest.approx(_glm_deviance(X, y, fit_rows, val), rel=1e-4)
    # The GLM that saw the validation rows fits them better than one that did not.
    assert _glm_deviance(X, y, np.arange(len(y)), val) < _glm_deviance(X, y, train, val)


def test_the_fitted_global_glm_is_fitted_on_all_rows_either_way(counts):
    X, y = counts
    honest, leaky = (_fit(X, y, b) for b in ("training_rows", "all_rows"))
    np.testing.assert_array_equal(honest.global_glm_.coef, leaky.global_glm_.coef)
    assert honest.history_[0]["val_deviance"] != leaky.history_[0]["val_deviance"]


def test_without_validation_rows_the_baseline_is_the_fitted_glm(counts):
    X, y = counts
    honest, leaky = (
        _fit(X, y, b, early_stopping=False) for b in ("training_rows", "all_rows")
    )
    np.testing.assert_array_equal(honest.predict(X), leaky.predict(X))


def test_a_bad_baseline_is_named():
    with pytest.raises(ValueError, match="network_baseline"):
        FitPolicy(network_baseline="train")
