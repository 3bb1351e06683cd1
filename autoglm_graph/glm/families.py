"""Exponential families and their links, for torch tensors and numpy arrays.

Each family is a small object that knows its valid range of ``y``, its link and
inverse link, its unit variance, its unit deviance and a starting value for the
linear predictor. Deviances are computed from ``eta`` (the linear predictor on
the link scale) so that they stay finite and differentiable for any finite
``eta``. Conventions follow scikit-learn: ``mean_tweedie_deviance`` and friends
equal :meth:`Family.deviance`.

Each formula is written once, on the array functions of its input's
namespace (:func:`_namespace`): torch's for tensors (training, and the GLM's
derivatives by autograd), numpy's and ``scipy.special``'s for numpy arrays
(prediction, which then needs no torch). The array methods keep the dtype and
device of their inputs and return the input's kind.
"""

from __future__ import annotations

import functools
import inspect
import math
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
from scipy import special
from scipy.optimize import brentq
from scipy.special import digamma, gammaln, polygamma
from scipy.special import xlogy as xlogy_np

if TYPE_CHECKING:
    from torch import Tensor

    #: What the formulas take and give: a torch tensor or a numpy array.
    Array = Tensor | np.ndarray

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

# Floor on the mean used by ``initial_eta`` so that link(mean) stays finite.
_MEAN_FLOOR = 1e-12
#: Bounds of the maximum likelihood negative binomial theta.
THETA_MIN, THETA_MAX = 1e-8, 1e8

#: Link name -> (link, inverse link), named as functions of :func:`_namespace`.
_LINKS = {
    "identity": ("identity", "identity"),
    "log": ("log", "exp"),
    "logit": ("logit", "sigmoid"),
}


def _quiet(function):
    """``function`` under ``np.errstate(all="ignore")``: silent on log(0) and
    overflow, as torch is (the formulas are written for those infinities)."""

    @functools.wraps(function)
    def quiet(*args):
        with np.errstate(all="ignore"):
            return function(*args)

    return quiet


def _identity(x):
    return x


#: The array functions of the formulas on numpy arrays (float64 in, float64
#: out): numpy's and scipy.special's equivalents of torch's.
_NUMPY = SimpleNamespace(
    identity=_identity,
    exp=_quiet(np.exp),
    log=_quiet(np.log),
    log1p=_quiet(np.log1p),
    logaddexp=_quiet(np.logaddexp),
    logit=_quiet(special.logit),
    sigmoid=special.expit,
    logsigmoid=_quiet(lambda x: -np.logaddexp(0.0, -x)),
    softmax=lambda x: special.softmax(x, axis=-1),
    log_softmax=lambda x: special.log_softmax(x, axis=-1),
    xlogy=_quiet(special.xlogy),
    zeros_like=np.zeros_like,
    ones_like=np.ones_like,
    stack_columns=lambda columns: np.stack(columns, axis=1),
    clamp_min=np.maximum,
    tiny=lambda x: np.finfo(x.dtype).tiny,
    mean_last=lambda x: x.mean(axis=-1, keepdims=True),
    like=lambda w, x: np.asarray(w, dtype=x.dtype),
)


@functools.cache
def _torch_namespace() -> SimpleNamespace:
    """:data:`_NUMPY`'s functions, torch's (imported at the first tensor)."""
    import torch

    return SimpleNamespace(
        identity=_identity,
        exp=torch.exp,
        log=torch.log,
        log1p=torch.log1p,
        logaddexp=torch.logaddexp,
        logit=torch.logit,
        sigmoid=torch.sigmoid,
        logsigmoid=torch.nn.functional.logsigmoid,
        softmax=lambda x: torch.softmax(x, dim=-1),
        log_softmax=lambda x: torch.log_softmax(x, dim=-1),
        xlogy=torch.special.xlogy,
        zeros_like=torch.zeros_like,
        ones_like=torch.ones_like,
        stack_columns=lambda columns: torch.stack(columns, dim=1),
        clamp_min=torch.clamp_min,
        tiny=lambda x: torch.finfo(x.dtype).tiny,
        mean_last=lambda x: x.mean(dim=-1, keepdim=True),
        like=lambda w, x: torch.as_tensor(w).to(dtype=x.dtype, device=x.device),
    )


