"""Ranking metrics of insurance pricing: the ordered Lorenz curve and Gini.

The deviance metrics live with the families (:meth:`Family.deviance`, and
``score`` on the estimators); this module adds what an actuary reads next to
them: how well a model *ranks* risks.

The ordered Lorenz curve sorts the rows by predicted frequency, from the
lowest to the highest, and plots the cumulative share of exposure against the
cumulative share of claims. A model that ranks no better than chance follows
the diagonal; the better the ranking, the further the curve sags below it. The
Gini index is twice the area between the diagonal and the curve, and the
normalised Gini divides it by the Gini of the observed frequencies used as
the prediction (the best ranking possible on these rows), so that a perfect
ranking scores 1.

Rows with equal predictions (ties) are taken as one block: the curve crosses
the block on a straight line, the expected curve when tied rows come in a
random order. The result is then unique, and a constant prediction scores 0.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["gini", "lorenz_curve"]


def _check(y_true, y_pred, sample_weight) -> tuple[np.ndarray, ...]:
    y_true = np.asarray(y_true, dtype=np.float64).reshape(-1)
    y_pred = np.asarray(y_pred, dtype=np.float64).reshape(-1)
    if y_true.shape != y_pred.shape:
        raise ValueError(
            "y_true and y_pred must have the same length; got "
            f"{y_true.shape[0]} and {y_pred.shape[0]}."
        )
    if y_true.size == 0:
        raise ValueError("The Gini index needs at least one row; got 0.")
    if sample_weight is None:
        weight = np.ones_like(y_true)
    else:
        weight = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
        if weight.shape != y_true.shape:
            raise ValueError(
                "sample_weight must have one value per row; got "
                f"{weight.shape[0]} for {y_true.shape[0]} rows."
            )
    for name, values in (("y_true", y_true), ("y_pred", y_pred), ("w", weight)):
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} contains NaN or infinity.")
    if np.any(weight < 0) or not weight.sum() > 0:
        raise ValueError("sample_weight must be non-negative with a positive sum.")
    if np.any(y_true < 0) or not (weight * y_true).sum() > 0:
        raise ValueError(
            "y_true must be non-negative with a positive weighted total (claims); "
            f"got min(y_true)={y_true.min()}, sum(w * y_true)="
            f"{(weight * y_true).sum()}."
        )
    return y_true, y_pred, weight


def lorenz_curve(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ordered Lorenz curve: exposure share against claims share.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Observed frequency (e.g. claims / exposure), non-negative.
    y_pred : array-like of shape (n_samples,)
        Predicted frequency; only its order matters.
    sample_weight : array-like of shape (n_samples,), optional
        Exposure; equal weights if omitted. A row of weight 2 is the same as
        the row repeated twice.

    Returns
    -------
    exposure_share : ndarray of shape (n_blocks + 1,)
        Cumulative share of ``sample_weight``, from 0 to 1, rows sorted by
        increasing ``y_pred``; one point per block of tied predictions.
    claims_share : ndarray of shape (n_blocks + 1,)
        Cumulative share of ``sample_weight * y_true`` at the same points.

    Examples
    --------
    >>> from autoglm_graph.metrics import lorenz_curve
    >>> x, c = lorenz_curve([0, 1, 3], [0.1, 0.5, 0.9])
    >>> x.round(3).tolist(), c.tolist()
    ([0.0, 0.333, 0.667, 1.0], [0.0, 0.0, 0.25, 1.0])
    """
    y_true, y_pred, weight = _check(y_true, y_pred, sample_weight)
    # One block per distinct prediction, in increasing order.
    blocks, inverse = np.unique(y_pred, return_inverse=True)
    exposure = np.bincount(inverse, weights=weight, minlength=blocks.size)
    claims = np.bincount(inverse, weights=weight * y_true, minlength=blocks.size)
    exposure_share = np.concatenate([[0.0], np.cumsum(exposure) / exposure.sum()])
    claims_share = np.concatenate([[0.0], np.cumsum(claims) / claims.sum()])
    return exposure_share, claims_share


def gini(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    sample_weight: ArrayLike | None = None,
    *,
    normalize: bool = True,
) -> float:
    """Gini index of the exposure-weighted ordered Lorenz curve.

    ``Gini = 1 - 2 * area under the Lorenz curve`` (the curve from
    :func:`lorenz_curve`, integrated by the trapezoidal rule, exact for its
    straight segments). With ``normalize=True`` it is divided by the Gini of
    ``y_true`` used as its own prediction.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Observed frequency (claims / exposure), non-negative with a positive
        weighted total.
    y_pred : array-like of shape (n_samples,)
        Predicted frequency. Only the order matters: any strictly increasing
        transform of ``y_pred`` (the linear predictor, a premium) gives the same
        value.
    sample_weight : array-like of shape (n_samples,), optional
        Exposure; equal weights if omitted.
    normalize : bool, default=True
        Divide by the Gini of the perfect ranking (``y_pred = y_true``), so that
        the perfect ranking scores 1, a random one about 0, a reversed one
        below 0.

    Returns
    -------
    float
        Ties in ``y_pred`` are one block (see :func:`lorenz_curve`): a constant
        prediction scores exactly 0.

    Examples
    --------
    >>> from autoglm_graph.metrics import gini
    >>> round(gini([0, 1, 3], [0.1, 0.5, 0.9], normalize=False), 4)
    0.5
    >>> gini([0, 1, 3], [0.1, 0.5, 0.9])
    1.0
    """
    y_true, y_pred, weight = _check(y_true, y_pred, sample_weight)
    value = _gini(y_true, y_pred, weight)
    if not normalize:
        return value
    best = _gini(y_true, y_true, weight)
    if best == 0:
        raise ValueError(
            "The normalised Gini is undefined when y_true is constant (the "
            "perfect ranking has Gini 0); use normalize=False."
        )
    return value / best


def _gini(y_true: np.ndarray, y_pred: np.ndarray, weight: np.ndarray) -> float:
    x, c = lorenz_curve(y_true, y_pred, weight)
    area = float(np.sum(np.diff(x) * (c[1:] + c[:-1]) / 2.0))
    return 1.0 - 2.0 * area
