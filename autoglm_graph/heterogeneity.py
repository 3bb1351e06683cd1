"""Which effects vary: a per-term test of the local coefficients.

A fitted graph GLM gives every row its own coefficients ``theta_i = theta +
delta_i``. Whether a term's coefficient really varies across rows, rather
than being the global one plus noise the network picked up, is a question
about held-out data: does the model predict new rows better with that term's
deviations than without them?

:func:`heterogeneity_test` answers it term by term. The network's deviation
of row ``i``, ``eta_i - eta_glm_i = delta_i0 + sum_j delta_ij * x_ij``, is split
into one part per term, with the slopes centred on ``m_i``, the mean design
row of the rows whose fitted coefficients are closest to row ``i``'s::

    part_ij = delta_ij * (x_ij - m_ij)                   (slope of column j)
    part_i0 = delta_i0 + sum_j delta_ij * m_ij           (intercept)

Uncentred, a slope deviation times an ``x_ij`` far from 0 is mostly a shift of
the level of a whole region of rows, which is the intercept's variation (the
test then flagged constant slopes); centred, a slope's part is what changes
within a set of rows that share coefficients. For term ``j`` the model without
its part (that coefficient back to the global one, everything else unchanged)
is compared row by row with the model::

    g_ij = d(y_i, eta_i - part_ij) - d(y_i, eta_i)

The mean gain, weighted by ``sample_weight``, is the evidence: positive when
the term's variation predicts the held-out rows better. The rows are
independent given the fitted model, so the paired differences ``g_ij`` give a
standard error, a confidence interval and a one-sided p-value (z-test of a
mean gain <= 0) by the central limit theorem.

Limits. The gain is about the fitted model: a term whose variation the network
did not learn is not found (power grows with the rows and the effect), and a
network that carries real signal (say a varying intercept) through a constant
term's deviation makes that term look varying. ``benchmarks/heterogeneity.py``
measures power and size on data with known varying and constant terms.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy import stats
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from ._validation import check_offset
from .explain import _encode_target

__all__ = ["heterogeneity_test"]

#: The centre of a row: the mean of its nearest rows in coefficient space,
#: this share of the rows (at least MIN_CENTRE).
CENTRE_SHARE = 0.05
MIN_CENTRE = 20


def heterogeneity_test(
    estimator,
    X,
    y,
    sample_weight=None,
    offset=None,
    *,
    alpha: float = 0.05,
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
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the deviance (e.g. exposure is in the offset, the number of
        claims for a severity model here).
    offset : array-like of shape (n_samples,), default=None
        As in ``predict``.
    alpha : float, default=0.05
        Level: ``varies`` is ``p_value < alpha``, and the interval has level
        ``1 - alpha`` (two-sided). No correction for the number of terms is
        made; multiply the p-values by the number of terms for Bonferroni.

    Returns
    -------
    DataFrame
        One line per term (``"intercept"`` and ``feature_names_out_``; for the
        multinomial family a term's deviations in all classes are removed
        together), with columns ``global`` (the global coefficient in the
        user's units; the first class's for multinomial), ``local_sd`` (the
        standard deviation of the per-row coefficients over ``X``),
        ``deviance_gain`` (mean gain per unit of weight, in the family's mean
        deviance), ``relative_gain`` (the gain over the model's mean deviance),
        ``std_err``, ``ci_lower``, ``ci_upper``, ``z``, ``p_value`` (one-sided)
        and ``varies``. A global-only model has gains 0 and p-values 1.

    Examples
    --------
    >>> import numpy as np
    >>> from autoglm_graph import GraphGLMRegressor
    >>> from autoglm_graph.heterogeneity import heterogeneity_test
    >>> X = np.random.default_rng(0).normal(size=(100, 2)); y = X[:, 0]
    >>> model = GraphGLMRegressor(local_penalty=np.inf).fit(X, y)
    >>> heterogeneity_test(model, X, y)["p_value"].tolist()  # the global GLM
    [1.0, 1.0, 1.0]
    """
    if not 0 < alpha < 1:
        raise ValueError(f"The 'alpha' parameter must be in (0, 1); got {alpha!r}.")
    check_is_fitted(estimator, "global_glm_")
    design = estimator._design(X)
    n = design.shape[0]
    y_model = _encode_target(estimator, y)
    check_consistent_length(design, y_model)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
    check_consistent_length(design, w)
    if not w.sum() > 0:
        raise ValueError("sample_weight must have a positive sum.")
    offset = check_offset(offset, n)
    eta, theta = estimator._coefficients(design, offset)  # [n, K], [n, K, p+1]
    family = estimator.family_
    deviance = _unit_deviance(family, y_model, eta)
    terms = ["intercept", *estimator.feature_names_out_]
    parts = _local_parts(estimator, design, theta, w)  # [n, K, p+1]
    gains = np.empty((len(terms), n))
    for j in range(len(terms)):
        gains[j] = _unit_deviance(family, y_model, eta - parts[:, :, j]) - deviance
    local = estimator._to_user_units(theta)[:, 0, :]
    global_user = estimator._global_theta_user()[0]
    table = _summarise(gains, w, alpha)
    table.insert(0, "global", global_user)
    table.insert(1, "local_sd", local.std(axis=0) if n > 1 else 0.0)
    table.insert(
        3, "relative_gain", table["deviance_gain"] / np.average(deviance, weights=w)
    )
    table.index = pd.Index(terms, name="term")
    return table


def _local_parts(estimator, design, theta, weight) -> np.ndarray:
    """The network's deviation ``eta_i - eta_glm_i``, split by term, centred.

    Term ``j``'s part is ``delta_ij * (x_ij - m_ij)``, the intercept's
    ``delta_i0 + sum_j delta_ij * m_ij``; ``m_i`` is the mean design row of the
    rows whose fitted coefficients are closest to row ``i``'s (its
    ``n_centre`` nearest in coefficient space, among the rows passed). A slope
    deviation ``delta_ij`` times ``x_ij`` far from 0 also shifts the level of
    the rows, which is the intercept's variation, not the slope's: centred,
    the slope's part is what changes within a set of rows that share
    coefficients.
    """
    glm = estimator.global_glm_
    delta = theta - np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
    n = design.shape[0]
    flat = delta.reshape(n, -1)
    spread = flat.std(axis=0)
    if not np.any(spread > 0):
        return np.zeros_like(delta)
    flat = flat[:, spread > 0] / spread[spread > 0]
    k = min(n, max(MIN_CENTRE, int(CENTRE_SHARE * n)))
    neighbours = NearestNeighbors(n_neighbors=k).fit(flat).kneighbors(flat)[1]
    centre = design[neighbours].mean(axis=1)  # [n, p]
    # Variation around the model's mean coefficients (weighted over the rows),
    # not around the global GLM's: those are biased when other effects vary,
    # and a constant correction of them is no variation.
    share = (weight / weight.sum())[:, None, None]
    mean = np.sum(share * delta, axis=0)  # [K, p+1]
    parts = np.empty_like(delta)
    parts[:, :, 1:] = (delta[:, :, 1:] - mean[:, 1:]) * (design - centre)[:, None, :]
    level = delta[:, :, 0] + np.sum(
        (delta[:, :, 1:] - mean[:, 1:]) * centre[:, None, :], 2
    )
    parts[:, :, 0] = level - np.sum(share[:, :, 0] * level, axis=0)
    return parts


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
