"""heterogeneity_test: per-term evidence that a coefficient varies."""

from __future__ import annotations

import numpy as np
import pytest

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.heterogeneity import heterogeneity_test

COLUMNS = [
    "global",
    "local_sd",
    "deviance_gain",
    "relative_gain",
    "std_err",
    "ci_lower",
    "ci_upper",
    "z",
    "p_value",
    "varies",
]


def _data(n: int, seed: int):
    """Poisson data of 3 latent groups: intercept, x0, x1 vary; x2, x3 do not."""
    X, _, coef = make_varying_coefficients(
        n, 4, n_groups=3, family="poisson", random_state=seed
    )
    coef = coef.copy()
    mean = coef[:, 1:3].mean(axis=0)
    coef[:, 1:3] = mean + 2.0 * (coef[:, 1:3] - mean)
    coef[:, 3:] = coef[:, 3:].mean(axis=0)  # one slope for every row
    eta = coef[:, 0] + np.sum(X * coef[:, 1:], axis=1)
    return X, np.random.default_rng(seed).poisson(np.exp(eta)).astype(float)


def test_global_glm_has_no_evidence():
    X, y = _data(300, 0)
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    table = heterogeneity_test(model, X, y)
    assert list(table.columns) == COLUMNS
    assert list(table.index) == ["intercept", "x0", "x1", "x2", "x3"]
    assert (table["deviance_gain"] == 0).all()
    assert (table["p_value"] == 1).all()
    assert not table["varies"].any()


def test_finds_the_varying_terms_on_one_seed():
    # 3,000 rows: at 2,000 this seed's x0 sat at the edge (p 0.037, then 0.071
    # after a change of the network's random stream alone); here the varying
    # terms have p <= 0.001 and the constant ones p >= 0.37. Power and size
    # over seeds are the slow test's.
    X, y = _data(6000, 0)
    model = GraphGLMRegressor(family="poisson", random_state=0, n_jobs=1)
    model.fit(X[:3000], y[:3000])
    assert not model.is_global_only_
    table = heterogeneity_test(model, X[3000:], y[3000:])
    assert table.loc[["intercept", "x0", "x1"], "varies"].all(), table
    assert not table.loc[["x2", "x3"], "varies"].any(), table
    gain = table["deviance_gain"]
    assert ((table["ci_lower"] <= gain) & (gain <= table["ci_upper"])).all()


def test_bad_alpha():
    X, y = _data(100, 0)
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    with pytest.raises(ValueError, match="'alpha' parameter"):
        heterogeneity_test(model, X, y, alpha=1.5)


@pytest.mark.slow
def test_power_and_size_over_seeds():
    """A guard on what the test achieves: here power 0.90 and size 0.33 over
    these 20 seeds at alpha 0.05 (``benchmarks/results/heterogeneity.md``).
    The records moved between 0.88 and 0.93 (power) and 0.28 and 0.35 (size)
    with the network's random stream (new dropout masks, the attention
    layout) and the learning rate, the models being otherwise the same maths:
    60 and 40 cases give standard errors of about 0.04 and 0.07, hence the
    margins. The size misses
    #15's target of 0.10 (see the module's Limits); this fails if either gets
    clearly worse, where an xfail passed whatever happened."""
    flagged_varying, flagged_constant = [], []
    for seed in range(20):
        X, y = _data(4000, seed)
        model = GraphGLMRegressor(family="poisson", random_state=seed, n_jobs=1)
        model.fit(X[:2000], y[:2000])
        table = heterogeneity_test(model, X[2000:], y[2000:])
        flagged_varying += list(table.loc[["intercept", "x0", "x1"], "varies"])
        flagged_constant += list(table.loc[["x2", "x3"], "varies"])
    power, size = np.mean(flagged_varying), np.mean(flagged_constant)
    print(f"power {power:.3f}, size {size:.3f}")
    assert power >= 0.85
    assert size <= 0.4
