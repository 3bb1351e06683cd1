"""Intervals on the per-row coefficients: a bootstrap of the fit, widened by
an estimate of the smoothing's bias.

With ``interval_members=B`` an estimator fits, after its own fit, ``B``
members: copies of itself refitted (the global GLM and the network) on the
same rows with each row's ``sample_weight`` multiplied by an ``Exp(1)`` draw,
the Bayesian bootstrap (Rubin 1981), and with a seed of their own. Rows are
reweighted rather than resampled: a repeated row would be its own nearest
neighbour, and its outcome would leak into its neighbours' features. With
``groups``, a group's rows share one draw (a cluster bootstrap).

The members' spread measures how much the fitted coefficients move between
refits on data like the training data; it does not see the bias of the
smoothing (the network pools a row with its neighbours and, stopped early,
keeps its coefficients near the global GLM's), which on data with known
coefficients is most of their error: the spread alone covered the true
coefficients on about half of the (row, term) pairs at a nominal 90 %
(``docs/decisions/intervals.md``). So, with ``IntervalSettings(bias="pilot")``
(the default), the fit also estimates each term's root mean squared bias
``b_j`` against a pilot: on up to ``calibration_rows`` training rows, a GLM
of the family fitted to each row's ``pilot_rows_per_coef * n_coef`` nearest
training rows (:mod:`autoglm_graph.explain._pilot`), rough but nearly unbiased, with
sandwich variances ``v``. With ``sd`` the members' standard deviation,

    b_j^2 = mean_i (coef_ij - pilot_ij)^2 - mean_i v_ij - mean_i sd_ij^2

(clipped at 0): the squared difference less the two estimates' variances
(``interval_bias_``). ``local_coef(X, interval=level)`` then gives

    coef +- z * sqrt(sd^2 + b_j^2)

centred on the estimator's own ``coef``, ``z`` the normal quantile of
``(1 + level) / 2``: a bias-aware interval (the mean squared error in place
of the variance; Armstrong & Kolesar 2020 bound the bias, this estimates it).
The pilot is defined for one linear predictor per row: the multinomial
family keeps the members' spread alone, as does ``bias="none"``.

A fitted model that is the global GLM (``is_global_only_``: the network
dropped and no location effect) has no smoothing to bootstrap: its
per-row coefficients are the GLM's on every row. ``fit`` then fits no
members and estimates no bias; it keeps the GLM's covariance of the
coefficients on the training data (``interval_cov_``: ``coef_table``'s
default, the inverse Fisher information of the penalised fit times the
dispersion, in the user's units), and ``local_coef(X, interval=level)``
gives every row the GLM's own Wald interval ``coef +- z * se``, the
bounds of ``coef_table(X, y, alpha=1 - level)``. For the multinomial
family ``coef_table`` reports each class's difference to the first class,
``local_coef`` the classes' coefficients centred over the classes (the
fitted parametrisation): the covariance is mapped to the latter.

``fit_intervals`` runs all this after the model's own fit and adds its
seconds to ``fit_times_`` (phases ``interval_members`` and
``interval_bias``).
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm
from sklearn.base import clone
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils.validation import _check_sample_weight, _num_samples, column_or_1d

from ..glm import split_target
from ..policy import FitPolicy

__all__ = [
    "IntervalSettings",
    "check_interval_members",
    "estimate_interval_bias",
    "fit_interval_members",
    "fit_intervals",
    "glm_interval_covariance",
    "local_coef_interval",
]

BIAS_OPTIONS = ("pilot", "none")


@dataclass(frozen=True)
class IntervalSettings:
    """How ``local_coef(X, interval=...)`` turns the members into bounds.

    Frozen (hashable, picklable, compared by value); an estimator takes one as
    ``interval_settings`` (None: the defaults), which apply only with
    ``interval_members >= 2``. The defaults are measured
    (``docs/decisions/intervals.md``).

    Parameters
    ----------
    bias : {"pilot", "none"}, default="pilot"
        ``"pilot"`` widens the members' interval by each term's root mean
        squared bias, estimated at the end of ``fit`` against local GLMs of
        the rows' nearest neighbours (:mod:`autoglm_graph.explain.intervals`):
        0.82-0.90 coverage of the true coefficients at a nominal 0.9 where
        the members' spread alone gave 0.48-0.54, with intervals 2.1-2.8
        times as wide. ``"none"``: the members' spread alone (a
        variance-only interval).
    pilot_rows_per_coef : int, default=15
        The pilot's neighbourhood: this many training rows per coefficient of
        a row's GLM (75 for an intercept and 4 slopes). Fewer rows leave less
        bias in the pilot and more noise in its estimate of the bias: wider
        intervals. At a nominal 0.9, 15 covered 0.82-0.90 (per family, mean of
        2 seeds); 10, 0.91-0.94 with intervals 1.1-1.5 times as wide; 20,
        0.81-0.88; 30, 0.75-0.85.
    calibration_rows : int, default=1000
        Training rows (at most; a fixed draw) on which the bias is estimated.
    """

    bias: str = "pilot"
    pilot_rows_per_coef: int = 15
    calibration_rows: int = 1000

    def __post_init__(self) -> None:
        if self.bias not in BIAS_OPTIONS:
            raise ValueError(
                "IntervalSettings.bias must be one of "
                f"{', '.join(map(repr, BIAS_OPTIONS))}; got {self.bias!r}."
            )
        for name, low in (("pilot_rows_per_coef", 2), ("calibration_rows", 10)):
            value = getattr(self, name)
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
            if not ok or value < low:
                raise ValueError(
                    f"IntervalSettings.{name} must be an integer >= {low}; got "
                    f"{value!r}."
                )


def check_interval_settings(value) -> None:
    """Raise a ValueError unless ``value`` is None or an IntervalSettings."""
    if value is not None and not isinstance(value, IntervalSettings):
        raise ValueError(
            "The 'interval_settings' parameter must be None or an "
            "IntervalSettings, e.g. IntervalSettings(bias='none'); got "
            f"{value!r}."
        )


def settings_of(estimator) -> IntervalSettings:
    """The estimator's ``interval_settings``; the defaults for None (or an
    estimator pickled before the parameter existed)."""
    return getattr(estimator, "interval_settings", None) or IntervalSettings()


def settings_from_fields(fields: dict) -> IntervalSettings:
    """An IntervalSettings from its saved fields (unknown names raise)."""
    names = {f.name for f in dataclasses.fields(IntervalSettings)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise ValueError(f"Unknown field(s) of IntervalSettings: {', '.join(unknown)}.")
    return IntervalSettings(**fields)


STATISTICS = ("coef", "lower", "upper")


def check_interval_members(value) -> None:
    """Raise a ValueError unless ``value`` is 0 or an integer >= 2."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or not (value == 0 or value >= 2):
        raise ValueError(
            "The 'interval_members' parameter must be 0 (no intervals) or an "
            "integer >= 2 (bootstrap members for local_coef(X, interval=...)); "
            f"got interval_members={value!r}."
        )


