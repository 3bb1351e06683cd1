"""Intervals on the per-row coefficients: a Bayesian bootstrap of the whole fit.

With ``interval_members=B`` an estimator fits, after its own fit, ``B``
members: copies of itself refitted (the global GLM and the network) on the
same rows with each row's ``sample_weight`` multiplied by an ``Exp(1)`` draw,
the Bayesian bootstrap (Rubin 1981), and with a seed of their own. Rows are
reweighted rather than resampled: a repeated row would be its own nearest
neighbour, and its outcome would leak into its neighbours' features. With
``groups``, a group's rows share one draw (a cluster bootstrap).

``local_coef(X, interval=level)`` then gives the normal bootstrap interval
``coef +- z * sd``: ``coef`` the estimator's own per-row coefficient, ``sd``
the standard deviation over the members of theirs, ``z`` the normal quantile
of ``(1 + level) / 2``. The interval measures how much the fitted coefficients
move between refits on data like the training data (the global GLM's
sampling variability, the network's and its training's randomness); it does
not include the bias of the smoothing over neighbours, nor the choice among
per-row coefficients that give the same linear predictor, so it covers the
true coefficients of simulated data less often than its level says
(``benchmarks/results/intervals.md``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm
from sklearn.base import clone
from sklearn.utils import check_random_state

__all__ = ["check_interval_members", "fit_interval_members", "local_coef_interval"]

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
    n_samples = len(y)
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
        members.append(member)
    return members


def local_coef_interval(
    estimator, X, coef: pd.DataFrame, interval: float, offset=None
) -> pd.DataFrame:
    """``coef`` with the bootstrap interval of level ``interval``.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        Fitted with ``interval_members >= 2``.
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
    members = getattr(estimator, "interval_members_", None) or []
    if len(members) < 2:
        raise ValueError(
            "local_coef(interval=...) needs the bootstrap members of the fit: "
            f"refit with interval_members >= 2 (e.g. 20); this "
            f"{type(estimator).__name__} has {len(members)} member(s)."
        )
    draws = np.stack([m.local_coef(X, offset).to_numpy() for m in members])
    half = norm.ppf((1.0 + interval) / 2.0) * draws.std(axis=0, ddof=1)
    values = coef.to_numpy()
    frames = {
        "coef": coef,
        "lower": pd.DataFrame(values - half, index=coef.index, columns=coef.columns),
        "upper": pd.DataFrame(values + half, index=coef.index, columns=coef.columns),
    }
    return pd.concat(frames, axis=1, names=["statistic"])


def _check_interval(interval) -> None:
    ok = isinstance(interval, (int, float, np.floating)) and not isinstance(
        interval, bool
    )
    if not ok or not 0.0 < float(interval) < 1.0:
        raise ValueError(
            "The 'interval' parameter must be a level strictly between 0 and 1 "
            f"(e.g. 0.9 for 90 % intervals); got interval={interval!r}."
        )
