"""Inference tables: the global GLM's coefficient table, the spread of local ones.

:func:`coef_table` is the table of a statsmodels GLM summary for the global
GLM: standard errors from the Fisher information (or a sandwich), z values,
p-values and confidence intervals. :func:`local_coef_summary` says, term by
term, how much the per-row coefficients of the graph GLM move away from the
global one.

The coefficient table needs the training data: the estimator does not keep
its design matrix (it could be large), and a covariance stored at fit time
would serve only the Fisher covariance, as the sandwich needs the per-row
scores anyway. Given the data again, both are computed here, at the fitted
coefficients, in float64.
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

from ..utils import align_to_rows, check_offset

if TYPE_CHECKING:
    from ._terms import GLMTerms
    from .families import Family

__all__ = ["coef_table", "local_coef_summary", "wald_test_terms"]

COV_TYPES = ("fisher", "sandwich")
WEIGHT_TYPES = ("variance", "frequency")


def coef_table(
    estimator,
    X,
    y,
    sample_weight=None,
    offset=None,
    *,
    cov_type: str = "fisher",
    alpha: float = 0.05,
    weights: str = "variance",
) -> pd.DataFrame:
    """Coefficient table of the global GLM, as statsmodels' GLM summary.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    X : array-like or DataFrame of shape (n_samples, n_features)
        The training data (the standard errors are those of the fit on it).
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None
        The weights of the fit; ``weights`` says what they mean.
    offset : array-like of shape (n_samples,), default=None
        The offset of the fit.
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
    >>> model.coef_table(X, y).columns.tolist()
    ['coef', 'std_err', 'z', 'p_value', 'ci_lower', 'ci_upper']
    """
    _check_table_params(cov_type, alpha, weights)
    check_is_fitted(estimator, "global_glm_")
    fit = _SolvedGLM.from_data(estimator, X, y, sample_weight, offset)
    frequency = weights == "frequency"
    params, cov, dispersion = _solver_covariance(estimator, fit, cov_type, frequency)
    coef, cov = _to_user_units(fit, params, cov)
    return _table(estimator, coef, cov, alpha, dispersion, cov_type)


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
class _SolvedGLM:
    """The global GLM on the data of the fit, in the solver's columns."""

    family: Family
    terms: GLMTerms
    X1: np.ndarray  # the solver's design, intercept column first (if any)
    y: np.ndarray  # encoded: [n], or one-hot [n, K]
    w: np.ndarray
    eta: np.ndarray  # [n, K], offset included
    params: np.ndarray  # [K, m]: the coefficients as solved (see from_data)
    n_intercept: int  # 1, or 0 for a model without intercept
    correction: float  # the balance shift taken off the intercept

    @classmethod
    def from_data(cls, estimator, X, y, sample_weight, offset) -> _SolvedGLM:
        predictor = estimator.predictor()
        terms = predictor.glm_terms
        design = terms.select(predictor.design(X))  # float64
        n = design.shape[0]
        y_model = encode_target(estimator, y)
        check_consistent_length(design, y_model)
        sample_weight = align_to_rows(sample_weight, X, "sample_weight")
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
        check_consistent_length(design, w)
        offset = check_offset(align_to_rows(offset, X, "offset"), n)
        glm = estimator.global_glm_
        ones = [np.ones(n)] if terms.fit_intercept else []
        X1 = np.column_stack([*ones, design])  # intercept first
        params = np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
        params = params[:, 1 - len(ones) :]  # [K, p+1]
        # The standard errors are those of the GLM as solved: the balance shift
        # (``balance=True``) moves the intercept off its optimum, and is added
        # back to the reported intercept (:func:`_to_user_units`).
        correction = getattr(estimator, "balance_correction_", 0.0) if ones else 0.0
        params[:, 0] -= correction
        eta = X1 @ params.T + (0.0 if offset is None else offset[:, None])
        family = estimator.family_
        return cls(family, terms, X1, y_model, w, eta, params, len(ones), correction)


