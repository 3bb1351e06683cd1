"""The Tweedie log-density's series (Dunn and Smyth, 2005), summed in log space.

:meth:`~autoglm_graph.glm.families.TweedieFamily.loglike_obs` for
``1 < power < 2`` is ``c(y, phi) exp((y theta - kappa) / phi)``, whose
normalising ``c`` is a Wright function's series; :func:`_log_wright_series`
sums it.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, polygamma

#: Log-terms below the largest by more than this add under 1e-26 to the sum.
_SERIES_DROP = 60.0
#: Rows whose largest series term is further out are NaN (see below).
_SERIES_MAX_INDEX = 1e6


def _log_wright_series(a: float, log_x: np.ndarray) -> np.ndarray:
    """``log sum_{k>=1} x^k / (k! Gamma(a k))`` (Wright's function at b=0).

    The Tweedie series of Dunn and Smyth (2005), each row's terms summed in
    log space over a window around its largest one: the log-terms
    ``t(k) = k log x - log k! - log Gamma(a k)`` are concave in ``k``, their
    maximum ``k*`` is found by Newton steps on ``t'(k) = 0``, and the window
    spans ``14`` curvature widths and 40 terms either side. A row whose window ends less
    than ``_SERIES_DROP`` below the top (a ``k*`` the Newton steps missed),
    or whose ``k*`` exceeds ``_SERIES_MAX_INDEX`` (a dispersion tiny against
    ``y``: millions of terms), is NaN. scipy's ``log_wright_bessel`` loses
    digits where ``x`` is large and underflows where ``a`` is (powers near
    1); this sum does neither.
    """
    log_x = np.asarray(log_x, dtype=np.float64)
    # Stirling: log k + a log(a k) = log x at the top; then Newton on log k.
    log_k = (log_x - a * np.log(a)) / (1 + a)
    for _ in range(4):
        k = np.exp(np.clip(log_k, -30.0, 40.0))
        slope = log_x - digamma(k + 1) - a * digamma(a * k)
        curve = polygamma(1, k + 1) + a**2 * polygamma(1, a * k)
        log_k = np.log(k) + slope / (curve * k)
    top = np.maximum(np.round(np.exp(np.clip(log_k, -30.0, 40.0))), 1.0)
    width = 14.0 / np.sqrt(polygamma(1, top + 1) + a**2 * polygamma(1, a * top))
    # (near k = 1 the log-terms fall faster than the quadratic: 40 more terms)
    low = np.maximum(np.floor(top - width) - 40, 1.0)
    high = np.ceil(top + width) + 40
    result = np.full(log_x.shape, np.nan)
    ok = high < _SERIES_MAX_INDEX
    if not np.any(ok):
        return result
    low, high, rows = low[ok], high[ok], np.flatnonzero(ok)
    counts = (high - low + 1).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k = np.repeat(low, counts) + (np.arange(counts.sum()) - np.repeat(starts, counts))
    t = np.repeat(log_x[rows], counts) * k - gammaln(k + 1) - gammaln(a * k)
    peak = np.maximum.reduceat(t, starts)
    total = np.add.reduceat(np.exp(t - np.repeat(peak, counts)), starts)
    value = peak + np.log(total)
    first, last = t[starts], t[starts + counts - 1]
    closed = (last < peak - _SERIES_DROP) & ((low == 1) | (first < peak - _SERIES_DROP))
    result[rows] = np.where(closed, value, np.nan)
    return result
