"""The base class of the families and the array functions their formulas use.

:class:`Family` knows what every family shares: the range checks on ``y``, the
links, the weighted deviance, the log-likelihood's sum, the starting values;
the families of :mod:`autoglm_graph.glm.families` add their unit deviance,
variance and log-likelihood.

Each formula is written once, on the array functions of its input's
namespace (:func:`_namespace`): torch's for tensors (training, and the GLM's
derivatives by autograd), numpy's and ``scipy.special``'s for numpy arrays
(prediction, which then needs no torch). The array methods keep the dtype and
device of their inputs and return the input's kind.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

if TYPE_CHECKING:
    from torch import Tensor

    #: What the formulas take and give: a torch tensor or a numpy array.
    Array = Tensor | np.ndarray

__all__ = ["Family"]

# Floor on the mean used by ``initial_eta`` so that link(mean) stays finite.
_MEAN_FLOOR = 1e-12
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
