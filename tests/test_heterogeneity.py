"""heterogeneity_test: per-term evidence that a coefficient varies."""

from __future__ import annotations

import numpy as np
import pytest

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.estimators.predictor import Predictor
from autoglm_graph.explain.heterogeneity import heterogeneity_test

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
    """Poisson data of 3 latent groups: intercept, x0, x1 vary; x2, x3 do not.

    The groups' centres differ in x0 and x1 only, so log E[y | x] is linear in
    x2 and x3 with one slope each (``benchmarks/_lib/heterogeneity.py`` says why).
    """
    X, _, coef = make_varying_coefficients(
        n, 4, n_groups=3, family="poisson", random_state=seed, n_group_features=2
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
    # Here the varying terms have p < 1e-4 and the constant ones p >= 0.90.
    # Power and size over seeds are the slow test's.
    X, y = _data(4000, 0)
    model = GraphGLMRegressor(family="poisson", random_state=0, n_jobs=1)
    model.fit(X[:2000], y[:2000])
    assert not model.is_global_only_
    table = heterogeneity_test(model, X[2000:], y[2000:])
    assert table.loc[["intercept", "x0", "x1"], "varies"].all(), table
    assert not table.loc[["x2", "x3"], "varies"].any(), table
    gain = table["deviance_gain"]
    assert ((table["ci_lower"] <= gain) & (gain <= table["ci_upper"])).all()


@pytest.mark.filterwarnings("ignore:Training stopped at max_epochs")
def test_a_made_global_slope_is_the_null():
    """A column the model does not vary: moving the rows along it and adding
    one fitted slope gives the model back, so its gain is 0 to rounding."""
    X, y = _data(1000, 1)
    model = GraphGLMRegressor(
        family="poisson", random_state=0, n_jobs=1, max_epochs=5
    ).fit(X[:, :3], y)
    # A constant column: every row is at its median already.
    X_test = X[:, :3].copy()
    X_test[:, 2] = np.median(X_test[:, 2])
    table = heterogeneity_test(model, X_test, y)
    assert abs(table.loc["x2", "deviance_gain"]) < 1e-10


@pytest.mark.filterwarnings("ignore:Training stopped at max_epochs")
def test_multinomial_and_offset_run():
    X, y, _ = make_varying_coefficients(
        900, 3, family="multinomial", random_state=0, n_group_features=2
    )
    from autoglm_graph import GraphGLMClassifier

    model = GraphGLMClassifier(random_state=0, n_jobs=1, max_epochs=5)
    model.fit(X[:600], y[:600])
    table = heterogeneity_test(model, X[600:], y[600:])
    assert list(table.index) == ["intercept", "x0", "x1", "x2"]
    assert np.isfinite(table["deviance_gain"]).all()
    # The offset reaches the model and every null model: zeros are no offset.
    X, y = _data(1200, 2)
    model = GraphGLMRegressor(family="poisson", random_state=0, n_jobs=1)
    model.set_params(max_epochs=5).fit(X[:800], y[:800], offset=np.zeros(800))
    none = heterogeneity_test(model, X[800:], y[800:])
    zero = heterogeneity_test(model, X[800:], y[800:], offset=np.zeros(400))
    np.testing.assert_allclose(none["p_value"], zero["p_value"], atol=1e-12)


def _record_designs(monkeypatch) -> list:
    """The designs the test reads coefficients of, in order (a spy on the
    predictor)."""
    designs = []
    original = Predictor.coefficients

    def spy(self, d, offset=None):
        designs.append(np.array(d))
        return original(self, d, offset)

    monkeypatch.setattr(Predictor, "coefficients", spy)
    return designs


def test_a_level_is_tested_on_rows_that_can_occur(monkeypatch):
    """A category's level: its rows move to another level, one level per row
    (never a row with no level or two), and the other rows do not move."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=600),
            "c": pd.Categorical(
                rng.choice(["a", "b", "c"], size=600, p=[0.5, 0.3, 0.2])
            ),
        }
    )
    y = rng.poisson(np.exp(0.3 * X["x"] + (X["c"] == "b") * 0.5)).astype(float)
    model = GraphGLMRegressor(
        family="poisson",
        categorical_coding="all_levels",  # a term, and a test, for every level
        random_state=0,
        n_jobs=1,
        max_epochs=3,
        early_stopping=False,
    ).fit(X, y)
    block = model.preprocessor_.categorical_blocks()[0]
    design = model.predictor().design(X)
    moved_designs = _record_designs(monkeypatch)
    table = heterogeneity_test(model, X, y)
    assert list(table.index) == ["intercept", "x", "c_a", "c_b", "c_c"]
    levels = [d for d in moved_designs if not np.array_equal(d, design)][1:]
    assert len(levels) == 3  # c_a, c_b, c_c (the first moved design is x's)
    for j, moved in zip(block, levels, strict=True):
        at_level = design[:, j] > 0.5
        assert (moved[:, block].sum(axis=1) == 1).all()
        assert not (moved[at_level, j] > 0.5).any()
        np.testing.assert_array_equal(moved[~at_level], design[~at_level])
    # "a" (the most frequent) moves to "b", the others to "a".
    assert (levels[0][design[:, block[0]] > 0.5][:, block[1]] == 1).all()
    assert (levels[1][design[:, block[1]] > 0.5][:, block[0]] == 1).all()


def test_bad_alpha():
    X, y = _data(100, 0)
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    with pytest.raises(ValueError, match="'alpha' parameter"):
        heterogeneity_test(model, X, y, alpha=1.5)


@pytest.mark.slow
def test_power_and_size_over_seeds():
    """#15's targets, on the data of ``benchmarks/results/heterogeneity.md``
    (the same 20 seeds): varying terms flagged in >= 90 % of the cases,
    constant ones in <= 10 %, at alpha 0.05. Recorded: power 1.00, size 0.00.
    (The first version of the test, which removed each term's per-row
    deviation from the fitted coefficients, flagged constant terms in 30 %
    of the cases on data of this geometry.)"""
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
    assert power >= 0.9
    assert size <= 0.1


def _frame(X, y=None):
    import pandas as pd

    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    return frame if y is None else frame.assign(y=y)


def test_a_formula_model_is_tested_as_the_same_model_without_one():
    """``y ~ x0 + ... + x3`` is the model on those columns: the same fit, the
    same moves (the rows move in X, the network's context with them), the
    same table; the target is the formula's left side."""
    X, y = _data(4000, 0)
    plain = GraphGLMRegressor(family="poisson", random_state=0, n_jobs=1)
    plain.fit(_frame(X[:2000]), y[:2000])
    formula = GraphGLMRegressor(
        family="poisson", random_state=0, n_jobs=1, formula="y ~ x0 + x1 + x2 + x3"
    ).fit(_frame(X[:2000], y[:2000]))
    assert not formula.is_global_only_
    expected = heterogeneity_test(plain, _frame(X[2000:]), y[2000:])
    table = heterogeneity_test(formula, _frame(X[2000:], y[2000:]))  # y: the left side
    assert list(table.index) == list(expected.index)
    np.testing.assert_allclose(
        table["deviance_gain"], expected["deviance_gain"], rtol=1e-6, atol=1e-9
    )
    np.testing.assert_allclose(table["p_value"], expected["p_value"], atol=1e-6)
    assert table.loc[["intercept", "x0", "x1"], "varies"].all(), table
    assert not table.loc[["x2", "x3"], "varies"].any(), table


def test_a_formula_level_moves_its_rows_in_X(monkeypatch):
    """A formula's level: its rows move to another level in X (the network's
    context and the term's columns with them); the other rows do not move."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=600),
            "c": rng.choice(["a", "b", "c"], size=600, p=[0.5, 0.3, 0.2]),
        }
    )
    X["y"] = rng.poisson(np.exp(0.3 * X["x"] + (X["c"] == "b") * 0.5)).astype(float)
    model = GraphGLMRegressor(
        family="poisson",
        formula="y ~ x + C(c)",
        random_state=0,
        n_jobs=1,
        max_epochs=3,
        early_stopping=False,
    ).fit(X)
    design = model.predictor().design(X)
    moved_designs = _record_designs(monkeypatch)
    table = heterogeneity_test(model, X)
    assert list(table.index) == ["intercept", "x", "C(c)[T.b]", "C(c)[T.c]"]
    assert np.isfinite(table["deviance_gain"]).all()
    n_context = model.predictor().glm_terms.n_context
    block = model.preprocessor_.categorical_blocks()[0]  # the context's c
    levels = [d for d in moved_designs if not np.array_equal(d, design)][1:]
    assert len(levels) == 2
    for k, moved in enumerate(levels):
        at_level = design[:, n_context + 1 + k] > 0.5
        np.testing.assert_array_equal(moved[~at_level], design[~at_level])
        assert (moved[:, block].sum(axis=1) == 1).all()  # one level, in context
        assert not (moved[at_level, n_context + 1 + k] > 0.5).any()
        # ... moved to "a" (the most frequent other level), the base: no column
        assert (moved[at_level][:, n_context + 1 :] == 0).all()
        assert (moved[at_level][:, block[0]] == 1).all()


def test_a_spline_model_tests_each_column_with_its_basis():
    """splines: a column's linear term and basis are made global together
    (the global shape stays in the null), and each of their lines shows it."""
    X, y = _data(4000, 0)
    model = GraphGLMRegressor(
        family="poisson", random_state=0, n_jobs=1, splines=["x3"]
    ).fit(X[:2000], y[:2000])
    assert not model.is_global_only_
    table = heterogeneity_test(model, X[2000:], y[2000:])
    assert table.loc[["intercept", "x0", "x1"], "varies"].all(), table
    assert not table.loc[["x2", "x3"], "varies"].any(), table
    basis = [n for n in table.index if n.startswith("x3_s")]
    assert basis
    for name in basis:
        assert table.loc[name, "p_value"] == pytest.approx(table.loc["x3", "p_value"])


@pytest.mark.filterwarnings("ignore:Training stopped at max_epochs")
@pytest.mark.parametrize("kind", ["splines", "formula"])
def test_a_non_linear_global_effect_is_no_variation(kind):
    """One coefficient per row, one non-linear shape: a network trained
    without early stopping (so that there is one) varies nothing held out."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 3))
    y = rng.poisson(np.exp(0.3 + 0.4 * X[:, 0] + np.sin(X[:, 1]) - 0.3 * X[:, 2]))
    frame = _frame(X, y.astype(float))
    params = dict(
        family="poisson", random_state=0, n_jobs=1, early_stopping=False, max_epochs=10
    )
    if kind == "splines":
        model = GraphGLMRegressor(splines=True, **params).fit(X[:1500], y[:1500])
        table = heterogeneity_test(model, X[1500:], y[1500:])
    else:
        formula = "y ~ x0 + bs(x1, df=5) + x2"
        model = GraphGLMRegressor(formula=formula, **params).fit(frame[:1500])
        table = heterogeneity_test(model, frame[1500:])
    assert not model.is_global_only_
    assert not table["varies"].any(), table


def test_y_is_needed_without_a_left_side():
    X, y = _data(100, 0)
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    with pytest.raises(ValueError, match="needs y"):
        heterogeneity_test(model, X)
