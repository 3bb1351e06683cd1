"""Which effects vary: a per-term test of the local coefficients.

A fitted graph GLM gives every row its own coefficients ``theta_i = theta +
delta_i``, and so a linear predictor ``eta(x)`` that need not be linear in
any column. Whether a term's coefficient really varies across rows, rather
than being one global slope plus noise the network picked up, is a question
about held-out data: does the model predict new rows better than the same
model with that term's effect made global?

How the network splits ``eta(x)`` between its terms is not identified: the
level ``delta_i0`` can carry what a slope deviation ``delta_ij * x_ij`` carries,
and the other way round. Removing one term's deviation from the fitted
``theta_i`` therefore also removes whatever the network routed through it (a
first version of this test did that and flagged constant slopes in 30 % of
cases on data where ``log E[y | x]`` is exactly linear in them). What is
identified is the function: the slope of column ``j`` is the same on every
row exactly when ``eta(x)`` is linear in ``x_j`` with one coefficient. So
:func:`heterogeneity_test` compares, for each column ``j``, the model with::

    eta_null(x) = eta(x with x_j := r_j) + s_j * (x_j - r_j)

the model's prediction for the row moved to the column's median ``r_j``
(its neighbours in the graph move with it), plus one slope ``s_j`` for every
row, fitted on the rows passed (one parameter: it favours the null model a
little, which keeps the test conservative). A level of a categorical column
(a one-hot column of the design) is tested on the rows at that level: they
move to another level (the most frequent other one), plus one fitted shift;
a row is never moved to no level or to two (``_null_moves``). The
intercept has no column to move; its row compares the model with its level
deviation removed, centred the same way for every row (see
:func:`_level_part`). Row by row::

    g_ij = d(y_i, eta_null_ij) - d(y_i, eta_i)

The mean gain, weighted by ``sample_weight``, is the evidence: positive when
the variation predicts the held-out rows better. The rows are independent
given the fitted model, so the paired differences ``g_ij`` give a standard
error, a confidence interval and a one-sided p-value (z-test of a mean gain
<= 0) by the central limit theorem.

Measured (``benchmarks/heterogeneity.py``, Poisson, 3 latent groups, 2,000
training and 2,000 test rows, 20 seeds, alpha 0.05): where the constant
columns are independent of the groups, power 1.00 and size 0.00 (0.88 and
0.00 with half the slopes' spread: the misses are fits that returned the
global GLM); the first version of this test had size 0.30 on such data.
The same data with gaussian or Bernoulli y: power 1.00 and 0.95, size 0.03
and 0.00. Where the groups also differ in the constant columns, the slope of
``log E[y | x]`` in them does vary near the groups' borders (a row's group
depends on them): the test flags them in 72 % of the cases, the true mean
function itself in 78 % (the benchmark's ``oracle``). With a categorical
column whose levels shift every row alike, and a binary one whose effect
differs between the groups (``--data categorical``): power 0.90, but the
constant levels are flagged in 20 % of the cases at alpha 0.05 (p between
0.006 and 0.05; 3 % at alpha 0.01, none at 0.001): for a category's levels,
read the p-values at 0.01.

Formulas and splines. With a formula (``formula=``) the rows are moved in
``X``: a term's numeric columns to their medians (the network's context is
preprocessed again, so its neighbours move with the row) and the term's own
formula columns take their moved values, the formula's other columns keep
theirs; the null model adds one function of the term's columns, fitted (one
coefficient per column: ``bs(age, df=4)``'s four together). A term of one
categorical column is tested per level as above, its rows moved to another
level in ``X``. ``y ~ x0 + x1`` is then the same test as the model without a
formula on those columns. With ``splines``, a column's basis moves with it
and the null adds the column's linear term and basis, fitted: the global
shape is part of the null, and what is tested is whether the shape varies
across rows.

Limits. The gain is about the fitted model: a variation the network did not
learn is not found (power grows with the rows and the effect). A non-linear
effect of ``x_j`` is a varying local slope too, and is flagged.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy import stats
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from ..glm import encode_target, split_target
from ..utils import align_to_rows, check_offset

__all__ = ["heterogeneity_test"]


def heterogeneity_test(
    estimator,
    X,
    y=None,
    sample_weight=None,
    offset=None,
    *,
    alpha: float = 0.05,
    centre_share: float = 0.05,
    min_centre: int = 20,
) -> pd.DataFrame:
    """Per-term evidence that a coefficient varies across rows.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    X : array-like or DataFrame of shape (n_samples, n_features)
        Held-out rows: a test set, or rows the model did not train on. On the
        training rows the gains are optimistic (the network has seen their
        targets).
    y : array-like of shape (n_samples,), default=None
        The target; None for a model whose formula names it on its left side
        (its column is then read from ``X``, as in ``fit``).
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the deviance (e.g. exposure is in the offset, the number of
        claims for a severity model here).
    offset : array-like of shape (n_samples,), default=None
        As in ``predict``.
    alpha : float, default=0.05
        Level: ``varies`` is ``p_value < alpha``, and the interval has level
        ``1 - alpha`` (two-sided). No correction for the number of terms is
        made; multiply the p-values by the number of terms for Bonferroni.
    centre_share : float, default=0.05
        A row's centre (in the level's part of the gain of the intercept) is
        the mean design row of this share of the rows, its nearest in
        coefficient space ...
    min_centre : int, default=20
        ... and of at least this many rows.

    Returns
    -------
    DataFrame
        One line per term (``"intercept"`` and ``feature_names_out_``; for the
        multinomial family a column's slopes in all classes are made global
        together; the columns of one formula term, or a spline column's linear
        term and basis, are made global together and each of their lines shows
        that test), with columns ``global`` (the global coefficient in the
        user's units; the first class's for multinomial), ``local_sd`` (the
        standard deviation of the per-row coefficients over ``X``),
        ``deviance_gain`` (mean gain per unit of weight of the model over its
        null for the term, in the family's mean deviance; see the module),
        ``relative_gain`` (the gain over the model's mean deviance),
        ``std_err``, ``ci_lower``, ``ci_upper``, ``z``, ``p_value`` (one-sided)
        and ``varies``. A global-only model has gains 0 and p-values 1.

    Examples
    --------
    >>> import numpy as np
    >>> from autoglm_graph import GraphGLMRegressor
    >>> from autoglm_graph.explain.heterogeneity import heterogeneity_test
    >>> X = np.random.default_rng(0).normal(size=(100, 2)); y = X[:, 0]
    >>> model = GraphGLMRegressor(local_penalty=np.inf).fit(X, y)
    >>> heterogeneity_test(model, X, y)["p_value"].tolist()  # the global GLM
    [1.0, 1.0, 1.0]
    """
    if not 0 < alpha < 1:
        raise ValueError(f"The 'alpha' parameter must be in (0, 1); got {alpha!r}.")
    check_is_fitted(estimator, "global_glm_")
    rows = _HeldOutRows.from_data(estimator, X, y, sample_weight, offset)
    if estimator.is_global_only_:  # one slope per column: no variation
        gains = np.zeros((1 + len(estimator.feature_names_out_), rows.n))
    else:
        n_centre = max(min_centre, int(centre_share * rows.n))
        gains = _gains(estimator, rows, X, n_centre)
    table = _gain_table(estimator, rows, gains, alpha)
    if estimator.is_global_only_:
        _say_no_network(estimator, table)
    return table


@dataclass(frozen=True)
class _HeldOutRows:
    """The rows passed, with the fitted model's predictions on them."""

    predictor: object  # the estimator's Predictor
    design: np.ndarray
    y: np.ndarray  # encoded: [n], or one-hot [n, K]
    w: np.ndarray
    offset: np.ndarray | None
    eta: np.ndarray  # [n, K]
    theta: np.ndarray  # [n, K, p+1]: the per-row coefficients
    deviance: np.ndarray  # [n]: the model's unit deviances

    @property
    def n(self) -> int:
        return self.design.shape[0]

    @classmethod
    def from_data(cls, estimator, X, y, sample_weight, offset) -> _HeldOutRows:
        predictor = estimator.predictor()
        if y is None:
            y = _target_of(estimator, predictor.glm_terms, X)
        design = predictor.design(X)
        n = design.shape[0]
        y_model = encode_target(estimator, y)
        check_consistent_length(design, y_model)
        sample_weight = align_to_rows(sample_weight, X, "sample_weight")
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
        check_consistent_length(design, w)
        if not w.sum() > 0:
            raise ValueError("sample_weight must have a positive sum.")
        offset = check_offset(align_to_rows(offset, X, "offset"), n)
        eta, theta = predictor.coefficients(design, offset)
        deviance = _unit_deviance(estimator.family_, y_model, eta)
        return cls(predictor, design, y_model, w, offset, eta, theta, deviance)


def _gains(estimator, rows: _HeldOutRows, X, n_centre: int) -> np.ndarray:
    """Each term's null model's unit deviances less the model's, ``[1 + p, n]``
    (the intercept's first; 0 for a term with no row to move)."""
    predictor, family, y, w = rows.predictor, estimator.family_, rows.y, rows.w
    gains = np.zeros((1 + len(estimator.feature_names_out_), rows.n))
    glm_design = predictor.glm_terms.select(rows.design)
    level = _level_part(estimator, glm_design, rows.theta, w, n_centre)
    gains[0] = _unit_deviance(family, y, rows.eta - level) - rows.deviance
    coef = estimator.global_glm_.coef
    for group, move in _null_moves(predictor, X, rows.design):
        if move is None:  # no row to move: gain 0
            continue
        moved, step, change = move
        # From the global GLM: its slopes, or its change on a level's rows.
        start = coef[:, group] if change is None else coef @ change
        eta_moved, _ = predictor.coefficients(moved, rows.offset)
        eta_null = _with_fitted_slope(family, eta_moved, step, start, y, w)
        gains[1 + np.asarray(group)] = (
            _unit_deviance(family, y, eta_null) - rows.deviance
        )
    return gains


def _gain_table(estimator, rows: _HeldOutRows, gains, alpha: float) -> pd.DataFrame:
    """The returned table: per term, the coefficients and the summarised gains."""
    terms = ["intercept", *estimator.feature_names_out_]
    local = rows.predictor.to_user_units(rows.theta)[:, 0, :]
    global_user = rows.predictor.global_theta_user()[0]
    if not rows.predictor.glm_terms.fit_intercept:  # no intercept to test
        terms, gains = terms[1:], gains[1:]
        local, global_user = local[:, 1:], global_user[1:]
    table = _summarise(gains, rows.w, alpha)
    table.insert(0, "global", global_user)
    table.insert(1, "local_sd", local.std(axis=0) if rows.n > 1 else 0.0)
    mean_deviance = np.average(rows.deviance, weights=rows.w)
    table.insert(3, "relative_gain", table["deviance_gain"] / mean_deviance)
    table.index = pd.Index(terms, name="term")
    return table


def _say_no_network(estimator, table: pd.DataFrame) -> None:
    """A global-only model has nothing to test: z is undefined, not -inf."""
    table[["std_err", "z"]] = np.nan
    warnings.warn(
        "There is no network to test: the fitted model is its global GLM "
        f"({estimator.global_only_reason_}), so every coefficient is global "
        "(gains 0, p-values 1, z undefined).",
        UserWarning,
        stacklevel=3,
    )


def _target_of(estimator, terms, X) -> np.ndarray:
    """The target of a two-sided formula's left side, evaluated on ``X``."""
    if terms.formula is None or not terms.formula.target_columns:
        raise ValueError(
            "heterogeneity_test needs y, unless the model's formula names the "
            "target on its left side (and X holds its column)."
        )
    return split_target(estimator.formula, terms.fit_intercept, X, None)[1]


def _null_moves(predictor, X, design):
    """The null models, one per group of the GLM's terms made global together.

    Yields ``(group, move)``: ``group`` lists positions among the GLM's terms,
    ``move`` is ``(moved design, step [n, m], change)`` or None (no row to
    move). The null model is ``eta(moved) + step @ s`` with ``s`` (``[K, m]``,
    started from the global GLM's) fitted. A numeric column is moved to its median, and
    ``step`` is the change of the group's GLM columns; a category's level is
    moved to another level (see :func:`_level_move`) and ``step`` is 1 on its
    rows. Without a formula the moves are on the preprocessed columns (a
    spline's basis follows its column: one group); with one, on the columns
    of ``X`` (see :func:`_formula_moves`).
    """
    terms = predictor.glm_terms
    if terms.formula is not None:
        yield from _formula_moves(predictor, X, design)
        return
    glm_design = terms.select(design)
    context = terms.context(design)
    n_context = context.shape[1]
    block_of = {
        j: block for block in predictor.preprocessor.categorical_blocks() for j in block
    }
    basis_of = {}
    if terms.splines is not None:  # the basis columns are the GLM's last terms
        first = terms.n_terms - len(terms.splines.shift)
        for t in terms.splines.terms:
            basis_of[t.position] = [first + k for k in terms.splines.blocks[t.name]]
    for k, j in enumerate(terms.columns):
        if j >= n_context:  # a spline's basis: made global with its column
            continue
        group = [k, *basis_of.get(j, [])]
        moved = context.copy()
        block = block_of.get(j)
        if block is None:
            moved[:, j] = np.median(context[:, j])
            at_level = None
        else:
            at_level = design[:, j] > 0.5
            counts = (design[:, block] > 0.5).sum(axis=0)
            counts[block == j] = -1
            if not at_level.any() or counts.max() <= 0:
                yield group, None  # no row at the level, or no other level
                continue
            reference = block[np.argmax(counts)]
            moved[np.ix_(at_level, block)] = 0.0
            moved[at_level, reference] = 1.0
        moved = terms.design(moved, X)
        yield group, _move(glm_design, terms.select(moved), moved, group, at_level)


def _move(glm_design, glm_moved, moved, group, at_level):
    """``(moved, step, change)`` of a numeric move (``at_level`` None, change
    None) or of a level's rows (``change``: of their GLM columns, +1 at the
    level and -1 at the other, whose global effect starts the fit)."""
    if at_level is None:
        return moved, glm_design[:, group] - glm_moved[:, group], None
    row = np.flatnonzero(at_level)[0]
    change = glm_design[row] - glm_moved[row]  # +1 at the level, -1 at the other
    return moved, at_level.astype(np.float64)[:, None], change


def _formula_moves(predictor, X, design):
    """The null models of a formula's terms, moved on the columns of ``X``.

    The rows are moved in ``X`` and the network's context preprocessed again
    (its neighbours move with them); of the formula's columns only the
    term's own take their moved values. A term of one categorical column
    with 0/1 columns (treatment coding): each level is tested on its rows,
    moved to the most frequent other level among the rows passed. Any other
    term (a numeric column, its transform, a spline, an interaction): its
    numeric columns move to their medians and its columns are made global
    together (each of its lines shows the term's test).
    """
    terms = predictor.glm_terms
    formula = terms.formula
    glm_design = terms.select(design)
    columns = [str(c) for c in X.columns]
    for term, positions in formula.term_columns.items():
        variables = formula.term_variables(term, columns)
        if formula.levels(term) is not None and len(variables) == 1:
            block = glm_design[:, positions]
            if not np.all((block == 0) | (block == 1)):
                raise NotImplementedError(
                    f"heterogeneity_test moves a level's rows to another level: "
                    f"the columns of the formula's term {term!r} are not 0/1 "
                    "indicators (use treatment coding)."
                )
            for k in positions:
                at_level = glm_design[:, k] > 0.5
                reference = _reference_level(X, variables[0], at_level)
                if reference is None:
                    yield [k], None
                    continue
                X_moved = X.copy()
                X_moved.iloc[at_level, columns.index(variables[0])] = reference
                moved = _moved_design(predictor, X_moved, design, positions)
                glm_moved = terms.select(moved)
                yield [k], _move(glm_design, glm_moved, moved, [k], at_level)
            continue
        X_moved = X.copy()
        for name in variables:
            values = X[X.columns[columns.index(name)]]
            if _is_numeric(values):
                X_moved[X.columns[columns.index(name)]] = np.nanmedian(values)
        moved = _moved_design(predictor, X_moved, design, positions)
        group = list(positions)
        yield group, _move(glm_design, terms.select(moved), moved, group, None)


def _moved_design(predictor, X_moved, design, positions) -> np.ndarray:
    """``design`` with the context of ``X_moved`` and its formula columns at
    ``positions`` (among the formula's) from ``X_moved``; the others kept."""
    n_context = predictor.glm_terms.n_context
    again = predictor.design(X_moved)
    moved = design.copy()
    moved[:, :n_context] = again[:, :n_context]
    at = n_context + np.asarray(positions, dtype=np.intp)
    moved[:, at] = again[:, at]
    return moved


def _reference_level(X, column: str, at_level: np.ndarray):
    """The most frequent value of ``column`` on the rows not ``at_level``
    (ties: the first in sorted order); None when there is none."""
    values = X[X.columns[[str(c) for c in X.columns].index(column)]]
    others = values[~at_level].dropna()
    if others.empty:
        return None
    counts = others.astype(str).value_counts()
    best = sorted(counts.index[counts == counts.max()])[0]
    return others[others.astype(str) == best].iloc[0]


def _is_numeric(values: pd.Series) -> bool:
    kind = values.dtype
    return pd.api.types.is_numeric_dtype(kind) and not pd.api.types.is_bool_dtype(kind)


def _with_fitted_slope(family, eta_moved, step, start, y, weight) -> np.ndarray:
    """``eta_moved + step @ s.T`` with ``s`` ``[K, m]`` minimising the weighted
    deviance (started from ``start``)."""
    step = torch.as_tensor(np.asarray(step, dtype=np.float64))
    base = torch.as_tensor(eta_moved)
    y_t = torch.as_tensor(np.asarray(y, dtype=np.float64))
    share = torch.as_tensor(weight / weight.sum())
    start = np.asarray(start, dtype=np.float64).reshape(base.shape[1], step.shape[1])
    slope = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    squeeze = base.shape[1] == 1

    def objective():
        eta = base + step @ slope.T
        return share @ family.unit_deviance(y_t, eta[:, 0] if squeeze else eta)

    # One to a few parameters: L-BFGS converges in a handful of iterations.
    optimizer = torch.optim.LBFGS(
        [slope], max_iter=100, tolerance_grad=1e-10, line_search_fn="strong_wolfe"
    )

    def closure():
        optimizer.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    optimizer.step(closure)
    return (base + step @ slope.detach().T).numpy()


def _level_part(estimator, design, theta, weight, n_centre: int) -> np.ndarray:
    """The network's level deviation of each row, ``[n, K]``, centred.

    ``delta_i0 + sum_j (delta_ij - mean_j) * m_ij``, minus its weighted mean:
    ``m_i`` is the mean design row of the rows whose fitted coefficients are
    closest to row ``i``'s (its ``n_centre`` nearest in coefficient space,
    among the rows passed). A slope deviation ``delta_ij`` times ``x_ij`` far
    from 0 shifts the level of a whole set of rows sharing coefficients; that
    shift is the level's variation and is counted here, while the variation
    within the set is the slope's. Deviations are taken around the model's
    mean coefficients (weighted over the rows), not the global GLM's: those
    are biased when other effects vary, and a constant correction is no
    variation.
    """
    glm = estimator.global_glm_
    delta = theta - np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
    n = design.shape[0]
    flat = delta.reshape(n, -1)
    spread = flat.std(axis=0)
    if not np.any(spread > 0):
        return np.zeros(delta.shape[:2])
    flat = flat[:, spread > 0] / spread[spread > 0]
    k = min(n, n_centre)
    neighbours = NearestNeighbors(n_neighbors=k).fit(flat).kneighbors(flat)[1]
    centre = design[neighbours].mean(axis=1)  # [n, p]
    share = (weight / weight.sum())[:, None, None]
    mean = np.sum(share * delta, axis=0)  # [K, p+1]
    level = delta[:, :, 0] + np.sum(
        (delta[:, :, 1:] - mean[:, 1:]) * centre[:, None, :], 2
    )
    return level - np.sum(share[:, :, 0] * level, axis=0)


def _unit_deviance(family, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
    eta_t = torch.as_tensor(eta, dtype=torch.float64)
    if eta_t.shape[1] == 1:
        eta_t = eta_t[:, 0]
    y_t = torch.as_tensor(np.asarray(y, dtype=np.float64))
    return family.unit_deviance(y_t, eta_t).numpy()


def _summarise(gains: np.ndarray, w: np.ndarray, alpha: float) -> pd.DataFrame:
    """Weighted mean of each row of ``gains`` with its CLT standard error."""
    share = w / w.sum()
    mean = gains @ share
    # Standard error of a weighted mean of independent rows (ratio estimator).
    n_eff = w.sum() ** 2 / np.sum(w**2)
    var = ((gains - mean[:, None]) ** 2) @ share * n_eff / max(n_eff - 1, 1.0)
    std_err = np.sqrt(var / n_eff)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(std_err > 0, mean / std_err, np.where(mean > 0, np.inf, -np.inf))
    quantile = stats.norm.ppf(1 - alpha / 2)
    p_value = stats.norm.sf(z)
    return pd.DataFrame(
        {
            "deviance_gain": mean,
            "std_err": std_err,
            "ci_lower": mean - quantile * std_err,
            "ci_upper": mean + quantile * std_err,
            "z": z,
            "p_value": p_value,
            "varies": p_value < alpha,
        }
    )
