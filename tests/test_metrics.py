"""The ordered Lorenz curve and Gini index (autoglm_graph.metrics)."""

import numpy as np
import pytest

from autoglm_graph.metrics import gini, lorenz_curve

# Four policies: observed frequency, exposure, and a prediction with a tie.
Y = np.array([0.0, 2.0, 1.0, 0.0])
W = np.array([1.0, 0.5, 2.0, 0.5])
PRED = np.array([0.1, 0.2, 0.3, 0.1])


def test_lorenz_curve_by_hand():
    # Blocks by increasing prediction: {0, 3} (exposure 1.5, claims 0),
    # {1} (0.5, 1), {2} (2, 2); totals 4 and 3.
    x, c = lorenz_curve(Y, PRED, W)
    np.testing.assert_allclose(x, [0, 1.5 / 4, 2 / 4, 1])
    np.testing.assert_allclose(c, [0, 0, 1 / 3, 1])


def test_gini_by_hand():
    # Area under the curve (trapezoids): 0 + 0.125 * (1/3) / 2 + 0.5 * (4/3) / 2
    # = 17/48, so Gini = 1 - 34/48 = 7/24. The observed frequencies as the
    # prediction order the blocks {0, 3}, {2}, {1}: area 13/48, Gini 11/24.
    assert gini(Y, PRED, W, normalize=False) == pytest.approx(7 / 24, abs=1e-15)
    assert gini(Y, Y, W, normalize=False) == pytest.approx(11 / 24, abs=1e-15)
    assert gini(Y, PRED, W) == pytest.approx(7 / 11, abs=1e-15)


def test_gini_properties():
    rng = np.random.default_rng(0)
    exposure = rng.uniform(0.1, 1.0, 500)
    rate = np.exp(rng.normal(size=500))
    y = rng.poisson(rate * exposure) / exposure
    assert gini(y, y, exposure) == 1.0  # the perfect ranking
    assert gini(y, np.full(500, 0.3), exposure) == 0.0  # ties: one block
    value = gini(y, rate, exposure)
    assert 0 < value < 1
    # Only the order matters.
    assert gini(y, np.log(rate), exposure) == pytest.approx(value, abs=1e-14)
    assert gini(y, 5 * rate**3 + 1, exposure) == pytest.approx(value, abs=1e-14)
    # Reversing the order flips the sign of the unnormalised Gini.
    raw = gini(y, rate, exposure, normalize=False)
    assert gini(y, -rate, exposure, normalize=False) == pytest.approx(-raw)
    # A weight of 2 is the row repeated twice; no weights are weights of 1.
    w = rng.integers(1, 4, 500).astype(float)
    repeated = np.repeat(np.arange(500), w.astype(int))
    assert gini(y, rate, w) == pytest.approx(
        gini(y[repeated], rate[repeated]), abs=1e-12
    )
    assert gini(y, rate) == gini(y, rate, np.ones(500))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([1.0, 2.0], [1.0]), "same length"),
        (([], []), "at least one row"),
        (([1.0, np.nan], [1.0, 2.0]), "NaN"),
        (([1.0, 2.0], [1.0, 2.0], [1.0, -1.0]), "non-negative"),
        (([0.0, 0.0], [1.0, 2.0]), "positive weighted total"),
        (([1.0, 1.0], [1.0, 2.0]), "y_true is constant"),
    ],
)
def test_gini_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        gini(*args)
