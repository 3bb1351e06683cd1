"""Factor tables for tariffs: relativities per term and level, with their spread.

:func:`factor_table` lays out what a pricing actuary reads off a
multiplicative (log-link) GLM: per rating factor and level the coefficient,
its relativity ``exp(coef)`` with a confidence interval (from
:func:`~autoglm_graph.glm.coef_table`), how many rows and how much
weight and exposure sit at that level, and how far the graph GLM's per-row
relativities ``exp(local coefficient)`` spread among those rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from ..glm import coef_table
from ..utils import align_to_rows, check_offset

__all__ = ["factor_table"]


def factor_table(
    estimator,
    X,
    y=None,
    sample_weight=None,
    offset=None,
    *,
    alpha: float = 0.05,
    cov_type: str = "fisher",
    weights: str = "variance",
) -> pd.DataFrame:
    """One row per term and level: coefficient, relativity, weight, spread.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted single-output estimator.
    X : array-like or DataFrame of shape (n_samples, n_features)
        The rows to count per level and to read the per-row relativities on.
    y : array-like of shape (n_samples,), default=None
        With ``X``, ``sample_weight`` and ``offset`` the data of the fit: the
        standard errors and intervals are :func:`~autoglm_graph.glm.coef_table`'s
        on it. None: those columns are NaN (the table of any other rows).
    sample_weight : array-like of shape (n_samples,), default=None
        Summed per level (``weight``; the row count when None).
    offset : array-like of shape (n_samples,), default=None
        The offset; under the log link ``exposure = exp(offset)`` is summed
        per level.
    alpha : float, default=0.05
        Level of the intervals, ``1 - alpha``.
    cov_type, weights : str
        As in :func:`~autoglm_graph.glm.coef_table`.

    Returns
    -------
    DataFrame
        Columns ``term`` (as in ``feature_names_out_``, and ``"intercept"``),
        ``column`` (the input column), ``level`` (a categorical term's level;
        empty for the intercept and numeric terms, whose relativity is per
        unit), ``members`` (for the level ``infrequent_sklearn`` that
        ``min_frequency`` or ``max_categories`` made, the levels it groups,
        comma-separated; empty for every other row), ``coef`` and
        ``std_err`` (the global GLM's, user units),
        ``relativity`` (``exp(coef)``), ``relativity_std_err`` (delta
        method), ``relativity_ci_lower``/``_upper``, ``rows``, ``weight``,
        ``exposure`` (with an offset under the log link only), and
        ``local_mean``, ``local_q05``, ``local_q50``, ``local_q95``: the
        mean and quantiles, over the rows at the level (all rows for the
        intercept and numeric terms), of the per-row relativity
        ``exp(local_coef)``. Relativities exist for log links only: under
        other links (identity, logit) every relativity column is NaN. The
        index is a plain range, so ``to_csv``/``to_excel`` write it as is.
    """
    check_is_fitted(estimator, "global_glm_")
    _check_single_output(estimator)
    log_link = estimator.family_.link_name == "log"
    table = _global_rows(
        estimator, X, y, sample_weight, offset, alpha, cov_type, weights
    )
    local = estimator.local_coef(X, offset)
    rows = _level_rows(estimator, X)
    merged = _infrequent_members(estimator.preprocessor_)
    n = local.shape[0]
    sample_weight = align_to_rows(sample_weight, X, "sample_weight")
    weight = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
    offset = check_offset(align_to_rows(offset, X, "offset"), n)
    out = []
    for term, column, level, mask in rows:
        entry = {"term": term, "column": column, "level": level}
        entry["members"] = merged.get((column, level), "")
        entry.update(_level_coefficients(table, term, log_link))
        entry.update(_level_totals(mask, weight, offset, log_link))
        entry.update(_spread(_local_coef(local, table, term, mask), log_link))
        out.append(entry)
    return pd.DataFrame(out)


def _check_single_output(estimator) -> None:
    if estimator._n_outputs != 1:
        raise ValueError(
            "factor_table needs a single-output model (one coefficient per "
            f"term); got {estimator._n_outputs} outputs (multinomial)."
        )


def _infrequent_members(preprocessor) -> dict:
    """``(column, "infrequent_sklearn")`` -> the levels that ``min_frequency``
    or ``max_categories`` grouped there, comma-separated."""
    return {
        (str(column), "infrequent_sklearn"): ", ".join(levels)
        for column, levels in preprocessor.infrequent_levels().items()
    }


def _level_coefficients(table: pd.DataFrame, term: str, log_link: bool) -> dict:
    """A term's row of the global table; a base level has no term: the others'
    relativities are relative to it (coefficient 0, relativity 1)."""
    if term in table.index:
        return table.loc[term].to_dict()
    entry = dict.fromkeys(table.columns, np.nan)
    entry.update(coef=0.0, relativity=1.0 if log_link else np.nan)
    return entry


def _level_totals(mask, weight, offset, log_link: bool) -> dict:
    """``rows``, ``weight`` and (an offset under the log link) ``exposure``."""
    totals = {"rows": int(mask.sum()), "weight": float(weight[mask].sum())}
    if log_link and offset is not None:
        totals["exposure"] = float(np.exp(offset[mask]).sum())
    return totals


def _local_coef(local: pd.DataFrame, table, term: str, mask) -> np.ndarray:
    """The per-row coefficients of a term on the level's rows (0 for a base level)."""
    if term in table.index:
        return local[term].to_numpy()[mask]
    return np.zeros(int(mask.sum()))


def _global_rows(estimator, X, y, sample_weight, offset, alpha, cov_type, weights):
    """``coef``, ``std_err`` and the relativity's columns per term."""
    if y is None:
        coef = estimator.predictor().global_theta_user()[0]
        table = pd.DataFrame(
            {"coef": coef, "std_err": np.nan, "ci_lower": np.nan, "ci_upper": np.nan},
            index=["intercept", *estimator.feature_names_out_],
        )
    else:
        table = coef_table(
            estimator,
            X,
            y,
            sample_weight,
            offset,
            cov_type=cov_type,
            alpha=alpha,
            weights=weights,
        )
    log_link = estimator.family_.link_name == "log"
    exp = np.exp if log_link else lambda v: np.full(np.shape(v), np.nan)
    relativity = exp(table["coef"].to_numpy())
    return pd.DataFrame(
        {
            "coef": table["coef"],
            "std_err": table["std_err"],
            "relativity": relativity,
            "relativity_std_err": relativity * table["std_err"].to_numpy(),
            "relativity_ci_lower": exp(table["ci_lower"].to_numpy()),
            "relativity_ci_upper": exp(table["ci_upper"].to_numpy()),
        },
        index=table.index,
    )


def _level_rows(estimator, X):
    """``(term, column, level, rows at it)`` per column of the design.

    A categorical column's design columns (its blocks in
    ``preprocessor_.categorical_blocks()``) are levels, named
    ``<column>_<level>``, its base level among them (it has no term of its
    own: coefficient 0, relativity 1); a missing indicator is the level
    "missing" of its column; other terms are per unit and cover all rows.
    """
    preprocessor = estimator.preprocessor_
    predictor = estimator.predictor()
    design = predictor.design(X)
    if predictor.glm_terms.formula is not None:
        return _formula_level_rows(predictor.glm_terms, design)
    in_glm = set(int(j) for j in predictor.glm_terms.columns)
    names = [str(name) for name in preprocessor.get_feature_names_out()]
    owner = {}
    for column, block in zip(
        preprocessor.categorical_features_,
        preprocessor.categorical_blocks(),
        strict=True,
    ):
        for j in block:
            owner[int(j)] = str(column)
    everyone = np.ones(design.shape[0], dtype=bool)
    rows = (
        [("intercept", "", "", everyone)] if predictor.glm_terms.fit_intercept else []
    )
    for j, name in enumerate(names):
        if j in owner:
            column = owner[j]
            level = name[len(column) + 1 :] if name.startswith(column + "_") else name
            rows.append((name, column, level, design[:, j] > 0.5))
        elif j not in in_glm:
            continue
        elif name.startswith("missingindicator_"):
            column = name[len("missingindicator_") :]
            rows.append((name, column, "missing", design[:, j] > 0.5))
        else:
            rows.append((name, name, "", everyone))
    splines = predictor.glm_terms.splines
    if splines is not None:  # a basis column is per unit of its value
        for spline, block in zip(splines.terms, splines.blocks.values(), strict=True):
            for j in block:
                name = str(splines.names[j])
                rows.append((name, spline.name, "", everyone))
    return rows


def _formula_level_rows(terms, design):
    """``_level_rows`` of a formula: a categorical term's columns
    (``C(region)[T.b]``) are levels, its base level among them; every other
    column is per unit and covers all rows."""
    formula = terms.formula
    values = terms.select(design)  # level columns are 0/1 as they are
    everyone = np.ones(design.shape[0], dtype=bool)
    rows = [("intercept", "", "", everyone)] if terms.fit_intercept else []
    for term, positions in formula.term_columns.items():
        names = [str(formula.names[j]) for j in positions]
        levels = formula.levels(term)
        if levels is None:
            rows.extend((name, term, "", everyone) for name in names)
            continue
        coded = {}
        for j, name in zip(positions, names, strict=True):
            level = name[len(term) + 1 : -1]
            coded[level.removeprefix("T.")] = (name, values[:, j] > 0.5)
        at_none = ~np.any([mask for _, mask in coded.values()], axis=0)
        for level in levels:
            name, mask = coded.get(level, (f"{term}[{level}]", at_none))
            rows.append((name, term, level, mask))
    return rows


def _spread(
    coef: np.ndarray, log_link: bool, quantiles: tuple = (0.05, 0.5, 0.95)
) -> dict:
    """Mean and quantiles of the per-row relativities ``exp(coef)`` among a
    level's rows (``local_q05``, ...)."""
    keys = ["local_mean", *(f"local_q{round(q * 100):02d}" for q in quantiles)]
    if not log_link or coef.size == 0:
        return dict.fromkeys(keys, np.nan)
    relativity = np.exp(coef)
    values = [relativity.mean(), *np.quantile(relativity, quantiles)]
    return dict(zip(keys, map(float, values), strict=True))
