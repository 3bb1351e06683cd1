"""The global GLM's figures on the rows of its fit, kept at the end of ``fit``.

:class:`GLMStatistics` holds what :func:`~autoglm_graph.glm.coef_table`,
:func:`~autoglm_graph.glm.wald_test_terms` and
:func:`~autoglm_graph.glm.glm_summary` report on the training rows, for every
``cov_type`` and ``weights``: the coefficients' covariances (p x p, p the
coefficient table's rows) and scalars, no per-row array. An estimator keeps
one as ``glm_statistics_``, and its model file saves it, so that
``summary()`` needs no data, as statsmodels' and R's do not.

:func:`glm_statistics` computes it from the fit's rows with the functions
those tables use on rows they are given, so that a call without data gives
what a call with the training rows gives, to rounding. The per-row work is
a few ``n m**2`` products (the Fisher information, the sandwich's meat, a
Gram matrix for the rank) and passes over the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The tables' modules (torch among their imports) are imported where the
# figures are computed: a loaded model that is the global GLM reads its kept
# figures without torch.

__all__ = ["GLMStatistics", "glm_statistics"]


@dataclass(frozen=True)
class GLMStatistics:
    """The global GLM's inference figures on the training rows.

    ``fit`` computes it (:func:`glm_statistics`); ``coef_table()``,
    ``wald_test_terms()`` and ``summary()`` without data read it. Its arrays
    are ``(n_coef, n_coef)``, ``n_coef`` the rows of ``coef_table()``, in its
    order and in the user's units; the rest are scalars.

    Attributes
    ----------
    fisher : ndarray of shape (n_coef, n_coef)
        The inverse penalised Fisher information, at dispersion 1: the
        ``"fisher"`` covariance is ``dispersion * fisher``.
    sandwich, sandwich_frequency : ndarray of shape (n_coef, n_coef)
        The ``"sandwich"`` covariance with ``weights="variance"`` and with
        ``weights="frequency"`` (the same without ``sample_weight``).
    dispersion, dispersion_frequency : float
        The scale, Pearson chi2 over the residual degrees of freedom (1 for
        the families of a fixed dispersion), for each ``weights``.
    log_likelihood, log_likelihood_frequency : float
        The summary's log-likelihood for each ``weights`` (NaN where the
        family has none).
    deviance, null_deviance, pearson_chi2 : float
        The summary's figures (the fitted GLM's, its balance shift included).
    rank : int
        The rank of the GLM's design, intercept included.
    n_rows : int
    total_weight : float
        ``sum(sample_weight)`` (``n_rows`` without weights).
    weighted : bool
        Whether ``fit`` was given ``sample_weight``.
    target_name : str
        The summary's ``dep_variable``.
    """

    fisher: np.ndarray
    sandwich: np.ndarray
    sandwich_frequency: np.ndarray
    dispersion: float
    dispersion_frequency: float
    log_likelihood: float
    log_likelihood_frequency: float
    deviance: float
    null_deviance: float
    pearson_chi2: float
    rank: int
    n_rows: int
    total_weight: float
    weighted: bool
    target_name: str

    def covariance(self, cov_type: str, weights: str) -> tuple[np.ndarray, float]:
        """The coefficients' covariance (a copy) and the dispersion of
        ``coef_table(cov_type=cov_type, weights=weights)``."""
        frequency = weights == "frequency"
        dispersion = self.dispersion_frequency if frequency else self.dispersion
        if cov_type == "fisher":
            return dispersion * self.fisher, dispersion
        sandwich = self.sandwich_frequency if frequency else self.sandwich
        return sandwich.copy(), dispersion

    def figures(self, weights: str) -> dict:
        """The summary header's figures for ``weights``."""
        frequency = weights == "frequency"
        return {
            "dep_variable": self.target_name,
            "n_rows": self.n_rows,
            "total_weight": self.total_weight,
            "weighted": self.weighted,
            "rank": self.rank,
            "deviance": self.deviance,
            "null_deviance": self.null_deviance,
            "pearson_chi2": self.pearson_chi2,
            "log_likelihood": (
                self.log_likelihood_frequency if frequency else self.log_likelihood
            ),
        }


