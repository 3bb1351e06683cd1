"""Exponential families and their links, for torch tensors and numpy arrays.

Each family is a small object that knows its valid range of ``y``, its link and
inverse link, its unit variance, its unit deviance and a starting value for the
linear predictor. Deviances are computed from ``eta`` (the linear predictor on
the link scale) so that they stay finite and differentiable for any finite
``eta``. Conventions follow scikit-learn: ``mean_tweedie_deviance`` and friends
equal :meth:`Family.deviance`.

This module is where every family class, the registry :data:`FAMILIES` and
:func:`get_family` are imported from. The base class :class:`Family` and the
array functions each formula is written on (torch's for tensors, numpy's for
arrays) are in ``_family``; the Tweedie series density in ``_tweedie_series``.
"""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import brentq
from scipy.special import digamma, gammaln
from scipy.special import xlogy as xlogy_np

from ._family import _MEAN_FLOOR, Family, _flat, _namespace, _softplus, _y_exp
from ._tweedie_series import _log_wright_series

if TYPE_CHECKING:
    from ._family import Array

__all__ = [
    "FAMILIES",
    "BinomialFamily",
    "Family",
    "GammaFamily",
    "GaussianFamily",
    "MultinomialFamily",
    "NegativeBinomialFamily",
    "PoissonFamily",
    "TweedieFamily",
    "get_family",
]

#: Bounds of the maximum likelihood negative binomial theta.
THETA_MIN, THETA_MAX = 1e-8, 1e8


class GaussianFamily(Family):
    """Normal distribution with identity link; deviance ``(y - mu)**2``."""

    name = "gaussian"
    estimated_dispersion = True
    canonical_link = True

    def unit_deviance(self, y: Array, eta: Array) -> Array:
        return (_flat(y) - _flat(eta)) ** 2

    def unit_variance(self, mu: Array) -> Array:
        return _namespace(mu).ones_like(mu)

    def loglike_obs(self, y, mu, var_weights=None, scale=1.0) -> np.ndarray:
        y, mu, v = _loglike_args(y, mu, var_weights)
        return -0.5 * (v * (y - mu) ** 2 / scale + np.log(2 * np.pi * scale / v))


class BinomialFamily(Family):
    """Bernoulli / binomial proportions with logit link; ``0 <= y <= 1``.

    The deviance is ``-2 * (y log p + (1 - y) log(1 - p))`` plus the saturated
    term ``2 * (y log y + (1 - y) log(1 - y))``, which is 0 for ``y`` in {0, 1}
    (then it is twice the log loss) and makes the deviance 0 at ``p = y`` for
    fractional ``y``.
    """

    name = "binomial"
    link_name = "logit"
    canonical_link = True
    y_range_text = "0 <= y <= 1"
    _y_low, _y_high = 0.0, 1.0
    is_classification = True

    def predict_proba(self, eta: Array) -> Array:
        xp = _namespace(eta)
        p = xp.sigmoid(eta[:, 0])
        return xp.stack_columns([1.0 - p, p])

    def predict_log_proba(self, eta: Array) -> Array:
        xp = _namespace(eta)
        log_p = xp.logsigmoid(eta[:, 0])
        log_q = xp.logsigmoid(-eta[:, 0])
        return xp.stack_columns([log_q, log_p])

    def unit_deviance(self, y: Array, eta: Array) -> Array:
        y, eta, xp = _flat(y), _flat(eta), _namespace(eta)
        saturated = xp.xlogy(y, y) + xp.xlogy(1 - y, 1 - y)
        return 2 * (_softplus(eta) - y * eta + saturated)

    def unit_variance(self, mu: Array) -> Array:
        return mu * (1 - mu)

    def loglike_obs(self, y, mu, var_weights=None, scale=1.0) -> np.ndarray:
        # statsmodels' Binomial with one trial; the gammaln terms are 0 for
        # y in {0, 1}.
        y, mu, v = _loglike_args(y, mu, var_weights)
        log_choose = -gammaln(y + 1) - gammaln(2 - y)
        return v * (log_choose + xlogy_np(y, mu) + xlogy_np(1 - y, 1 - mu))


