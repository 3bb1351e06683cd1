"""``FitPolicy(fallback="gam")``: where the network is dropped, a GAM that
beats the GLM on rows neither saw.

The GAM is ``splines=True``'s model on the GLM's own columns: a penalised
cubic B-spline basis on each numeric term with at least 6 values, one
smoothing penalty chosen on all rows by generalised cross-validation. With
that penalty and the GLM's family, the GAM and the GLM are cross-fitted over
``FitPolicy.fallback_folds`` folds of all the rows, and the GAM is the fitted
model where its held-out deviance is lower by more than
``FitPolicy.fallback_standard_errors`` standard errors of the paired per-row
differences (:func:`~autoglm_graph.network.paired_gain`). The fit's own
validation split was the first yardstick: a tenth of the rows could not tell
a GAM that gains 1.4 % on the test rows from one that loses 0.4 %
(``docs/decisions/gam_fallback.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..utils import torch  # loaded at first use: a saved GLM predicts without it
from . import _glm_fit as glm_fit
from ._network_fit import policy_of
from ._rows import FitRows


@dataclass(frozen=True)
class GAMChoice:
    """A GAM that beat the GLM cross-fitted on the fit's rows, fitted on all.

    Attributes
    ----------
    solution : GLMSolution
        The GAM fitted on all rows (its terms, penalty and GCV scores).
    rows : FitRows
        The fit's rows with the GAM's design (the preprocessed columns, then
        the spline bases).
    gain, gain_se : float
        The rows' mean held-out deviance of the GLM minus the GAM's (each
        row's from the models fitted without its fold), and its standard
        error.
    """

    solution: glm_fit.GLMSolution
    rows: FitRows
    gain: float
    gain_se: float


def applies(estimator) -> bool:
    """Whether ``fallback="gam"`` can replace this estimator's GLM: no
    formula, splines or constraints of its own on the GLM's terms."""
    return (
        estimator.formula is None
        and glm_fit.splines_of(estimator) is False
        and getattr(estimator, "global_terms", None) is None
        and getattr(estimator, "local_sign", None) is None
    )


def choose_gam(estimator, rows: FitRows, folds: list[np.ndarray]) -> GAMChoice | None:
    """The GAM fitted on all rows where, cross-fitted over ``folds`` (the
    held-out positions of each), it beats the GLM cross-fitted on them; None
    where it does not, where there are fewer than two folds, or where the
    GLM has no numeric term to bend."""
    from ..network import paired_gain  # torch: imported where it is used

    terms = replace(estimator._terms, varied_bases=None)
    design = terms.context(rows.design)
    gam_terms = glm_fit.add_splines(True, terms, estimator.preprocessor_, design)
    if gam_terms.splines is None or len(folds) < 2:
        return None
    gam_rows = replace(rows, design=gam_terms.design(design, None))
    glm_rows = replace(rows, design=design)
    n_outputs, family = estimator._n_outputs, estimator.family_
    gam = glm_fit.solve(
        estimator,
        gam_terms.select(gam_rows.design),
        gam_rows,
        family,
        gam_terms,
        n_outputs,
    )
    y = rows.y if n_outputs > 1 else rows.y.reshape(-1)

    def held_out_deviance(model_rows: FitRows, solution) -> torch.Tensor:
        """Each row's unit deviance under the model fitted without its fold."""
        deviance = torch.empty(rows.n_samples, dtype=torch.float64)
        everything = np.arange(rows.n_samples)
        for held in folds:
            fit_on = np.setdiff1d(everything, held)
            model = glm_fit.solve_on_rows(
                estimator, model_rows, fit_on, n_outputs, solution
            )
            terms_used = terms if solution is None else solution.terms
            predictor = replace(
                estimator.predictor(), global_glm=model, terms=terms_used
            )
            offset = None if rows.offset is None else rows.offset[held]
            eta = predictor.global_eta(model_rows.design[held], offset)
            eta = eta if n_outputs > 1 else eta[:, 0]
            deviance[held] = torch.as_tensor(
                family.unit_deviance(y[held], eta), dtype=torch.float64
            )
        return deviance

    gain, gain_se = paired_gain(
        held_out_deviance(glm_rows, None),
        held_out_deviance(gam_rows, gam),
        torch.tensor(rows.sample_weight, dtype=torch.float64),  # a copy
    )
    if not gain > policy_of(estimator).fallback_standard_errors * gain_se:
        return None
    return GAMChoice(gam, gam_rows, gain, gain_se)