def fit_intervals(
    estimator, X, y, sample_weight=None, offset=None, groups=None
) -> None:
    """Fit what ``local_coef(X, interval=...)`` reads, after the model's fit.

    A model that is the global GLM (``is_global_only_``) with
    ``interval_members >= 2`` gets the GLM's covariance
    (:func:`glm_interval_covariance`) and no members; any other model its
    bootstrap members (:func:`fit_interval_members`) and their bias estimate
    (:func:`estimate_interval_bias`).

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        Fitted on ``X, y, sample_weight, offset, groups`` (its ``fit_times_``
        set by that fit).
    X, y, sample_weight, offset, groups
        The data of its fit.

    Notes
    -----
    Sets ``interval_members_`` (a list, empty without members),
    ``interval_bias_`` and ``interval_cov_`` (None where they do not apply),
    and adds the seconds spent to the phases ``interval_members`` and
    ``interval_bias`` of ``fit_times_`` and to its total.
    """
    from ..utils import PhaseTimes  # torch: imported where it is used

    times = PhaseTimes.resume(estimator.fit_times_, estimator.device_)
    estimator.interval_members_ = []
    estimator.interval_bias_ = None
    estimator.interval_cov_ = None
    n_members = getattr(estimator, "interval_members", 0)
    if estimator.is_global_only_ and n_members >= 2:
        with times.phase("interval_bias"):
            estimator.interval_cov_ = glm_interval_covariance(
                estimator, X, y, sample_weight, offset
            )
    else:
        with times.phase("interval_members"):
            estimator.interval_members_ = fit_interval_members(
                estimator, X, y, sample_weight, offset, groups
            )
        with times.phase("interval_bias"):
            estimator.interval_bias_ = estimate_interval_bias(
                estimator, X, y, sample_weight, offset
            )
    estimator.fit_times_ = times.result()


