"""Inference tables: the global GLM's coefficient table, the spread of local ones.

:func:`coef_table` is the table of a statsmodels GLM summary for the global
GLM: standard errors from the Fisher information (or a sandwich), z values,
p-values and confidence intervals. :func:`local_coef_summary` says, term by
term, how much the per-row coefficients of the graph GLM move away from the
global one.

The table's covariances are p x p (p coefficients) and known at the end of
``fit``: the estimator keeps them for its training rows
(``glm_statistics_``, :class:`~autoglm_graph.glm.GLMStatistics`), the Fisher
one and the two sandwiches (``weights="variance"`` and ``"frequency"``) with
the dispersions, so that ``coef_table()`` needs no data, after ``fit`` as
after ``load``. It keeps no per-row array, nor the design. Given rows (``X``
and ``y``), the table is computed on them instead, at the fitted
coefficients, in float64; on the training rows that is the kept table.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from scipy import linalg, stats
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from ..utils import align_to_rows, caller_stacklevel, check_offset
from ._formula import split_target

if TYPE_CHECKING:
    from ._terms import GLMTerms
    from .families import Family

__all__ = ["coef_table", "local_coef_summary", "wald_test_terms"]

COV_TYPES = ("fisher", "sandwich")
WEIGHT_TYPES = ("variance", "frequency")


def coef_table(
    estimator,
    X=None,
    y=None,
    sample_weight=None,
    offset=None,
    *,
    cov_type: str = "fisher",
    alpha: float = 0.05,
    weights: str = "variance",
) -> pd.DataFrame:
    """Coefficient table of the global GLM, as statsmodels' GLM summary.

    Called without data, the table of the training rows, kept at the end of
    ``fit`` (``glm_statistics_``) and saved with the model; with ``X`` and
    ``y``, the table computed on those rows at the fitted coefficients.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    X : array-like or DataFrame of shape (n_samples, n_features), default=None
        None (with ``y``, ``sample_weight`` and ``offset`` None too): the
        training rows, with the ``sample_weight`` and ``offset`` of the fit.
        Else the rows the standard errors are computed on; the training rows
        give the same table as None, to rounding. With a ``formula`` that
        names the target on its left side, ``X`` may hold the target and
        ``y`` be None, as in ``fit``.
    y : array-like of shape (n_samples,), default=None
        The target of the rows ``X``.
    sample_weight : array-like of shape (n_samples,), default=None
        The weights of the rows ``X``; ``weights`` says what they mean.
    offset : array-like of shape (n_samples,), default=None
        The offset of the rows ``X``.
    cov_type : {"fisher", "sandwich"}, default="fisher"
        ``"fisher"``: the inverse (expected) Fisher information times the
        dispersion. ``"sandwich"``: the robust ``H^-1 (sum_i s_i s_i') H^-1``
        with per-row scores ``s_i`` and the observed Hessian ``H`` (as
        statsmodels' ``cov_type="HC0"``).
    alpha : float, default=0.05
        Level of the confidence intervals, ``1 - alpha`` (not the penalty).
    weights : {"variance", "frequency"}, default="variance"
        ``"variance"``: row ``i`` is one observation whose variance is
        ``dispersion * V(mu_i) / w_i`` (statsmodels' ``var_weights``, R's
        ``weights``). ``"frequency"``: row ``i`` stands for ``w_i`` identical
        observations (statsmodels' ``freq_weights``): the residual degrees of
        freedom are ``sum(w) - rank`` and the sandwich counts each copy. The
        coefficients are the same; the standard errors of the families with
        an estimated dispersion, and all sandwich ones, differ.

    Returns
    -------
    DataFrame
        Indexed by term (``"intercept"`` and ``feature_names_out_``; for the
        multinomial family a (class, term) MultiIndex over the classes other
        than the reference ``classes_[0]``), with columns ``coef``,
        ``std_err``, ``z``, ``p_value``, ``ci_lower`` and ``ci_upper``. Its
        ``attrs`` hold ``dispersion``, ``cov_type``, the covariance matrix
        ``cov`` and, for the multinomial family, ``reference_class``.

    Raises
    ------
    ValueError
        When ``X`` comes without ``y`` (and no formula names the target), ``y``
        without ``X``, or ``sample_weight`` or ``offset`` without both; and,
        called without data, for an estimator that kept no table (one loaded
        from a file written before the table was kept): pass it the training
        data.

    Notes
    -----
    The global GLM minimises ``(1/sum w) sum_i w_i d_i / 2 + alpha_l2/2 ||beta||^2``
    (``alpha_l2`` is the estimator's ``alpha``). Scaled by ``sum w`` its
    Hessian is ``X' W X + alpha_l2 sum(w) P``, with ``W`` the GLM working
    weights ``w_i (dmu/deta)^2 / V(mu_i)`` and ``P`` the identity on the
    slopes (the intercept is not penalised). The standard errors are those of
    the penalised estimator, from this penalised Hessian; with the default,
    tiny penalty they agree with the unpenalised GLM's except in directions the
    data do not identify (one-hot levels that sum to the intercept), where
    they are large, as they should be. With ``alpha_l2=0`` they are
    statsmodels'. With ``splines`` the smoothing penalty joins ``P`` on the
    spline columns: the covariance is the Bayesian one of a penalised GLM
    (mgcv's ``Vp``, Wood 2006), which covers the smoothing bias. The
    dispersion is the Pearson chi2 over ``n - rank`` for the gaussian, gamma
    and tweedie families and 1 for the others.

    The multinomial family is fitted with one coefficient vector per class,
    which only the penalty identifies; the table reports the identified
    reference-class parametrisation of statsmodels' ``MNLogit`` instead: the
    first class of ``classes_`` is the reference, and each other class ``k``
    gets ``beta_k - beta_ref`` (intercept included), ``(K - 1) * (p + 1)``
    parameters. Their Hessian is the multinomial information in that
    parametrisation plus the penalty's: the fit penalises every class's
    slopes, and the fitted ``beta`` is the one with the least penalty among
    those with the same differences, so the differences carry the penalty
    ``alpha_l2 sum(w) gamma' ((I - 11'/K) kron P) gamma`` (the same matrix is
    the precision of the differences under the penalty's Gaussian prior). With
    ``alpha_l2=0`` coefficients and standard errors are MNLogit's; at the
    default, tiny ``alpha`` they are nearly the same.

    Examples
    --------
    >>> import numpy as np
    >>> from autoglm_graph import GraphGLMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = rng.poisson(np.exp(0.3 * X[:, 0]))
    >>> model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    >>> model.coef_table().columns.tolist()
    ['coef', 'std_err', 'z', 'p_value', 'ci_lower', 'ci_upper']
    >>> bool(np.allclose(model.coef_table(X, y), model.coef_table()))  # the same rows
    True
    """
    _check_table_params(cov_type, alpha, weights)
    check_is_fitted(estimator, "global_glm_")
    rows = rows_of_call(estimator, X, y, sample_weight, offset, "coef_table")
    if rows is None:
        statistics = kept_statistics(estimator, "coef_table")
        cov, dispersion = statistics.covariance(cov_type, weights)
        model = _SolvedModel.of(estimator)
        coef, _ = model.to_user_units(model.reported())
        return _table(estimator, coef, cov, alpha, dispersion, cov_type)
    fit = _SolvedGLM.from_data(estimator, *rows)
    frequency = weights == "frequency"
    params, cov, dispersion = _solver_covariance(estimator, fit, cov_type, frequency)
    coef, cov = fit.model.to_user_units(params, cov)
    return _table(estimator, coef, cov, alpha, dispersion, cov_type)


def rows_of_call(estimator, X, y, sample_weight, offset, method: str):
    """``(X, y, sample_weight, offset)`` of a call on rows, or None for a call
    without data (the training rows' figures kept at fit); a formula's target
    is read from ``X`` where ``y`` is None. ValueError for a part of the data."""
    if X is None and y is None:
        if sample_weight is not None or offset is not None:
            raise ValueError(
                f"{method}() got sample_weight or offset without X and y: pass "
                "the rows they belong to (X and y with them), or none of the four "
                "for the training rows' figures kept at fit."
            )
        return None
    formula = getattr(estimator, "formula", None)
    if X is not None and y is None and formula is not None:
        X, y = split_target(formula, estimator.fit_intercept, X, None)
    if X is None or y is None:
        given, missing = ("y", "X") if X is None else ("X", "y")
        raise ValueError(
            f"{method}() got {given} without {missing}: pass both, the rows to "
            "report on, or neither for the training rows' figures kept at fit."
        )
    return X, y, sample_weight, offset


def kept_statistics(estimator, method: str):
    """The estimator's :class:`~autoglm_graph.glm.GLMStatistics`; ValueError
    where it kept none."""
    statistics = getattr(estimator, "glm_statistics_", None)
    if statistics is None:
        raise ValueError(
            f"This {type(estimator).__name__} kept no figures of its training rows "
            "(saved by an autoglm_graph that did not keep them, an interval member, "
            "or a fit that could not compute them): pass the training data, "
            f"{method}(X, y, sample_weight, offset), as given to fit."
        )
    return statistics


def _check_table_params(cov_type: str, alpha: float, weights: str) -> None:
    if cov_type not in COV_TYPES:
        raise ValueError(
            f"The 'cov_type' parameter must be one of {', '.join(COV_TYPES)}; "
            f"got cov_type={cov_type!r}."
        )
    if not 0 < alpha < 1:
        raise ValueError(f"The 'alpha' parameter must be in (0, 1); got {alpha!r}.")
    if weights not in WEIGHT_TYPES:
        raise ValueError(
            f"The 'weights' parameter must be one of {', '.join(WEIGHT_TYPES)}; "
            f"got weights={weights!r}."
        )


@dataclass(frozen=True)
class _SolvedModel:
    """The global GLM as solved, in the solver's columns: what the table's
    coefficients are, without data."""

    family: Family
    terms: GLMTerms
    params: np.ndarray  # [K, m]: the coefficients as solved (see of)
    n_intercept: int  # 1, or 0 for a model without intercept
    correction: float  # the balance shift taken off the intercept

    @classmethod
    def of(cls, estimator) -> _SolvedModel:
        terms = estimator.predictor().glm_terms
        glm = estimator.global_glm_
        n_intercept = int(terms.fit_intercept)
        params = np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
        params = params[:, 1 - n_intercept :]  # [K, p+1]
        # The standard errors are those of the GLM as solved: the balance shift
        # (``balance=True``) moves the intercept off its optimum, and is added
        # back to the reported intercept (:meth:`to_user_units`).
        correction = 0.0
        if n_intercept:
            correction = getattr(estimator, "balance_correction_", 0.0)
        params[:, 0] -= correction
        family = estimator.family_
        return cls(family, terms, params, n_intercept, correction)

    def reported(self) -> np.ndarray:
        """The reported parameters ``[K', m]``: the multinomial's differences
        to the reference class (``K' = K - 1``), else the parameters."""
        if self.family.multi_output:
            return self.params[1:] - self.params[0]
        return self.params

    def user_jacobian(self, n_outputs: int) -> np.ndarray:
        """The map of ``n_outputs`` blocks of solver parameters to the user's
        units: intercept - sum_j c_j shift_j / scale_j, and c_j / scale_j."""
        shift, scale = self.terms.shift, self.terms.scale
        block = np.diag(np.r_[[1.0] * self.n_intercept, 1.0 / scale])
        if self.n_intercept:
            block[0, 1:] = -shift / scale
        return linalg.block_diag(*([block] * n_outputs))

    def to_user_units(self, params: np.ndarray, cov: np.ndarray | None = None):
        """The coefficients (and covariance) of reported ``params`` in the
        user's units: ``(coef, cov)``, ``cov`` None without one."""
        jacobian = self.user_jacobian(params.shape[0])
        if not self.family.multi_output:  # (the classes' differences do not move)
            params = params.copy()
            params[:, 0] += self.correction
        coef = jacobian @ params.ravel()
        return coef, None if cov is None else jacobian @ cov @ jacobian.T


@dataclass(frozen=True)
class _SolvedGLM:
    """The global GLM on rows, in the solver's columns."""

    model: _SolvedModel
    X1: np.ndarray  # the solver's design, intercept column first (if any)
    y: np.ndarray  # encoded: [n], or one-hot [n, K]
    w: np.ndarray
    eta: np.ndarray  # [n, K], offset included

    @property
    def family(self) -> Family:
        return self.model.family

    @classmethod
    def from_data(cls, estimator, X, y, sample_weight, offset) -> _SolvedGLM:
        design = estimator.predictor().design(X)
        y_model = encode_target(estimator, y)
        check_consistent_length(design, y_model)
        sample_weight = align_to_rows(sample_weight, X, "sample_weight")
        offset = align_to_rows(offset, X, "offset")
        return cls.from_design(estimator, design, y_model, sample_weight, offset)

    @classmethod
    def from_design(cls, estimator, design, y_model, sample_weight, offset):
        """The rows' design (``predictor().design``'s), encoded target, weights
        (None: ones) and offset (None: none)."""
        model = _SolvedModel.of(estimator)
        design = model.terms.select(design)  # float64
        n = design.shape[0]
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
        check_consistent_length(design, w)
        offset = check_offset(offset, n)
        ones = [np.ones(n)] if model.n_intercept else []
        X1 = np.column_stack([*ones, design])  # intercept first
        eta = X1 @ model.params.T + (0.0 if offset is None else offset[:, None])
        return cls(model, X1, y_model, w, eta)


def _solver_covariance(estimator, fit: _SolvedGLM, cov_type: str, frequency: bool):
    """The reported parameters, their covariance and the dispersion, in the
    solver's columns: ``(params [K, m], cov [K * m, K * m], dispersion)``."""
    params = fit.model.reported()
    score_eta, info_eta = _parts(fit, observed=cov_type == "sandwich")
    hessian, penalty = _penalised_hessian(estimator, fit, info_eta)
    scores = _scores(fit, score_eta)
    _check_stationary(scores.sum(axis=0) - penalty @ params.ravel(), fit.w.sum())
    bread = linalg.pinvh(hessian)
    dispersion = 1.0
    if fit.family.estimated_dispersion:
        n_obs = fit.w.sum() if frequency else fit.X1.shape[0]
        dispersion = _pearson_chi2(fit) / (n_obs - design_rank(fit.X1))
    if cov_type == "fisher":
        return params, dispersion * bread, dispersion
    return params, bread @ _meat(scores, fit.w, frequency) @ bread, dispersion


def _parts(fit: _SolvedGLM, observed: bool):
    """Per-row scores on the linear predictors ``[n, K']`` and information
    ``[n, K', K']``, in the reported parametrisation (the multinomial's
    classes other than the reference); ``observed``: the curvature in place
    of the expected information (:func:`_single_parts`)."""
    if fit.family.multi_output:
        score_eta, info_eta = _multinomial_parts(fit.y, fit.eta)
        # Reference-class parametrisation: class k > 0 gets beta_k - beta_0.
        return score_eta[:, 1:], info_eta[:, 1:, 1:]
    return _single_parts(fit.family, fit.y, fit.eta[:, 0], observed)


def _penalised_hessian(estimator, fit: _SolvedGLM, info_eta: np.ndarray):
    """``(X' W X + sum(w) P, sum(w) P)`` in (output, output) blocks."""
    penalty = _fit_penalty(estimator, fit, info_eta.shape[1])
    return _information(fit.X1, fit.w, info_eta) + penalty, penalty


def _fit_penalty(estimator, fit: _SolvedGLM, n_outputs: int) -> np.ndarray:
    """``sum(w) P``, the penalty's Hessian on the rows of ``fit``."""
    model = fit.model
    penalty = _penalty_matrix(
        estimator, model.terms, model.n_intercept, fit.family.multi_output, n_outputs
    )
    return penalty * fit.w.sum()


def _scores(fit: _SolvedGLM, score_eta: np.ndarray) -> np.ndarray:
    """The per-row scores on the parameters, ``[n, K' * m]``."""
    w, X1 = fit.w, fit.X1
    scores = (w[:, None] * score_eta)[:, :, None] * X1[:, None, :]  # [n, K, p+1]
    return scores.reshape(X1.shape[0], -1)


def _meat(scores: np.ndarray, w: np.ndarray, frequency: bool) -> np.ndarray:
    """The sandwich's meat ``sum_i s_i s_i'``; with frequency weights, row
    ``i`` is ``w_i`` copies of the score ``s_i / w_i`` each."""
    if frequency:  # s_i s_i' / w_i: (s_i / sqrt(w_i)) times itself
        root = np.sqrt(w)[:, None]
        scores = np.divide(scores, root, out=np.zeros_like(scores), where=root > 0)
    return scores.T @ scores  # numpy's symmetric product (BLAS syrk)


def _pearson_chi2(fit: _SolvedGLM) -> np.float64:
    """``sum_i w_i (y_i - mu_i)**2 / V(mu_i)`` at the solved coefficients
    (the dispersion's numerator; a single linear predictor)."""
    family, w = fit.family, fit.w
    mu = family.inverse_link(torch.as_tensor(fit.eta[:, 0])).numpy()
    variance = family.unit_variance(torch.as_tensor(mu)).numpy()
    return np.sum(w * (fit.y - mu) ** 2 / variance)  # (numpy: x / 0 is inf)


def design_rank(X1: np.ndarray, information=None, row_weights=None) -> int:
    """``np.linalg.matrix_rank(X1)``, without its SVD of the rows where the
    answer is certain.

    The rank is ``m`` (the columns) where every eigenvalue of the Gram matrix
    ``X1' X1`` is above ``floor = max(1e-8, 4 n m eps)`` times the largest:
    its rounding (at most ``n m eps`` times the largest) cannot hide a
    singular value of ``X1`` below the rank's tolerance, ``max(n, m) eps``
    times the largest. Else the SVD decides. The Gram matrix costs
    ``n m**2 / 2`` flops, a few times less than the SVD; ``information``,
    ``X1' diag(row_weights) X1`` with ``row_weights`` > 0 (a GLM's, at hand),
    spares it where its eigenvalues' ratio times ``min / max`` of the weights,
    a lower bound of the Gram matrix's ratio, is above ``2 floor``.
    """
    n, m = X1.shape
    if m == 0:
        return 0
    floor = max(1e-8, 4 * n * m * np.finfo(np.float64).eps)
    if information is not None and np.min(row_weights) > 0:
        eigenvalues = linalg.eigvalsh(information)
        spread = np.min(row_weights) / np.max(row_weights)
        if eigenvalues[0] * spread > 2 * floor * eigenvalues[-1]:
            return m
    eigenvalues = linalg.eigvalsh(X1.T @ X1)
    if eigenvalues[0] > floor * eigenvalues[-1] > 0:
        return m
    return int(np.linalg.matrix_rank(X1))


def _information(X1: np.ndarray, w: np.ndarray, info_eta: np.ndarray) -> np.ndarray:
    """The Hessian of ``sum_i w_i d_i / 2`` in (output, output) blocks.

    ``info_eta`` [n, K, K] is the per-row information on the linear
    predictors; the result is ``[K * m, K * m]`` with ``m`` design columns.
    """
    K, m = info_eta.shape[1], X1.shape[1]
    hessian = np.empty((K, m, K, m))
    for k in range(K):
        for j in range(K):
            c = w * info_eta[:, k, j]
            if K == 1 and np.all(c >= 0):
                # A.T @ A of one array: numpy's symmetric product (BLAS syrk),
                # half the flops of the general one.
                scaled = X1 * np.sqrt(c)[:, None]
                hessian[k, :, j, :] = scaled.T @ scaled
            else:
                hessian[k, :, j, :] = X1.T @ (X1 * c[:, None])
    return hessian.reshape(K * m, K * m)


def _penalty_matrix(
    estimator, terms, n_intercept: int, multi_output: bool, n_outputs: int
) -> np.ndarray:
    """The penalty's Hessian per unit of weight, in the reported parametrisation.

    ``alpha`` penalises the slopes in the user's units (``alpha / scale_j**2``
    on the solver's column ``j``), the splines' smoothing penalty joins it on
    their columns, and the intercept is free: a diagonal ``D``. A single output
    gets ``D``. The multinomial fit penalises all ``K`` classes'
    ``beta_k' D beta_k``; the likelihood depends only on the differences
    ``gamma_k = beta_k - beta_0`` (``k = 1..K-1``), and the fitted ``beta``
    minimises the penalty among those with the same differences, so the
    penalty of ``gamma`` is ``min_c sum_k (c + gamma_k)' D (c + gamma_k)`` (with
    ``gamma_0 = 0``), i.e. ``gamma' ((I - 11'/K) kron D) gamma``. This is also
    the precision of ``gamma`` under the Gaussian prior on ``beta`` that the
    penalty is (Bayesian covariance, as for the other families).
    """
    slopes = terms.penalty_weights(estimator.alpha)  # the solver's own
    if slopes.ndim == 1:
        slopes = np.diag(slopes)
    m = n_intercept + len(slopes)
    diagonal = np.zeros((m, m))  # D, a matrix where a factor's levels couple
    diagonal[n_intercept:, n_intercept:] = slopes
    coupling = np.eye(n_outputs)
    if multi_output:
        coupling -= 1.0 / (n_outputs + 1)  # K = n_outputs + 1 classes
    return np.kron(coupling, diagonal)


def _single_parts(family, y: np.ndarray, eta: np.ndarray, observed: bool):
    """Per-row score ``-d(d_i/2)/d eta`` [n, 1] and information [n, 1, 1].

    The information is the expected one, ``(dmu/deta)^2 / V(mu)``, or with
    ``observed`` the curvature ``d2(d_i/2)/d eta2`` (they agree for canonical
    links). Derivatives come from autograd through the family's own functions.

    The expected information is computed as the curvature at ``y = mu``,
    which equals ``(dmu/deta)^2 / V(mu)`` (the ``(y - mu)`` term vanishes) but
    stays finite where a fitted probability rounds to 0 or 1: there the ratio
    is 0/0, while the deviance, written on the link scale, is smooth.
    """
    eta_t = torch.as_tensor(eta, dtype=torch.float64).requires_grad_(True)
    y_t = torch.tensor(np.asarray(y, dtype=np.float64))  # a copy: y may be read-only
    half = family.unit_deviance(y_t, eta_t) / 2
    (grad,) = torch.autograd.grad(half.sum(), eta_t, create_graph=observed)
    if not observed:
        mu = family.inverse_link(eta_t).detach()
        half_at_mu = family.unit_deviance(mu, eta_t) / 2
        (grad_at_mu,) = torch.autograd.grad(half_at_mu.sum(), eta_t, create_graph=True)
        (info,) = torch.autograd.grad(grad_at_mu.sum(), eta_t)
    else:
        (info,) = torch.autograd.grad(grad.sum(), eta_t)
    # Far out on the link scale (|eta| in the hundreds: separated classes with
    # no penalty) autograd's second derivative can still be 0 * inf; the limit
    # there is 0, a row the fit is certain about and that carries no information.
    info = torch.nan_to_num(info.detach(), nan=0.0, posinf=0.0, neginf=0.0)
    score = -grad.detach().numpy()
    return score[:, None], info.numpy()[:, None, None]


def _multinomial_parts(y: np.ndarray, eta: np.ndarray):
    """Scores ``y - p`` [n, K] and information ``diag(p) - p p'`` [n, K, K]."""
    p = torch.softmax(torch.as_tensor(eta, dtype=torch.float64), dim=1).numpy()
    info = np.einsum("ik,kl->ikl", p, np.eye(p.shape[1])) - np.einsum(
        "ik,il->ikl", p, p
    )
    return y - p, info


def _check_stationary(gradient: np.ndarray, total_weight: float) -> None:
    """Warn when the fitted coefficients are not the optimum on this data."""
    if np.max(np.abs(gradient)) / total_weight > 1e-3:
        warnings.warn(
            "The global GLM's coefficients are not stationary on this data: it is "
            "not the data (X, y, sample_weight, offset) of the fit, and the "
            "standard errors are those of the fitted coefficients on these rows. "
            "Without data, coef_table() and summary() report the training rows.",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )


def encode_target(estimator, y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        y = y.reshape(-1)
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        return y.astype(np.float64)
    codes = np.searchsorted(classes, y)
    codes = np.clip(codes, 0, len(classes) - 1)
    unknown = classes[codes] != y
    if np.any(unknown):
        raise ValueError(
            f"y contains labels not seen in fit: {np.unique(y[unknown])[:5].tolist()}."
        )
    if len(classes) == 2:
        return codes.astype(np.float64)
    return np.eye(len(classes))[codes]


def _terms(estimator) -> pd.Index:
    """The table's rows: terms, or (class, term) for the multinomial family,
    whose first class is the reference and has no rows."""
    terms = [*_intercept(estimator), *estimator.feature_names_out_]
    if estimator.global_glm_.coef.shape[0] == 1:
        return pd.Index(terms, name="term")
    return pd.MultiIndex.from_product(
        [list(estimator.classes_[1:]), terms], names=["class", "term"]
    )


def wald_test_terms(
    estimator, X=None, y=None, sample_weight=None, offset=None, **kwargs
) -> pd.DataFrame:
    """One joint Wald test per term of the global GLM, as statsmodels'
    ``wald_test_terms``: a categorical column's levels together, every other
    term alone.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    X, y, sample_weight, offset : default=None
        None: the tests on the training rows, from the covariance kept at
        fit; else the rows the covariance is computed on, as for
        :func:`coef_table`.
    **kwargs
        ``cov_type`` and ``weights`` of :func:`coef_table`.

    Returns
    -------
    DataFrame
        Indexed by term (``"intercept"``, a numeric term's name, or a
        categorical column's name), with the ``chi2`` statistic, its ``df``
        (the number of coefficients tested: the term's columns, times ``K - 1``
        for a multinomial model of ``K`` classes, whose coefficients are those
        of :func:`coef_table`, relative to the reference class ``classes_[0]``)
        and ``p_value``; a term alone has ``chi2 = z**2`` of :func:`coef_table`.

    Raises
    ------
    ValueError
        As :func:`coef_table`: a part of the data, or no data for an estimator
        that kept no covariance.
    """
    check_is_fitted(estimator, "global_glm_")
    rows = rows_of_call(estimator, X, y, sample_weight, offset, "wald_test_terms")
    if rows is None:
        kept_statistics(estimator, "wald_test_terms")
    table = coef_table(estimator, *(rows or ()), **kwargs)
    coef, cov = table["coef"].to_numpy(), table.attrs["cov"]
    terms = estimator.predictor().glm_terms
    names = [*_intercept(estimator), *estimator.feature_names_out_]
    n_terms = len(names)
    groups: dict[str, list[int]] = {name: [j] for j, name in enumerate(names)}
    first = len(_intercept(estimator))
    pre = estimator.preprocessor_
    blocks = zip(pre.categorical_features_, pre.categorical_blocks(), strict=True)
    if terms.formula is not None:  # a formula's terms (C(region), bs(age))
        blocks = [
            (term, terms.columns[positions])
            for term, positions in terms.formula.term_columns.items()
            if len(positions) > 1
        ]
    if terms.splines is not None:  # a column's linear term and basis jointly
        blocks = list(blocks) + [
            (name, [spline.position, *(terms.n_context + np.asarray(b))])
            for (name, b), spline in zip(
                terms.splines.blocks.items(), terms.splines.terms, strict=True
            )
        ]
    for column, block in blocks:
        members = [first + j for j, c in enumerate(terms.columns) if c in block]
        if members:
            for j in members:
                groups.pop(names[j])
            groups[str(column)] = members
    rows = {}
    n_outputs = len(coef) // n_terms
    for name, members in groups.items():
        index = [k * n_terms + j for k in range(n_outputs) for j in members]
        b, v = coef[index], cov[np.ix_(index, index)]
        chi2 = float(b @ linalg.pinvh(v) @ b)
        df = int(np.linalg.matrix_rank(v))
        rows[name] = (chi2, df, float(stats.chi2.sf(chi2, df)))
    result = pd.DataFrame.from_dict(
        rows, orient="index", columns=["chi2", "df", "p_value"]
    )
    result.index.name = "term"
    return result


def _intercept(estimator) -> list[str]:
    """``["intercept"]``, or nothing for a model fitted without one."""
    return ["intercept"] if getattr(estimator, "fit_intercept", True) else []


def _table(estimator, coef, cov, alpha, dispersion, cov_type) -> pd.DataFrame:
    std_err = np.sqrt(np.maximum(np.diag(cov), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = coef / std_err
    quantile = stats.norm.ppf(1 - alpha / 2)
    table = pd.DataFrame(
        {
            "coef": coef,
            "std_err": std_err,
            "z": z,
            "p_value": 2 * stats.norm.sf(np.abs(z)),
            "ci_lower": coef - quantile * std_err,
            "ci_upper": coef + quantile * std_err,
        },
        index=_terms(estimator),
    )
    table.attrs.update(dispersion=float(dispersion), cov_type=cov_type, cov=cov)
    if estimator.global_glm_.coef.shape[0] > 1:
        table.attrs["reference_class"] = estimator.classes_[0]
    return table


def local_coef_summary(
    estimator,
    X,
    offset=None,
    *,
    quantiles: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95),
) -> pd.DataFrame:
    """How much the per-row coefficients vary over the rows of ``X``, per term.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    X : array-like or DataFrame of shape (n_samples, n_features)
    offset : array-like of shape (n_samples,), default=None
        Passed to ``local_coef`` (it does not change coefficients).
    quantiles : tuple of float, default=(0.05, 0.25, 0.5, 0.75, 0.95)
        The quantiles reported, as columns ``q05``, ``q25``, ... (the
        percentage, two digits).

    Returns
    -------
    DataFrame
        One line per term (``"intercept"`` and ``feature_names_out_``; a
        (class, term) MultiIndex for the multinomial family) with columns
        ``global`` (the global GLM's coefficient), ``mean`` and ``sd``
        (``ddof=1``; 0 for one row) of the local coefficients, their quantiles
        ``q05``, ``q25``, ``q50``, ``q75``, ``q95``, and
        ``opposite_sign_share``, the share of rows whose local coefficient has
        the sign opposite to the global one (0 where the global one is 0).

    Examples
    --------
    >>> import numpy as np
    >>> from autoglm_graph import GraphGLMRegressor
    >>> X = np.random.default_rng(0).normal(size=(100, 2)); y = X[:, 0]
    >>> model = GraphGLMRegressor(local_penalty=np.inf).fit(X, y)
    >>> model.local_coef_summary(X)["sd"].tolist()  # the global GLM: no spread
    [0.0, 0.0, 0.0]
    """
    local = estimator.local_coef(X, offset)
    values = local.to_numpy(dtype=np.float64)
    global_coef = estimator.predictor().global_theta_user()
    if not getattr(estimator, "fit_intercept", True):
        global_coef = global_coef[:, 1:]
    global_coef = global_coef.ravel()
    sd = values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros(values.shape[1])
    sd[np.ptp(values, axis=0) == 0] = 0.0  # exactly 0, not rounding noise
    summary = {
        "global": global_coef,
        "mean": values.mean(axis=0),
        "sd": sd,
    }
    levels = quantiles
    quantiles = np.quantile(values, levels, axis=0)
    for q, row in zip(levels, quantiles, strict=True):
        summary[f"q{round(q * 100):02d}"] = row
    summary["opposite_sign_share"] = np.mean(values * global_coef < 0, axis=0)
    index = local.columns.copy()
    if not isinstance(index, pd.MultiIndex):
        index.name = "term"
    return pd.DataFrame(summary, index=index)