def _solver_covariance(estimator, fit: _SolvedGLM, cov_type: str, frequency: bool):
    """The reported parameters, their covariance and the dispersion, in the
    solver's columns: ``(params [K, m], cov [K * m, K * m], dispersion)``."""
    family, X1, w = fit.family, fit.X1, fit.w
    if family.multi_output:
        score_eta, info_eta = _multinomial_parts(fit.y, fit.eta)
        # Reference-class parametrisation: class k > 0 gets beta_k - beta_0.
        score_eta, info_eta = score_eta[:, 1:], info_eta[:, 1:, 1:]
        params = fit.params[1:] - fit.params[0]
    else:
        observed = cov_type == "sandwich"
        score_eta, info_eta = _single_parts(family, fit.y, fit.eta[:, 0], observed)
        params = fit.params
    K, m = params.shape
    hessian = _information(X1, w, info_eta)
    penalty = _penalty_matrix(
        estimator, fit.terms, fit.n_intercept, family.multi_output, K
    )
    penalty *= w.sum()
    hessian += penalty
    scores = (w[:, None] * score_eta)[:, :, None] * X1[:, None, :]  # [n, K, p+1]
    scores = scores.reshape(X1.shape[0], K * m)
    _check_stationary(scores.sum(axis=0) - penalty @ params.ravel(), w.sum())
    bread = linalg.pinvh(hessian)
    dispersion = _dispersion(fit, frequency) if family.estimated_dispersion else 1.0
    if cov_type == "fisher":
        return params, dispersion * bread, dispersion
    # Frequency weights: w_i copies of the score s_i / w_i each.
    per_copy = np.divide(
        scores, w[:, None], out=np.zeros_like(scores), where=w[:, None] > 0
    )
    meat = scores.T @ (per_copy if frequency else scores)
    return params, bread @ meat @ bread, dispersion


def _dispersion(fit: _SolvedGLM, frequency: bool) -> float:
    """Pearson chi2 over the residual degrees of freedom."""
    family, w = fit.family, fit.w
    mu = family.inverse_link(torch.as_tensor(fit.eta[:, 0])).numpy()
    variance = family.unit_variance(torch.as_tensor(mu)).numpy()
    pearson = np.sum(w * (fit.y - mu) ** 2 / variance)
    n_obs = w.sum() if frequency else fit.X1.shape[0]
    return pearson / (n_obs - np.linalg.matrix_rank(fit.X1))


def _to_user_units(fit: _SolvedGLM, params: np.ndarray, cov: np.ndarray):
    """The coefficients and their covariance in the user's units:
    intercept - sum_j c_j shift_j / scale_j, and c_j / scale_j."""
    shift, scale = fit.terms.shift, fit.terms.scale
    block = np.diag(np.r_[[1.0] * fit.n_intercept, 1.0 / scale])
    if fit.n_intercept:
        block[0, 1:] = -shift / scale
    jacobian = linalg.block_diag(*([block] * params.shape[0]))
    if not fit.family.multi_output:  # (the classes' differences do not move)
        params = params.copy()
        params[:, 0] += fit.correction
    coef = jacobian @ params.ravel()
    return coef, jacobian @ cov @ jacobian.T


def _information(X1: np.ndarray, w: np.ndarray, info_eta: np.ndarray) -> np.ndarray:
    """The Hessian of ``sum_i w_i d_i / 2`` in (output, output) blocks.

    ``info_eta`` [n, K, K] is the per-row information on the linear
    predictors; the result is ``[K * m, K * m]`` with ``m`` design columns.
    """
    K, m = info_eta.shape[1], X1.shape[1]
    hessian = np.empty((K, m, K, m))
    for k in range(K):
        for j in range(K):
            hessian[k, :, j, :] = X1.T @ (X1 * (w * info_eta[:, k, j])[:, None])
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
    y_t = torch.as_tensor(y, dtype=torch.float64)
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
            "The global GLM's coefficients are not stationary on this data: "
            "coef_table expects the data (X, y, sample_weight, offset) of the fit.",
            UserWarning,
            stacklevel=4,  # the caller of coef_table
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


def wald_test_terms(estimator, X, y, sample_weight=None, offset=None, **kwargs):
    """One joint Wald test per term of the global GLM, as statsmodels'
    ``wald_test_terms``: a categorical column's levels together, every other
    term alone.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    X, y, sample_weight, offset
        The data of the fit, as for :func:`coef_table`.
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
    """
    table = coef_table(estimator, X, y, sample_weight, offset, **kwargs)
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