def glm_interval_covariance(
    estimator, X, y, sample_weight=None, offset=None
) -> np.ndarray:
    """The global GLM's covariance of ``local_coef``'s columns.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        Fitted on ``X, y, sample_weight, offset``.
    X, y, sample_weight, offset
        The data of its fit.

    Returns
    -------
    ndarray of shape (n_terms, n_terms)
        ``coef_table(X, y, sample_weight, offset)``'s covariance (its
        defaults: ``cov_type="fisher"``, ``weights="variance"``), in the
        user's units and in the order of ``local_coef``'s columns. For the
        multinomial family, whose table holds each class's difference to the
        reference class, the covariance of the classes' coefficients centred
        over the classes, as the fit and ``local_coef`` report them.
    """
    from ..glm import coef_table  # torch: imported where it is used

    if estimator.formula is not None:  # the left side's column leaves X
        X, y = split_target(estimator.formula, estimator.fit_intercept, X, y)
    table = coef_table(estimator, X, y, sample_weight, offset)
    cov = np.asarray(table.attrs["cov"], dtype=np.float64)
    if "reference_class" in table.attrs:
        cov = _centred_classes_covariance(cov, len(estimator.classes_))
    return cov


def _centred_classes_covariance(cov: np.ndarray, n_classes: int) -> np.ndarray:
    """The covariance of ``beta_k = gamma_k - mean_l gamma_l`` (``gamma_0 = 0``),
    for the differences ``gamma_k`` (``k >= 1``, class-major) of covariance
    ``cov``: the classes' coefficients centred over the classes."""
    n_terms = cov.shape[0] // (n_classes - 1)
    centring = np.eye(n_classes)[:, 1:] - 1.0 / n_classes  # [K, K - 1]
    jacobian = np.kron(centring, np.eye(n_terms))
    return jacobian @ cov @ jacobian.T


def fit_interval_members(estimator, X, y, sample_weight=None, offset=None, groups=None):
    """Fit the bootstrap members of a fitted estimator.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        Fitted on ``X, y, sample_weight, offset, groups``; its
        ``interval_members`` says how many members to fit.
    X, y, sample_weight, offset, groups
        The data of its fit.

    Returns
    -------
    list of estimators
        ``interval_members`` fitted copies (``interval_members=0``), each on
        the rows reweighted by its own ``Exp(1)`` draws; empty for 0.
    """
    n_members = getattr(estimator, "interval_members", 0)
    if not n_members:
        return []
    n_samples = _num_samples(X)  # y is None with a formula's left side
    base = np.ones(n_samples) if sample_weight is None else np.asarray(sample_weight)
    codes = None
    if groups is not None:
        codes = np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)
    # The members' draws and seeds come from the estimator's seed, after the
    # draw of its own fit: the same random_state gives the same members.
    rng = check_random_state(estimator.random_state)
    rng.randint(np.iinfo(np.int32).max)
    params = dict(
        interval_members=0,
        verbose=0,
        # The members code categorical terms against the estimator's base
        # levels, which a reweighting could otherwise change.
        base_levels=getattr(estimator, "base_levels_", None) or None,
        # A member that drops its network returns the GLM on the estimator's
        # terms, whose coefficients stack with the others' (a GAM's would add
        # spline terms).
        fit_policy=dataclasses.replace(
            getattr(estimator, "fit_policy", None) or FitPolicy(), fallback="glm"
        ),
    )
    members = []
    for _ in range(n_members):
        seed = int(rng.randint(np.iinfo(np.int32).max))
        draws = np.random.default_rng(seed).exponential(
            size=n_samples if codes is None else codes.max() + 1
        )
        weight = base * (draws if codes is None else draws[codes])
        member = clone(estimator).set_params(random_state=seed, **params)
        member.fit(X, y, sample_weight=weight, offset=offset, groups=groups)
        # Its summary figures are never read (the model's are): not kept,
        # nor saved with it.
        member.glm_statistics_ = None
        members.append(member)
    return members