def glm_statistics(
    estimator,
    design: np.ndarray,
    y_model: np.ndarray,
    sample_weight: np.ndarray | None,
    offset: np.ndarray | None,
    *,
    target=None,
    weighted: bool = True,
) -> GLMStatistics:
    """The :class:`GLMStatistics` of a fitted estimator on the rows of its fit.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        Fitted on these rows (its global GLM final: the balance shift, a
        GAM's terms).
    design : ndarray of shape (n_samples, n_columns)
        The rows' design, as ``estimator.predictor().design(X)`` gives it.
    y_model : ndarray of shape (n_samples,) or (n_samples, n_classes)
        The target as the family reads it (one-hot classes for multinomial).
    sample_weight, offset : ndarray of shape (n_samples,) or None
    target : array-like or None, default=None
        ``fit``'s ``y``, for its name (None: a formula's left side, or "y").
    weighted : bool, default=True
        Whether ``fit`` was given ``sample_weight`` (the summary reports its
        sum, and how it reads the weights).

    Returns
    -------
    GLMStatistics
    """
    from ._inference import _SolvedGLM
    from ._summary import _GLMFit, target_name

    fit = _SolvedGLM.from_design(estimator, design, y_model, sample_weight, offset)
    with np.errstate(all="ignore"):  # an undefined figure is inf or NaN, silently
        covariances = _covariances(estimator, fit)
        rank = covariances.pop("rank")
        figures = _GLMFit.from_design(
            estimator, design, y_model, sample_weight, offset, rank=rank
        )
        name = target_name(estimator, target)
        return _statistics(fit, figures, covariances, rank, name, weighted)


def _statistics(fit, figures, covariances: dict, rank: int, name: str, weighted):
    """The :class:`GLMStatistics` of the ``covariances`` and the header's
    ``figures`` (a ``_GLMFit``) on the rows of ``fit``; ``name``: the
    target's."""
    return GLMStatistics(
        **covariances,
        log_likelihood=float(
            figures.log_likelihood(covariances["dispersion"], "variance")
        ),
        log_likelihood_frequency=float(
            figures.log_likelihood(covariances["dispersion_frequency"], "frequency")
        ),
        deviance=figures.deviance(figures.eta),
        null_deviance=figures.deviance(figures.null_eta),
        pearson_chi2=figures.pearson_chi2(),
        rank=int(rank),
        n_rows=int(fit.X1.shape[0]),
        total_weight=float(fit.w.sum()),
        weighted=bool(weighted),
        target_name=name,
    )


def _covariances(estimator, fit) -> dict:
    """``fisher``, ``sandwich``, ``sandwich_frequency`` (in the user's units),
    ``dispersion`` and ``dispersion_frequency`` of :class:`GLMStatistics` on
    the rows of ``fit`` (a ``_SolvedGLM``), as ``coef_table`` computes each
    on rows it is given, and the ``rank`` of the design."""
    from ._inference import _meat, _pearson_chi2, _scores

    w = fit.w
    fisher, bread, score_eta, rank = _breads(estimator, fit)
    scores = _scores(fit, score_eta)
    meat = _meat(scores, w, frequency=False)
    # Unit weights: a frequency weight of 1 is one copy, the same meat.
    meat_frequency = meat if np.all(w == 1) else _meat(scores, w, frequency=True)
    del scores
    jacobian = fit.model.user_jacobian(fit.model.reported().shape[0])
    dispersion = dispersion_frequency = 1.0
    if fit.family.estimated_dispersion:
        pearson = _pearson_chi2(fit)
        dispersion = pearson / (fit.X1.shape[0] - rank)
        dispersion_frequency = pearson / (w.sum() - rank)

    def user(cov: np.ndarray) -> np.ndarray:  # (coef_table's order of products)
        return jacobian @ cov @ jacobian.T

    return {
        "fisher": user(fisher),
        "sandwich": user(bread @ meat @ bread),
        "sandwich_frequency": user(bread @ meat_frequency @ bread),
        "dispersion": float(dispersion),
        "dispersion_frequency": float(dispersion_frequency),
        "rank": rank,
    }


def _breads(estimator, fit):
    """``(fisher, bread, score_eta, rank)``: the inverse penalised expected
    Hessian (the Fisher covariance at dispersion 1), the observed one's (the
    sandwich's bread; the same for a canonical link and the multinomial), the
    rows' scores on the linear predictors and the rank of the design, whose
    check reads the information at hand (:func:`design_rank`).

    Each Hessian is computed from the rows, as ``coef_table`` computes it on
    rows it is given (the solver's own differs from it by rounding, which the
    sandwich of a design with unidentified directions magnifies)."""
    from scipy import linalg

    from ._inference import _fit_penalty, _parts, _penalised_hessian, design_rank

    family = fit.family
    score_eta, info_eta = _parts(fit, observed=False)
    expected = observed = _penalised_hessian(estimator, fit, info_eta)[0]
    if not (family.canonical_link or family.multi_output):
        # The sandwich's curvature at y; a canonical link's does not depend on y.
        info_observed = _parts(fit, observed=True)[1]
        observed = _penalised_hessian(estimator, fit, info_observed)[0]
    if family.multi_output:
        rank = design_rank(fit.X1)
    else:
        information = expected - _fit_penalty(estimator, fit, 1)
        rank = design_rank(fit.X1, information, fit.w * info_eta[:, 0, 0])
    fisher = linalg.pinvh(expected)
    bread = fisher if observed is expected else linalg.pinvh(observed)
    return fisher, bread, score_eta, rank