class MultinomialFamily(Family):
    """Categorical distribution with softmax link on ``K`` outputs.

    ``y`` is an ``[n, K]`` array of one-hot rows or class probabilities. The
    deviance is ``-2 * sum_k y_k log p_k`` plus the saturated term
    ``2 * sum_k y_k log y_k`` (0 for one-hot rows). :meth:`link` returns the
    centred log probabilities (mean 0 over classes).
    """

    name = "multinomial"
    link_name = "softmax"
    canonical_link = True
    is_classification = True
    multi_output = True
    y_range_text = (
        "y of shape (n_samples, n_classes) with values in [0, 1] and rows summing to 1"
    )
    _y_low, _y_high = 0.0, 1.0
    _row_sum_atol = 1e-5

    def check_y(self, y: np.ndarray) -> None:
        y = self._check_finite(y)
        if y.ndim != 2:
            raise ValueError(
                f"{self._label()} requires {self.y_range_text}; got y.shape={y.shape}."
            )
        if not np.all(self.in_y_range(y)):
            raise self._range_error(y)
        sums = y.sum(axis=1)
        bad = np.abs(sums - 1.0) > self._row_sum_atol
        if np.any(bad):
            raise ValueError(
                f"{self._label()} requires {self.y_range_text}; got a row "
                f"summing to {float(sums[bad][0])}."
            )

    def link(self, mu: Array) -> Array:
        xp = _namespace(mu)
        log_mu = xp.log(xp.clamp_min(mu, xp.tiny(mu)))
        return log_mu - xp.mean_last(log_mu)

    def inverse_link(self, eta: Array) -> Array:
        return _namespace(eta).softmax(eta)

    def unit_deviance(self, y: Array, eta: Array) -> Array:
        xp = _namespace(eta)
        log_p = xp.log_softmax(eta)
        return 2 * (xp.xlogy(y, y) - y * log_p).sum(-1)

    def unit_variance(self, mu: Array) -> Array:
        return mu * (1 - mu)

    def loglike_obs(self, y, mu, var_weights=None, scale=1.0) -> np.ndarray:
        """``var_weights * sum_k y_k log mu_k`` (statsmodels' ``MNLogit``)."""
        y = np.asarray(y, dtype=np.float64)
        mu = np.asarray(mu, dtype=np.float64)
        v = np.ones(y.shape[0]) if var_weights is None else np.asarray(var_weights)
        return v * xlogy_np(y, mu).sum(axis=1)

    def predict_proba(self, eta: Array) -> Array:
        return _namespace(eta).softmax(eta)  # eta is [n, K]: over the classes

    def predict_log_proba(self, eta: Array) -> Array:
        return _namespace(eta).log_softmax(eta)

    def residual(self, y: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """``y - mu`` per class (the classes' variances are not a diagonal)."""
        return y - mu

    def start_eta(self, y, sample_weight=None, offset=None) -> np.ndarray:
        eta = super().start_eta(y, sample_weight, offset)
        return eta - eta.mean()  # only differences between classes count

    def n_outputs(self, n_classes: int | None = None) -> int:
        if n_classes is None or n_classes < 2:
            raise ValueError(
                "The multinomial family requires n_classes >= 2; "
                f"got n_classes={n_classes!r}."
            )
        return int(n_classes)

    def initial_eta(
        self, y: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> np.ndarray:
        """Centred log of the weighted class proportions, shape (K,).

        Empty classes get a proportion of 1e-12 rather than 0, so the result is
        finite.
        """
        y = np.asarray(y, dtype=np.float64)
        w = None if sample_weight is None else np.asarray(sample_weight).reshape(-1)
        p = np.maximum(np.average(y, axis=0, weights=w), _MEAN_FLOOR)
        return self.link(p)


class PoissonFamily(Family):
    """Poisson distribution with log link; ``y >= 0``."""

    name = "poisson"
    link_name = "log"
    canonical_link = True
    y_range_text = "y >= 0"
    _y_low = 0.0

    def unit_deviance(self, y: Array, eta: Array) -> Array:
        y, eta, xp = _flat(y), _flat(eta), _namespace(eta)
        return 2 * (xp.xlogy(y, y) - y * eta - y + xp.exp(eta))

    def unit_variance(self, mu: Array) -> Array:
        return mu

    def loglike_obs(self, y, mu, var_weights=None, scale=1.0) -> np.ndarray:
        return _poisson_loglike_obs(*_loglike_args(y, mu, var_weights), scale)


class GammaFamily(Family):
    """Gamma distribution with log link; ``y > 0``."""

    name = "gamma"
    link_name = "log"
    estimated_dispersion = True
    y_range_text = "y > 0"
    _y_low, _y_low_inclusive = 0.0, False

    def unit_deviance(self, y: Array, eta: Array) -> Array:
        y, eta, xp = _flat(y), _flat(eta), _namespace(eta)
        return 2 * (eta - xp.log(y) + _y_exp(y, -eta) - 1)

    def unit_variance(self, mu: Array) -> Array:
        return mu**2

    def loglike_obs(self, y, mu, var_weights=None, scale=1.0) -> np.ndarray:
        return _gamma_loglike_obs(*_loglike_args(y, mu, var_weights), scale)


class TweedieFamily(Family):
    """Tweedie distribution with unit variance ``mu**power``.

    ``power=0`` is the normal distribution (identity link, as scikit-learn's
    ``TweedieRegressor(link="auto")``); ``power >= 1`` uses the log link,
    ``power=1`` is Poisson, ``1 < power < 2`` compound Poisson-gamma,
    ``power=2`` gamma and ``power > 2`` positive stable distributions.

    Parameters
    ----------
    power : float, default=1.5
        0 or a finite number >= 1.

    Examples
    --------
    >>> TweedieFamily(power=1.5)
    TweedieFamily(power=1.5)
    """

    name = "tweedie"
    estimated_dispersion = True

    def __init__(self, power: float = 1.5) -> None:
        if not (power == 0 or (power >= 1 and math.isfinite(power))):
            raise ValueError(f"The tweedie power must be 0 or >= 1; got power={power}.")
        self.power = float(power)
        p = self.power
        self.link_name = "identity" if p == 0 else "log"
        self.canonical_link = p in (0.0, 1.0)  # gaussian, poisson
        if p == 0:
            self.y_range_text = "y is any real number"
        elif p < 2:
            self.y_range_text, self._y_low = "y >= 0", 0.0
        else:
            self.y_range_text, self._y_low = "y > 0", 0.0
            self._y_low_inclusive = False

    def _params(self) -> dict[str, float]:
        return {"power": self.power}

    def _label(self) -> str:
        return f"The tweedie family with power={self.power}"

    def unit_deviance(self, y: Array, eta: Array) -> Array:
        y, eta, p, xp = _flat(y), _flat(eta), self.power, _namespace(eta)
        if p == 0:
            return (y - eta) ** 2
        if p == 1:
            return 2 * (xp.xlogy(y, y) - y * eta - y + xp.exp(eta))
        if p == 2:
            return 2 * (eta - xp.log(y) + _y_exp(y, -eta) - 1)
        return 2 * (
            y ** (2 - p) / ((1 - p) * (2 - p))
            - _y_exp(y, (1 - p) * eta) / (1 - p)
            + xp.exp((2 - p) * eta) / (2 - p)
        )

    def unit_variance(self, mu: Array) -> Array:
        return mu**self.power

    def loglike_obs(self, y, mu, var_weights=None, scale=1.0) -> np.ndarray:
        """The Tweedie log-density; NaN for ``power > 2``.

        ``power`` 0, 1 and 2 are the normal, (over-dispersed) Poisson and
        gamma log-likelihoods as statsmodels writes them. For ``1 < power < 2``
        the compound Poisson-gamma density of Dunn and Smyth (2005),
        ``c(y, phi) exp((y theta - kappa) / phi)``, its series summed in log
        space around its largest term (:func:`_log_wright_series`); a row
        whose series does not fit the window is NaN rather than wrong.
        ``power > 2`` (positive stable) has no series here: NaN, as
        statsmodels.
        """
        y, mu, v = _loglike_args(y, mu, var_weights)
        p = self.power
        if p == 0:
            return GaussianFamily().loglike_obs(y, mu, v, scale)
        if p == 1:
            return _poisson_loglike_obs(y, mu, v, scale)
        if p == 2:
            return _gamma_loglike_obs(y, mu, v, scale)
        if p > 2:
            return np.full(y.shape[0], np.nan)
        phi = scale / v
        theta = mu ** (1 - p) / (1 - p)
        kappa = mu ** (2 - p) / (2 - p)
        ll = (y * theta - kappa) / phi
        positive = y > 0
        yp, phip = y[positive], phi[positive]
        a = (2 - p) / (p - 1)  # Wright's function's parameter, -alpha
        log_x = a * np.log(yp / ((p - 1) * phip)) - np.log((2 - p) * phip)
        ll[positive] += _log_wright_series(a, log_x) - np.log(yp)
        return ll


class NegativeBinomialFamily(Family):
    """Negative binomial distribution with log link; ``y >= 0``.

    The variance is ``mu + theta * mu**2`` (as glum's
    ``NegativeBinomialDistribution``); the unit deviance is
    ``2 * (y log(y / mu) - (y + 1/theta) log((1 + theta y) / (1 + theta mu)))``.

    Parameters
    ----------
    theta : float, default=1.0
        Positive, finite overdispersion parameter.
    """

    name = "negative_binomial"
    link_name = "log"
    y_range_text = "y >= 0"
    _y_low = 0.0

    def __init__(self, theta: float = 1.0) -> None:
        if not (theta > 0 and math.isfinite(theta)):
            raise ValueError(
                "The negative_binomial theta must be a finite number > 0; "
                f"got theta={theta}."
            )
        self.theta = float(theta)

    def _params(self) -> dict[str, float]:
        return {"theta": self.theta}

    def unit_deviance(self, y: Array, eta: Array) -> Array:
        y, eta, theta, xp = _flat(y), _flat(eta), self.theta, _namespace(eta)
        # log(1 + theta * mu) = softplus(eta + log(theta)), stable for large eta.
        log1p_theta_mu = _softplus(eta + math.log(theta))
        log_ratio = xp.log1p(theta * y) - log1p_theta_mu
        return 2 * (xp.xlogy(y, y) - y * eta - (y + 1 / theta) * log_ratio)

    def unit_variance(self, mu: Array) -> Array:
        return mu + self.theta * mu**2

    def loglike_obs(self, y, mu, var_weights=None, scale=1.0) -> np.ndarray:
        """:meth:`log_likelihood`'s rows at this family's ``theta``, times
        ``var_weights / scale`` (statsmodels' ``NegativeBinomial``)."""
        y, mu, v = _loglike_args(y, mu, var_weights)
        return v / scale * self._log_probability(y, mu, self.theta)

    @staticmethod
    def log_likelihood(
        y: np.ndarray, mu: np.ndarray, theta: float, sample_weight=None
    ) -> float:
        """Weighted log-likelihood ``sum_i w_i log P(y_i; mu_i, theta)``."""
        y, mu = np.asarray(y, dtype=np.float64), np.asarray(mu, dtype=np.float64)
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight)
        return float(w @ NegativeBinomialFamily._log_probability(y, mu, theta))

    @staticmethod
    def _log_probability(y: np.ndarray, mu: np.ndarray, theta: float) -> np.ndarray:
        """``log P(y_i; mu_i, theta)`` per row (``1 / theta``: R's glm.nb
        theta, the size)."""
        r = 1.0 / theta
        return (
            gammaln(y + r)
            - gammaln(r)
            - gammaln(y + 1)
            + xlogy_np(y, theta * mu)
            - (y + r) * np.log1p(theta * mu)
        )

    @classmethod
    def estimate_theta(cls, y: np.ndarray, mu: np.ndarray, sample_weight=None) -> float:
        """Maximum likelihood ``theta`` given the means (MASS's ``theta.ml``).

        The root of the score in ``r = 1/theta`` (digamma terms, exact to
        rounding, so theta is found to ~1e-14 rather than the ~1e-8 of a
        minimiser), by Brent's method on ``log(r)`` within the first step of
        a grid over ``[1/THETA_MAX, 1/THETA_MIN]`` where the score turns
        negative; ``THETA_MIN`` when it never does: the data show no
        overdispersion (the likelihood then increases towards the Poisson
        limit ``theta -> 0``). Brent's method on the whole range converged to
        its Poisson end on overdispersed data with scipy 1.17: the score there
        is within rounding of zero and changes sign on its noise.
        """
        y, mu = np.asarray(y, dtype=np.float64), np.asarray(mu, dtype=np.float64)
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight)

        def score(log_r: float) -> float:
            r = math.exp(log_r)
            terms = digamma(y + r) - digamma(r) - np.log1p(mu / r) + (mu - y) / (r + mu)
            return float(w @ terms)

        grid = np.linspace(-math.log(THETA_MAX), -math.log(THETA_MIN), 38)
        if score(grid[0]) <= 0:  # decreasing in r from the start: theta at its maximum
            return THETA_MAX
        turn = next((i for i in range(1, grid.size) if score(grid[i]) < 0), None)
        if turn is None:  # still increasing: no overdispersion
            return THETA_MIN
        log_r = brentq(
            score, grid[turn - 1], grid[turn], xtol=1e-14, rtol=4 * np.finfo(float).eps
        )
        log_theta = -log_r
        return float(min(max(math.exp(log_theta), THETA_MIN), THETA_MAX))