def estimate_interval_bias(
    estimator, X, y, sample_weight=None, offset=None
) -> np.ndarray | None:
    """Each term's root mean squared bias of the estimator's coefficients.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        Fitted on ``X, y, sample_weight, offset``, with its
        ``interval_members_``.
    X, y, sample_weight, offset
        The data of its fit.

    Returns
    -------
    ndarray of shape (n_terms,) or None
        One value per column of ``estimator.local_coef(X)``, in its units;
        None without members, with ``IntervalSettings(bias="none")`` or for
        the multinomial family.
    """
    from ..utils import check_offset
    from ._pilot import local_glms  # torch: imported where it is used

    settings = settings_of(estimator)
    members = getattr(estimator, "interval_members_", None) or []
    if len(members) < 2 or settings.bias == "none" or estimator._n_outputs != 1:
        return None
    if estimator.formula is not None:  # the left side's column leaves X
        X, y = split_target(estimator.formula, estimator.fit_intercept, X, y)
    y_model = estimator._encode_target(column_or_1d(y))
    n_samples = y_model.shape[0]
    weight = _check_sample_weight(sample_weight, np.empty(n_samples), dtype=np.float64)
    offset = check_offset(offset, n_samples)
    predictor = estimator.predictor()
    terms = predictor.glm_terms
    design = predictor.design(X)
    glm_design = terms.select(design)
    intercept = terms.fit_intercept
    if intercept:
        glm_design = np.hstack([np.ones((n_samples, 1)), glm_design])
    n_coef = glm_design.shape[1]
    rows = np.random.default_rng(0).permutation(n_samples)
    rows = np.sort(rows[: settings.calibration_rows])
    k = min(n_samples, settings.pilot_rows_per_coef * n_coef)
    space = terms.context(design)
    search = NearestNeighbors(n_neighbors=k).fit(space)
    neighbors = search.kneighbors(space[rows], return_distance=False)
    glm = estimator.global_glm_
    start = np.concatenate([glm.intercept[:1], glm.coef[0]])[-n_coef:]
    theta, covariance = local_glms(
        estimator.family_, glm_design, y_model, weight, offset, neighbors, start
    )
    # The user's units: a linear map of the full (intercept, slopes) vector.
    n_full = glm_design.shape[1] + (0 if intercept else 1)
    to_user = predictor.to_user_units(np.eye(n_full))  # row j: the image of e_j
    if not intercept:
        to_user = to_user[1:, 1:]
    pilot = theta @ to_user
    pilot_var = np.einsum("qj,mqr,rj->mj", to_user, covariance, to_user)
    X_rows = _safe_indexing(X, rows)
    coef = estimator.local_coef(X_rows).to_numpy()
    draws = np.stack([m.local_coef(X_rows).to_numpy() for m in members])
    members_var = draws.var(axis=0, ddof=1)
    ok = np.isfinite(pilot).all(1)
    if not ok.any():
        return np.zeros(coef.shape[1])
    squared = ((coef - pilot) ** 2 - pilot_var - members_var)[ok].mean(axis=0)
    return np.sqrt(np.maximum(squared, 0.0))


def local_coef_interval(
    estimator, X, coef: pd.DataFrame, interval: float, offset=None
) -> pd.DataFrame:
    """``coef`` with the bootstrap interval of level ``interval``, or the
    global GLM's Wald interval for a model that is the GLM.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        Fitted with ``interval_members >= 2``: its members and bias estimate,
        or its ``interval_cov_`` (a model that is the global GLM).
    X : array-like or DataFrame of shape (n_samples, n_features)
    coef : DataFrame
        ``estimator.local_coef(X, offset)``.
    interval : float
        Level of the intervals, in (0, 1).
    offset : float or array-like of shape (n_samples,), default=None

    Returns
    -------
    DataFrame
        Columns ``("coef", ...)``, ``("lower", ...)`` and ``("upper", ...)``
        over ``coef``'s columns (a MultiIndex with a first level
        ``statistic``), so that ``result["lower"]`` is shaped as ``coef``.
    """
    _check_interval(interval)
    values = coef.to_numpy()
    cov = getattr(estimator, "interval_cov_", None)
    if cov is not None:  # the global GLM: its Wald interval on every row
        variance = np.maximum(np.diag(cov), 0.0)  # as coef_table's std_err
    else:
        variance = _members_variance(estimator, X, offset)
    half = norm.ppf((1.0 + interval) / 2.0) * np.sqrt(variance)
    half = np.broadcast_to(half, values.shape)
    frames = {
        "coef": coef,
        "lower": pd.DataFrame(values - half, index=coef.index, columns=coef.columns),
        "upper": pd.DataFrame(values + half, index=coef.index, columns=coef.columns),
    }
    return pd.concat(frames, axis=1, names=["statistic"])


def _members_variance(estimator, X, offset) -> np.ndarray:
    """The members' variance of ``local_coef(X)``, plus the squared bias."""
    members = getattr(estimator, "interval_members_", None) or []
    if len(members) < 2:
        raise ValueError(
            "local_coef(interval=...) needs the bootstrap members of the fit: "
            f"refit with interval_members >= 2 (e.g. 20); this "
            f"{type(estimator).__name__} has {len(members)} member(s)."
        )
    draws = np.stack([m.local_coef(X, offset).to_numpy() for m in members])
    variance = draws.var(axis=0, ddof=1)
    bias = getattr(estimator, "interval_bias_", None)
    if bias is not None:  # IntervalSettings(bias="pilot"): the squared bias
        variance = variance + np.asarray(bias) ** 2
    return variance


def _check_interval(interval) -> None:
    ok = isinstance(interval, (int, float, np.floating)) and not isinstance(
        interval, bool
    )
    if not ok or not 0.0 < float(interval) < 1.0:
        raise ValueError(
            "The 'interval' parameter must be a level strictly between 0 and 1 "
            f"(e.g. 0.9 for 90 % intervals); got interval={interval!r}."
        )
