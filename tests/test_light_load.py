"""A model that is the global GLM loads and predicts without torch.

The families' formulas are written once for torch tensors and numpy arrays
(the numpy path is what such a prediction runs), and a fresh process that
loads a GLM-only model and predicts imports neither torch nor
torch_geometric.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph._lazy import LazyModule
from autoglm_graph.families import FAMILIES, get_family

# Every family, and every link of the Tweedie family.
FAMILY_CASES = [
    ("gaussian", {}),
    ("binomial", {}),
    ("multinomial", {}),
    ("poisson", {}),
    ("gamma", {}),
    ("tweedie", {"power": 0.0}),
    ("tweedie", {"power": 1.0}),
    ("tweedie", {"power": 1.5}),
    ("tweedie", {"power": 2.0}),
    ("tweedie", {"power": 3.0}),
    ("negative_binomial", {"theta": 0.7}),
]


def _family_data(family, rng):
    """y in the family's range and eta, for 40 rows (and 3 classes)."""
    n = 40
    if family.multi_output:
        eta = rng.normal(size=(n, 3)) * 3
        y = np.eye(3)[rng.integers(0, 3, n)]
        return y, eta
    eta = rng.normal(size=n) * 3
    eta[:3] = [-40.0, 0.0, 40.0]  # far tails: saturated probabilities, large means
    if family.name == "binomial":
        y = rng.integers(0, 2, n).astype(np.float64)
        y[-1] = 0.25  # a fractional proportion
    elif family.link_name == "identity":
        y = rng.normal(size=n)
    elif family.in_y_range(np.zeros(1))[0]:
        y = rng.poisson(2.0, n).astype(np.float64)  # zeros included
    else:
        y = rng.gamma(2.0, 1.0, n)
    return y, eta


@pytest.mark.parametrize(
    ("name", "params"),
    FAMILY_CASES,
    ids=[f"{n}-{p.get('power', p.get('theta', ''))}" for n, p in FAMILY_CASES],
)
def test_numpy_formulas_equal_torch(name, params):
    """link, inverse link, deviances, variance and probabilities of numpy
    arrays equal those of float64 tensors (one formula serves both)."""
    family = get_family(name, **params)
    y, eta = _family_data(family, np.random.default_rng(0))
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    t = torch.as_tensor

    def same(from_numpy, from_torch):
        assert isinstance(from_numpy, np.ndarray | np.generic)
        np.testing.assert_allclose(
            from_numpy, from_torch.numpy(), rtol=1e-12, atol=1e-300
        )

    mu = family.inverse_link(eta)
    same(mu, family.inverse_link(t(eta)))
    mu_inside = np.clip(mu, 1e-6, 1e6)  # link of finite, non-saturated means
    same(family.link(mu_inside), family.link(t(mu_inside)))
    same(family.unit_variance(mu), family.unit_variance(t(mu)))
    same(family.unit_deviance(y, eta), family.unit_deviance(t(y), t(eta)))
    same(family.deviance(y, eta), family.deviance(t(y), t(eta)))
    same(family.deviance(y, eta, w), family.deviance(t(y), t(eta), t(w)))
    if family.is_classification:
        eta2 = eta.reshape(len(eta), -1)
        same(family.predict_proba(eta2), family.predict_proba(t(eta2)))
        same(family.predict_log_proba(eta2), family.predict_log_proba(t(eta2)))


def test_every_family_is_covered():
    assert {name for name, _ in FAMILY_CASES} == set(FAMILIES)


def test_numpy_formulas_are_silent_as_torch():
    """log(0) and overflow give infinities without a RuntimeWarning, as torch."""
    import warnings

    family = get_family("tweedie", power=1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(family.inverse_link(np.array([1000.0]))).all()
        assert np.isfinite(family.unit_deviance(np.zeros(2), np.zeros(2))).all()


def test_lazy_module_imports_at_first_attribute():
    lazy = LazyModule("json")
    assert "not imported yet" in repr(lazy)
    assert lazy.dumps([1]) == "[1]"
    assert "imported" in repr(lazy) and "not" not in repr(lazy)