def _loglike_args(y, mu, var_weights):
    """``y``, ``mu`` and the variance weights as flat float64 arrays."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    mu = np.asarray(mu, dtype=np.float64).reshape(-1)
    if var_weights is None:
        return y, mu, np.ones_like(y)
    return y, mu, np.asarray(var_weights, dtype=np.float64).reshape(-1)


def _poisson_loglike_obs(y, mu, v, scale):
    """statsmodels' Poisson rows, ``v / scale * (y log mu - mu - log y!)``."""
    return v / scale * (xlogy_np(y, mu) - mu - gammaln(y + 1))


def _gamma_loglike_obs(y, mu, v, scale):
    """statsmodels' gamma rows with shape ``v / scale`` and mean ``mu``."""
    shape = v / scale
    ratio = y / mu
    return shape * np.log(shape * ratio) - shape * ratio - gammaln(shape) - np.log(y)


FAMILIES: dict[str, type[Family]] = {
    cls.name: cls
    for cls in (
        GaussianFamily,
        BinomialFamily,
        MultinomialFamily,
        PoissonFamily,
        GammaFamily,
        TweedieFamily,
        NegativeBinomialFamily,
    )
}

_ALIASES = {
    "normal": "gaussian",
    "negativebinomial": "negative_binomial",
    "nb": "negative_binomial",
}


