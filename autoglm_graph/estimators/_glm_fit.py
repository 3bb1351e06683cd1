"""The global GLM's part of ``fit``: its terms, the exact solve, the balance,
its tables' figures.

Which columns of the preprocessed design the GLM reads
(:func:`~autoglm_graph.glm.choose_columns`: treatment coding, base levels) or a
formula's columns (:class:`~autoglm_graph.glm.FormulaDesign`), the spline
bases of ``splines`` (:class:`~autoglm_graph.glm.SplineDesign`) with their
smoothing penalty, the base levels the network varies too, the solve, the
intercept's shift of ``balance``, and the figures of ``summary()`` on the
fit's rows. Each function reads the estimator's parameters and returns what it
fitted; the estimator keeps it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from ..glm import (
    Family,
    FormulaDesign,
    GLMTerms,
    GlobalGLM,
    NegativeBinomialFamily,
    SplineDesign,
    balance_glm,
    choose_columns,
    choose_penalty,
    fit_global_glm,
    fit_negative_binomial,
)
from ..network import constrained_positions
from ..preprocessing import TabularPreprocessor
from ..utils import caller_stacklevel
from ._rows import FitRows


def splines_of(estimator):
    """The ``splines`` parameter (False for an estimator pickled before it)."""
    return getattr(estimator, "splines", False)


def splines_local_of(estimator):
    """The ``splines_local`` parameter ("all", the behaviour before it, for an
    estimator pickled before it)."""
    return getattr(estimator, "splines_local", "all")


# ----------------------------------------------------------------- the terms
def choose_terms(
    estimator, preprocessor: TabularPreprocessor, design, sample_weight, X
) -> tuple[GLMTerms, dict]:
    """The global GLM's terms and the base levels (``base_levels_``).

    The formula's columns of ``X``, or a choice among the preprocessed
    ``design``'s; then the spline bases of ``splines`` appended, and the base
    levels the network varies too.
    """
    if estimator.formula is not None:
        formula = FormulaDesign.fit(
            estimator.formula,
            X,
            estimator.fit_intercept,
            full_rank=estimator.categorical_coding == "treatment",
        )
        terms, base_levels = GLMTerms.from_formula(formula, design.shape[1]), {}
    else:
        if not estimator.fit_intercept and design.shape[1] == 0:
            raise ValueError(
                "The 'fit_intercept' parameter is False and X has no feature "
                "that varies: the model would have no term at all. Pass columns "
                "that vary, or fit_intercept=True (the intercept-only GLM)."
            )
        columns, base_levels = choose_columns(
            preprocessor,
            design,
            sample_weight,
            categorical_coding=estimator.categorical_coding,
            base_levels=estimator.base_levels,
            fit_intercept=estimator.fit_intercept,
        )
        terms = GLMTerms.from_preprocessor(
            preprocessor, columns, estimator.fit_intercept
        )
    terms = add_splines(splines_of(estimator), terms, preprocessor, design)
    return _vary_base_levels(estimator, terms, preprocessor), base_levels


def add_splines(
    chosen, terms: GLMTerms, preprocessor: TabularPreprocessor, design
) -> GLMTerms:
    """``terms`` with the spline bases of ``chosen`` (a ``splines`` parameter's
    value) numeric columns appended (themselves when it is False)."""
    if chosen is False:
        return terms
    names = [str(n) for n in preprocessor.get_feature_names_out()]
    numeric = set(map(str, preprocessor.numeric_features_))
    in_glm = {names[int(c)]: int(c) for c in terms.columns}
    candidates = {
        name: position
        for name, position in in_glm.items()
        if name in numeric and len(np.unique(design[:, position])) >= 6
    }
    if chosen is True:
        selected = list(candidates)
    else:
        unknown = [c for c in chosen if c not in candidates]
        if unknown:
            raise ValueError(
                f"The 'splines' parameter names column(s) {unknown!r} that are "
                "not numeric terms of the GLM with at least 6 distinct values "
                f"(those are: {sorted(candidates)!r})."
            )
        selected = list(dict.fromkeys(chosen))
    if not selected:
        return terms
    splines = SplineDesign.fit(
        design,
        [candidates[c] for c in selected],
        selected,
        terms.fit_intercept,
    )
    return terms.with_splines(splines, design.shape[1])


def _vary_base_levels(
    estimator, terms: GLMTerms, preprocessor: TabularPreprocessor
) -> GLMTerms:
    """``terms`` with the network also varying each categorical column's
    base level under treatment coding (:meth:`GLMTerms.vary_bases`), as it
    varies every level under ``categorical_coding="all_levels"``.

    Not without an intercept (none to absorb the base's deviation), with a
    formula or splines (the GLM's columns are not the preprocessor's), for
    a column with a level in ``global_terms`` or ``local_sign``, nor at all
    with the intercept in ``global_terms``: there the network varies the
    GLM's terms only, so that the constraints hold on the reported
    coefficients (:mod:`autoglm_graph.network.constraints`).
    """
    if (
        estimator.categorical_coding != "treatment"
        or not terms.fit_intercept
        or terms.formula is not None
        or terms.splines is not None
    ):
        return terms
    touched = constrained_positions(
        getattr(estimator, "global_terms", None),
        getattr(estimator, "local_sign", None),
        preprocessor,
        terms,
    )
    if 0 in touched:
        return terms
    columns = {int(terms.columns[p - 1]) for p in touched}
    blocks = [
        block
        for block in preprocessor.categorical_blocks()
        if not columns & {int(c) for c in block}
    ]
    return terms.vary_bases(blocks)


# ----------------------------------------------------------------- the solve
@dataclass(frozen=True)
class GLMSolution:
    """What the global GLM's solve gives the estimator.

    Attributes
    ----------
    glm : GlobalGLM
        The solution on the standardised design (``global_glm_``).
    family : Family
        The family fitted (the negative binomial's estimated theta in it).
    terms : GLMTerms
        The terms, the splines' penalty chosen.
    splines_penalty, splines_scores
        The splines' penalty of least GCV score and each penalty's score
        (``splines_penalty_``, ``splines_scores_``); None without splines.
    """

    glm: GlobalGLM
    family: Family
    terms: GLMTerms
    splines_penalty: float | None = None
    splines_scores: object = None


def solve(
    estimator,
    glm_design: np.ndarray,
    rows: FitRows,
    family: Family,
    terms: GLMTerms,
    n_outputs: int,
) -> GLMSolution:
    """The global GLM on ``glm_design`` (its terms' columns of the design),
    the splines' smoothing penalty chosen first by generalised
    cross-validation, the negative binomial's theta by maximum likelihood
    where ``theta=None``."""
    penalty = scores = None
    if terms.splines is not None:
        terms, penalty, scores = _smoothing_penalty(
            estimator.alpha, glm_design, rows, family, terms, n_outputs
        )
    glm_kwargs = _glm_kwargs(estimator.alpha, rows, terms)
    if isinstance(family, NegativeBinomialFamily) and _theta_by_ml(estimator):
        glm, family = fit_negative_binomial(glm_design, rows.y, **glm_kwargs)
    else:
        glm = fit_global_glm(
            glm_design, rows.y, family, n_outputs=n_outputs, **glm_kwargs
        )
    return GLMSolution(glm, family, terms, penalty, scores)


def solve_on_rows(
    estimator,
    rows: FitRows,
    positions: np.ndarray,
    n_outputs: int,
    solution: GLMSolution | None = None,
) -> GlobalGLM:
    """The fitted global GLM's model (or ``solution``'s) refitted on
    ``positions`` of the rows: its terms (the splines' penalty as chosen) and
    family (the negative binomial's theta as estimated), the coefficients
    alone estimated again (the cross-fitting of ``FitPolicy(fallback="gam")``)."""
    terms = estimator._terms if solution is None else solution.terms
    family = estimator.family_ if solution is None else solution.family
    # Newton's method starts from the model fitted on all the rows: nearby.
    start = estimator.global_glm_ if solution is None else solution.glm
    subset = FitRows(
        rows.design[positions],
        rows.y[positions],
        rows.sample_weight[positions],
        None if rows.offset is None else rows.offset[positions],
        None,
    )
    return fit_global_glm(
        terms.select(subset.design),
        subset.y,
        family,
        n_outputs=n_outputs,
        start=start,
        **_glm_kwargs(estimator.alpha, subset, terms),
    )


def _glm_kwargs(alpha: float, rows: FitRows, terms: GLMTerms) -> dict:
    """The solver's weights, offset and penalty for ``terms``: ``alpha`` on
    the user's units, or the splines' penalty with their smoothing one."""
    kwargs = dict(
        sample_weight=rows.sample_weight,
        offset=rows.offset,
        alpha=alpha,
        penalty_weights=terms.slope_penalty(),  # in the user's units
        fit_intercept=terms.fit_intercept,
    )
    if terms.splines is not None:
        kwargs.update(alpha=1.0, penalty_weights=terms.penalty_weights(alpha))
    return kwargs


def _smoothing_penalty(
    alpha: float, glm_design, rows: FitRows, family, terms: GLMTerms, n_outputs: int
):
    """The terms with the splines' penalty of least GCV score, the penalty
    and each penalty's score."""
    splines = terms.splines

    def weights(lam):
        trial = replace(terms, splines=splines.with_penalty(lam))
        return trial.penalty_weights(alpha)

    penalty, scores = choose_penalty(
        glm_design,
        rows.y,
        family,
        weights,
        n_outputs=n_outputs,
        sample_weight=rows.sample_weight,
        offset=rows.offset,
        fit_intercept=terms.fit_intercept,
    )
    return replace(terms, splines=splines.with_penalty(penalty)), penalty, scores


def _theta_by_ml(estimator) -> bool:
    """Whether the negative binomial theta is estimated (``theta=None``)."""
    return getattr(estimator, "theta", 1.0) is None and isinstance(
        estimator.family, str
    )


# --------------------------------------------------------------- the balance
def balance(estimator, rows: FitRows) -> tuple[GlobalGLM | None, float]:
    """The global GLM with its intercept shifted so that the fitted model
    (network included) reproduces the observed total on all the rows of
    ``fit`` (:func:`~autoglm_graph.glm.balance_glm`), and the shift; ``(None,
    0.0)`` when ``balance`` is off or does not apply (see
    ``GraphGLMRegressor``)."""
    family = estimator.family_
    setting = getattr(estimator, "balance", False)  # the classifier has none
    if setting is False or not family.has_balance_correction:
        return None, 0.0
    if not getattr(estimator, "fit_intercept", True):
        return None, 0.0  # no intercept to shift (balance=True raised in fit)
    if setting == "auto" and not family.canonical_link:
        return None, 0.0  # the maximum likelihood GLM stays as scikit-learn's
    eta, _ = estimator.predictor().coefficients(rows.design, rows.offset)
    return balance_glm(
        estimator.global_glm_, family, rows.y, eta[:, 0], rows.sample_weight
    )


# ---------------------------------------------------------- the tables' figures
def statistics(estimator, rows: FitRows, y, sample_weight):
    """The global GLM's figures on the fit's rows (``glm_statistics_``,
    :class:`~autoglm_graph.glm.GLMStatistics`): what ``summary()``,
    ``coef_table()`` and ``wald_test_terms()`` report without data, for the
    final GLM (its balance shift, a GAM fallback's terms); None, with a
    warning, where they cannot be computed. ``y`` and ``sample_weight`` are
    ``fit``'s arguments (the target's name, whether it was weighted)."""
    from ..glm import glm_statistics  # torch: imported where it is used

    try:
        return glm_statistics(
            estimator,
            rows.design,
            rows.y,
            rows.sample_weight,
            rows.offset,
            target=y,
            weighted=sample_weight is not None,
        )
    except (ValueError, ArithmeticError) as exc:  # (LinAlgError is a ValueError)
        # The fit stands without them: a table on the rows can still be asked.
        warnings.warn(
            f"The global GLM's figures on the fit's rows could not be computed "
            f"({exc}); summary(), coef_table() and wald_test_terms() need the "
            "training data.",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )
        return None
