"""``FitPolicy(fallback="gam")``: where the network is dropped, a GAM that
beats the GLM on the validation rows.

The GAM is ``splines=True``'s model on the GLM's own columns: a penalised
cubic B-spline basis on each numeric term with at least 6 values, one
smoothing penalty chosen by generalised cross-validation. The GAM and the GLM
are fitted on the fit's training rows and compared on its validation rows by
the rule that keeps a network (:func:`~autoglm_graph.network.paired_gain`:
lower deviance by more than ``FitPolicy.keep_standard_errors`` standard
errors). The GLM fitted on all rows saw the validation rows, so the
comparison refits it on the training rows too. A GAM that wins is refitted on
all rows and becomes the fitted model (``docs/decisions/gam_fallback.md``).
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
    """A GAM that beat the GLM on the validation rows, refitted on all rows.

    Attributes
    ----------
    solution : GLMSolution
        The GAM fitted on all rows (its terms, penalty and GCV scores).
    rows : FitRows
        The fit's rows with the GAM's design (the preprocessed columns, then
        the spline bases).
    gain, gain_se : float
        The validation rows' mean deviance of the GLM minus the GAM's (both
        fitted on the training rows), and its standard error.
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


def choose_gam(
    estimator, rows: FitRows, train_pos: np.ndarray, val_pos: np.ndarray
) -> GAMChoice | None:
    """The GAM refitted on all rows where it beats the GLM on ``val_pos``
    (both fitted on ``train_pos``); None where it does not, or where the GLM
    has no numeric term to bend."""
    from ..network import paired_gain  # torch: imported where it is used

    terms = replace(estimator._terms, varied_bases=None)
    design = terms.context(rows.design)
    gam_terms = glm_fit.add_splines(True, terms, estimator.preprocessor_, design)
    if gam_terms.splines is None:
        return None
    gam_rows = replace(rows, design=gam_terms.design(design, None))
    n_outputs, family = estimator._n_outputs, estimator.family_

    def on(positions: np.ndarray) -> FitRows:
        return FitRows(
            *(
                None if a is None else a[positions]
                for a in (
                    gam_rows.design,
                    rows.y,
                    rows.sample_weight,
                    rows.offset,
                    rows.groups,
                )
            )
        )

    train, val = on(train_pos), on(val_pos)
    gam = glm_fit.solve(
        estimator, gam_terms.select(train.design), train, family, gam_terms, n_outputs
    )
    glm = glm_fit.solve_on_rows(estimator, rows, train_pos, n_outputs)

    def unit_deviance(model, model_terms) -> torch.Tensor:
        # The GLM's terms read the preprocessed columns, the GAM's all.
        splines = model_terms.splines is not None
        width = val.design.shape[1] if splines else design.shape[1]
        predictor = replace(estimator.predictor(), global_glm=model, terms=model_terms)
        eta = predictor.global_eta(val.design[:, :width], val.offset)
        y = val.y if n_outputs > 1 else val.y.reshape(-1)
        eta = eta if n_outputs > 1 else eta[:, 0]
        return torch.as_tensor(family.unit_deviance(y, eta))

    gain, gain_se = paired_gain(
        unit_deviance(glm, terms),
        unit_deviance(gam.glm, gam.terms),
        torch.as_tensor(val.sample_weight),
    )
    if not gain > policy_of(estimator).keep_standard_errors * gain_se:
        return None
    solution = glm_fit.solve(
        estimator,
        gam_terms.select(gam_rows.design),
        gam_rows,
        family,
        gam_terms,
        n_outputs,
    )
    return GAMChoice(solution, gam_rows, gain, gain_se)