def _namespace(x) -> SimpleNamespace:
    """The array functions for ``x``: numpy's for numpy arrays and scalars,
    torch's for anything else (tensors)."""
    if isinstance(x, (np.ndarray, np.generic, float, int)):
        return _NUMPY
    return _torch_namespace()


def _flat(t: Array) -> Array:
    """Turn a single-output ``[n, 1]`` array into ``[n]``; leave others as they are."""
    return t.reshape(-1) if t.ndim == 2 and t.shape[1] == 1 else t


def _softplus(eta: Array) -> Array:
    """``log(1 + exp(eta))`` without overflow and without a threshold cut-off."""
    xp = _namespace(eta)
    return xp.logaddexp(eta, xp.zeros_like(eta))


def _y_exp(y: Array, a: Array) -> Array:
    """``y * exp(a)`` for ``y >= 0`` that gives 0 (not NaN) when y = 0, exp(a) = inf."""
    xp = _namespace(a)
    return xp.exp(xp.log(y) + a)


class Family:
    """Base class of an exponential family with its canonical or log link.

    Subclasses set ``name``, ``link_name``, ``y_range_text`` and the bounds of
    ``y``, and implement :meth:`unit_deviance` and :meth:`unit_variance`.

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"poisson"``.
    link_name : str
        ``"identity"``, ``"logit"``, ``"softmax"`` or ``"log"``.
    y_range_text : str
        The valid range of ``y`` in words, used in error messages.
    """

    name: str = ""
    link_name: str = "identity"
    y_range_text: str = "y is any real number"
    _y_low: float = -math.inf
    _y_low_inclusive: bool = True
    _y_high: float = math.inf
    _y_high_inclusive: bool = True

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"

    def _params(self) -> dict[str, float]:
        return {}

    def _label(self) -> str:
        return f"The {self.name} family"

    # ---------------------------------------------------------------- y checks
    def in_y_range(self, y: np.ndarray) -> np.ndarray:
        """Elementwise boolean mask of the values of ``y`` in the family's range."""
        y = np.asarray(y, dtype=np.float64)
        low = y >= self._y_low if self._y_low_inclusive else y > self._y_low
        high = y <= self._y_high if self._y_high_inclusive else y < self._y_high
        return low & high

    def _check_finite(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if y.size == 0:
            raise ValueError(f"{self._label()} requires a non-empty y; got y.size=0.")
        if not np.all(np.isfinite(y)):
            raise ValueError(
                f"{self._label()} requires finite y; y contains NaN or infinity."
            )
        return y

    def check_y(self, y: np.ndarray) -> None:
        """Raise a ``ValueError`` if ``y`` is not finite or not in the family's range.

        Parameters
        ----------
        y : ndarray
            Target values.
        """
        y = self._check_finite(y)
        if not np.all(self.in_y_range(y)):
            raise self._range_error(y)

    def check_offset(
        self,
        offset: np.ndarray | None,
        max_log_range: float = 30.0,
        fitted_range: tuple[float, float] | None = None,
    ):
        """Raise a ``ValueError`` for an offset that is an exposure, not its log.

        Under the log link an offset is ``log(exposure)``; one that spans more
        than ``max_log_range`` (exposures differing by a factor ``exp(30)``,
        about 1e13) is an exposure on its own scale, whose starting means
        overflow (the fit would fail inside the solver). At predict, when
        ``fitted_range`` is given, so is an offset farther than
        ``max_log_range`` outside the offsets of ``fit`` (a few rows have
        no spread to judge by).

        Parameters
        ----------
        offset : ndarray of shape (n_samples,) or None
        max_log_range : float, default=30.0
            Largest ``max(offset) - min(offset)`` taken as a log-exposure.
        fitted_range : tuple of float or None, default=None
            ``(min, max)`` of the offsets of ``fit``.
        """
        if offset is None or self.link_name != "log" or len(offset) == 0:
            return
        if fitted_range is not None:
            low, high = (float(v) for v in fitted_range)
            far = (offset < low - max_log_range) | (offset > high + max_log_range)
            if far.any():
                value = float(offset[np.flatnonzero(far)[0]])
                raise ValueError(
                    f"offset holds {value:.6g}, while the offsets of fit spanned "
                    f"[{low:.6g}, {high:.6g}]: under the log link of the "
                    f"{self.name} family the offset is log(exposure), and this "
                    "one looks like an exposure itself (or another unit). Pass "
                    "log(exposure) as in fit, e.g. offset=np.log(exposure)."
                )
        spread = float(np.max(offset) - np.min(offset))
        if spread > max_log_range:
            raise ValueError(
                f"offset spans {spread:.6g} (min {float(np.min(offset)):.6g}, max "
                f"{float(np.max(offset)):.6g}): under the log link of the "
                f"{self.name} family the offset is log(exposure), and this one "
                "looks "
                "like an exposure itself. Pass log(exposure) as offset, e.g. "
                "offset=np.log(exposure)."
            )

    def _range_error(self, y: np.ndarray) -> ValueError:
        """The error for y out of range, quoting min(y) and/or max(y) as bounded."""
        got = []
        if self._y_low > -math.inf:
            got.append(f"min(y)={float(y.min())}")
        if self._y_high < math.inf:
            got.append(f"max(y)={float(y.max())}")
        return ValueError(
            f"{self._label()} requires {self.y_range_text}; got {', '.join(got)}."
        )

    # ------------------------------------------------------------------ links
    def link(self, mu: Array) -> Array:
        """Map the mean ``mu`` (a tensor or a numpy array) to the linear
        predictor ``eta``."""
        return getattr(_namespace(mu), _LINKS[self.link_name][0])(mu)

    def inverse_link(self, eta: Array) -> Array:
        """Map the linear predictor ``eta`` (a tensor or a numpy array) to the
        mean ``mu``."""
        return getattr(_namespace(eta), _LINKS[self.link_name][1])(eta)

    @property
    def has_balance_correction(self) -> bool:
        """Whether a shift of the intercept can restore the balance property.

        With a log link, adding ``c`` to every linear predictor scales every
        mean by ``exp(c)``; with the identity link it adds ``c``. One ``c``
        then makes ``sum(w * mu) = sum(w * y)`` exactly (see
        :meth:`balance_shift`). Logit and softmax links have no such closed
        form and no correction.
        """
        return self.link_name in ("log", "identity")

    def balance_shift(
        self, y: np.ndarray, mu: np.ndarray, sample_weight: np.ndarray
    ) -> float:
        """The intercept shift ``c`` after which ``sum(w * mu) = sum(w * y)``.

        ``log(sum(w * y) / sum(w * mu))`` for the log link,
        ``sum(w * (y - mu)) / sum(w)`` for the identity link.

        Parameters
        ----------
        y, mu, sample_weight : ndarray of shape (n_samples,)
            Targets, fitted means (offset included) and row weights.

        Returns
        -------
        float
        """
        if not self.has_balance_correction:
            raise ValueError(
                f"{self._label()} with the {self.link_name} link has no balance "
                "correction (it needs the log or identity link)."
            )
        y, mu, w = (
            np.asarray(a, dtype=np.float64).reshape(-1) for a in (y, mu, sample_weight)
        )
        if self.link_name == "log":
            return float(np.log(np.sum(w * y) / np.sum(w * mu)))
        return float(np.sum(w * (y - mu)) / np.sum(w))

    # -------------------------------------------------------------- deviance
    def unit_deviance(self, y: Array, eta: Array) -> Array:
        """Deviance of each row, computed from the linear predictor.

        Parameters
        ----------
        y : Tensor or ndarray of shape [n] (``[n, K]`` for multinomial)
            Target values in the family's range, of ``eta``'s kind.
        eta : Tensor or ndarray of shape [n] or [n, 1] (``[n, K]`` for multinomial)
            Linear predictor on the link scale.

        Returns
        -------
        Tensor or ndarray of shape [n]
            Of ``eta``'s kind.
        """
        raise NotImplementedError

    def deviance(
        self, y: Array, eta: Array, sample_weight: Array | None = None
    ) -> Array:
        """Weighted mean of the unit deviance, ``sum(w * d) / sum(w)``.

        Parameters
        ----------
        y, eta : Tensor or ndarray
            As in :meth:`unit_deviance`.
        sample_weight : Tensor or ndarray of shape [n], optional
            Row weights; equal weights if omitted.

        Returns
        -------
        Tensor or numpy scalar
            A scalar tensor for tensors; a numpy float for numpy arrays.
        """
        d = self.unit_deviance(y, eta)
        if sample_weight is None:
            return d.mean()
        w = _namespace(d).like(_flat(sample_weight), d)
        return (w * d).sum() / w.sum()

    def unit_variance(self, mu: Array) -> Array:
        """Variance of ``y`` as a function of its mean, up to the dispersion."""
        raise NotImplementedError

    # --------------------------------------------------------- likelihood
    def loglike_obs(
        self,
        y: np.ndarray,
        mu: np.ndarray,
        var_weights: np.ndarray | None = None,
        scale: float = 1.0,
    ) -> np.ndarray:
        """Log-likelihood of each row at mean ``mu``, as statsmodels'
        ``family.loglike_obs``.

        Row ``i``'s dispersion is ``scale / var_weights[i]`` (statsmodels'
        ``var_weights``, R's ``weights``). This base class has no closed form
        and returns NaN; the families here override it.

        Parameters
        ----------
        y : ndarray of shape (n_samples,) (``(n_samples, K)`` for multinomial)
        mu : ndarray shaped as ``y``
            Fitted means (class probabilities for multinomial).
        var_weights : ndarray of shape (n_samples,), default=None
            Variance weights; 1 when None.
        scale : float, default=1.0
            The dispersion (ignored by the binomial and multinomial families).

        Returns
        -------
        ndarray of shape (n_samples,), float64
        """
        return np.full(np.shape(y)[0], np.nan)

    def loglike(
        self,
        y: np.ndarray,
        mu: np.ndarray,
        var_weights: np.ndarray | None = None,
        freq_weights: np.ndarray | None = None,
        scale: float = 1.0,
    ) -> float:
        """Log-likelihood ``sum_i freq_weights[i] * loglike_obs_i``, as
        statsmodels' ``family.loglike``.

        Parameters
        ----------
        y, mu, var_weights, scale
            As in :meth:`loglike_obs`.
        freq_weights : ndarray of shape (n_samples,), default=None
            Row ``i`` counts ``freq_weights[i]`` times; 1 when None.

        Returns
        -------
        float
            NaN where the family has no closed form (see :meth:`loglike_obs`).
        """
        ll = self.loglike_obs(y, mu, var_weights, scale)
        if freq_weights is None:
            return float(np.sum(ll))
        return float(np.asarray(freq_weights, dtype=np.float64) @ ll)

    # ---------------------------------------------------------------- facts
    #: Whether the family models class labels (GraphGLMClassifier's families;
    #: a fit on them can separate the classes).
    is_classification: bool = False
    #: Whether ``eta`` has one column per class (``n_outputs(n_classes)``).
    multi_output: bool = False
    #: Whether the coefficient table estimates the dispersion (Pearson chi2 /
    #: (n - rank), as statsmodels does); else it is 1 (poisson, binomial,
    #: multinomial, negative binomial with its theta).
    estimated_dispersion: bool = False
    #: Whether the link is the family's canonical one (gaussian identity,
    #: poisson log, binomial logit, tweedie power 0 or 1). Then the score
    #: equation of the intercept is ``sum(w * (y - mu)) = 0``: the maximum
    #: likelihood GLM is balanced already, and the balance shift of a network
    #: on top leaves the GLM itself exact (``balance="auto"``).
    canonical_link: bool = False

    @property
    def positive_only(self) -> bool:
        """Whether valid ``y`` are non-negative and unbounded above (counts,
        amounts): scikit-learn's ``positive_only`` target tag."""
        return self._y_low >= 0 and self._y_high == math.inf

    def predict_proba(self, eta: Array) -> Array:
        """Class probabilities ``[n, n_classes]`` from ``eta`` ``[n, n_outputs]``
        (a tensor or a numpy array)."""
        raise TypeError(f"{self._label()} does not model classes.")

    def predict_log_proba(self, eta: Array) -> Array:
        """Log of :meth:`predict_proba`, computed on the link scale (finite
        where the probabilities round to 0)."""
        raise TypeError(f"{self._label()} does not model classes.")

    # ------------------------------------------------------ outcome features
    def outcome_transform(
        self, y: np.ndarray, train: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """``y`` ``[n, n_outputs]`` on a scale where neighbours' outcomes
        compare: the log (shifted by a tenth of the training rows' weighted
        mean, so that log(0) is finite) for the log link, else ``y``."""
        if self.link_name != "log":
            return y
        mean_y = np.average(y[train, 0], weights=sample_weight[train])
        return np.log(y + 0.1 * max(mean_y, 1e-8))

    def residual(self, y: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """Pearson residual of ``y`` at mean ``mu`` (both ``[n, n_outputs]``),
        clipped to [-10, 10]."""
        variance = self.unit_variance(mu)
        return np.clip((y - mu) / np.sqrt(np.maximum(variance, 1e-12)), -10, 10)

    # ------------------------------------------------------- starting values
    def n_outputs(self, n_classes: int | None = None) -> int:
        """Number of columns of ``eta``: 1, or ``n_classes`` for multinomial."""
        return 1

    def start_eta(
        self,
        y: np.ndarray,
        sample_weight: np.ndarray | None = None,
        offset: np.ndarray | None = None,
    ) -> np.ndarray:
        """The global GLM's starting intercepts, shape (n_outputs,).

        :meth:`initial_eta`; with an ``offset`` under the log link (log
        exposure) the log rate, its weighted mean subtracted.
        """
        eta = np.ravel(self.initial_eta(np.asarray(y), sample_weight))
        if offset is not None and self.link_name == "log":
            n = np.shape(offset)[0]
            w = np.ones(n) if sample_weight is None else np.asarray(sample_weight)
            eta = eta - np.average(offset, weights=w)
        return eta

    def _clip_mean(self, mean: np.ndarray) -> np.ndarray:
        if self.link_name == "log":
            return np.maximum(mean, _MEAN_FLOOR)
        if self.link_name == "logit":
            return np.clip(mean, _MEAN_FLOOR, 1.0 - _MEAN_FLOOR)
        return mean

    def initial_eta(
        self, y: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> np.ndarray:
        """Link of the weighted mean of ``y``: the best constant linear predictor.

        The mean is clipped away from the boundary of the link's domain
        (e.g. 0 for the log link) so that the result is finite.

        Parameters
        ----------
        y : ndarray of shape (n,)
            Target values.
        sample_weight : ndarray of shape (n,), optional
            Row weights.

        Returns
        -------
        ndarray of shape (1,), float64
        """
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        w = None if sample_weight is None else np.asarray(sample_weight).reshape(-1)
        mean = self._clip_mean(np.atleast_1d(np.average(y, weights=w)))
        return self.link(mean)


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
        theta = self.theta
        r = 1.0 / theta
        ll = (
            gammaln(y + r)
            - gammaln(r)
            - gammaln(y + 1)
            + xlogy_np(y, theta * mu)
            - (y + r) * np.log1p(theta * mu)
        )
        return v / scale * ll

    @staticmethod
    def log_likelihood(
        y: np.ndarray, mu: np.ndarray, theta: float, sample_weight=None
    ) -> float:
        """Weighted log-likelihood ``sum_i w_i log P(y_i; mu_i, theta)``."""
        y, mu = np.asarray(y, dtype=np.float64), np.asarray(mu, dtype=np.float64)
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight)
        r = 1.0 / theta  # R's glm.nb theta (size)
        ll = (
            gammaln(y + r)
            - gammaln(r)
            - gammaln(y + 1)
            + xlogy_np(y, theta * mu)
            - (y + r) * np.log1p(theta * mu)
        )
        return float(w @ ll)

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