def get_family(family: str | Family, **params: float | None) -> Family:
    """Resolve a family name (or instance) into a :class:`Family` instance.

    Parameters
    ----------
    family : str or Family
        A name from :data:`FAMILIES` (case-insensitive; ``"normal"``, ``"nb"``
        and ``"negativebinomial"`` are aliases), or an instance, returned as-is.
    **params
        Constructor parameters such as ``power`` or ``theta``. Those the family
        does not accept, and those set to ``None``, are ignored.

    Returns
    -------
    Family

    Examples
    --------
    >>> get_family("Tweedie", power=1.2, theta=3.0)
    TweedieFamily(power=1.2)
    >>> get_family("poisson", power=1.2)
    PoissonFamily()
    """
    if isinstance(family, Family):
        return family
    if not isinstance(family, str):
        raise TypeError(
            "The 'family' parameter must be a string or a Family instance; "
            f"got {family!r} of type {type(family).__name__}."
        )
    key = family.strip().lower().replace("-", "_").replace(" ", "_")
    key = _ALIASES.get(key.replace("_", ""), key)
    if key not in FAMILIES:
        names = ", ".join(sorted(FAMILIES))
        raise ValueError(f"Unknown family {family!r}; expected one of: {names}.")
    cls = FAMILIES[key]
    accepted = inspect.signature(cls).parameters
    kwargs = {k: v for k, v in params.items() if k in accepted and v is not None}
    return cls(**kwargs)
