"""Synthetic GLM data whose coefficients vary between latent groups of rows."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pandas as pd
from scipy.special import expit, softmax
from sklearn.utils import check_random_state

__all__ = ["SYNTHETIC_FAMILIES", "make_varying_coefficients"]

SYNTHETIC_FAMILIES = (
    "gaussian",
    "poisson",
    "binomial",
    "gamma",
    "tweedie",
    "negative_binomial",
    "multinomial",
)
_NEEDS_POSITIVE_NOISE = ("gamma", "tweedie", "negative_binomial")


def make_varying_coefficients(
    n_samples: int = 1000,
    n_features: int = 5,
    n_groups: int = 3,
    family: str = "gaussian",
    noise: float = 1.0,
    random_state=None,
    *,
    group_separation: float = 3.0,
    return_frame: bool = False,
    power: float = 1.5,
    n_classes: int = 3,
    return_groups: bool = False,
    n_group_features: int | None = None,
):
    """Generate GLM data whose coefficients differ between latent groups of rows.

    Each row belongs to one of ``n_groups`` latent groups (as equal in size as
    possible). A group has its own centre in feature space and its own GLM
    coefficients, so the group can be recovered from ``X`` (rows of one group lie
    close together) and the same ``X`` enters the linear predictor::

        eta_i = coef[i, 0] + X[i] @ coef[i, 1:]

    Features of a row are ``centre[group] + N(0, I)``. The centres are drawn at
    random, centred, and scaled so that the two closest centres are
    ``group_separation`` within-group standard deviations apart (in all
    dimensions jointly). Slopes are ``N(0, 1) / sqrt(n_features)`` per group and
    the intercept is set so that the linear predictor at the group centre is
    ``U(-1, 1)``; within a group ``eta`` then has a standard deviation of about 1,
    so ``|eta| < 3`` for most rows and log and logit links stay in a sane range.

    For a given ``random_state``, every family except ``"multinomial"`` gets the
    same ``X`` and ``coef``; only ``y`` differs.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows.
    n_features : int, default=5
        Number of features (columns of ``X``).
    n_groups : int, default=3
        Number of latent groups, each with its own coefficients.
    family : {"gaussian", "poisson", "binomial", "gamma", "tweedie", \
"negative_binomial", "multinomial"}, default="gaussian"
        Distribution of ``y`` given ``eta``. Links: identity (gaussian), logit
        (binomial), softmax (multinomial), log (all others).

        - gaussian: ``eta + noise * N(0, 1)``.
        - poisson: ``Poisson(exp(eta))``; ``noise`` is ignored.
        - binomial: ``Bernoulli(sigmoid(eta))``; ``noise`` is ignored.
        - gamma: mean ``exp(eta)``, shape ``1 / noise**2`` (coefficient of
          variation ``noise``).
        - tweedie: compound Poisson-gamma with mean ``mu = exp(eta)``, variance
          ``noise**2 * mu**power``; exact zeros occur.
        - negative_binomial: NB2 (a gamma-Poisson mixture), mean ``mu``, variance
          ``mu + noise**2 * mu**2``.
        - multinomial: ``n_classes`` classes with probabilities
          ``softmax(eta_1, ..., eta_K)``; ``noise`` is ignored.
    noise : float, default=1.0
        Noise scale, see ``family``; its square is the dispersion. Must be
        ``>= 0``, and ``> 0`` for gamma, tweedie and negative_binomial.
    random_state : int, RandomState instance or None, default=None
        Seed; the output is deterministic for an int.
    group_separation : float, default=3.0
        Distance between the two closest group centres, in units of the
        within-group standard deviation of each feature (which is 1).
    return_frame : bool, default=False
        Return ``X`` as a :class:`pandas.DataFrame` with columns ``x0, x1, ...``.
    power : float, default=1.5
        Tweedie variance power, strictly between 1 and 2 (tweedie only).
    n_classes : int, default=3
        Number of classes, at least 2 (multinomial only).
    return_groups : bool, default=False
        Also return the latent group of each row.
    n_group_features : int, default=None
        The group centres differ only in the first ``n_group_features``
        columns (all columns when None); the others are ``N(0, 1)`` whatever
        the group. A column outside them whose slope is the same in every
        group is then linear in ``E[y | x]`` too (for log links, ``log E[y |
        x]``): otherwise a row's group depends on it near the groups'
        borders, and so does the slope of ``E[y | x]`` in it.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features) or DataFrame
        Features, float64.
    y : ndarray of shape (n_samples,)
        Target: float64 for gaussian, gamma and tweedie; int64 counts for poisson
        and negative_binomial; int64 labels in ``{0, 1}`` for binomial and in
        ``{0, ..., n_classes - 1}`` for multinomial.
    coef : ndarray of shape (n_samples, n_features + 1) \
or (n_samples, n_classes, n_features + 1)
        True per-row coefficients: column 0 is the intercept, columns
        ``1..n_features`` the slopes of ``x0..``. For multinomial, one row of
        coefficients per class, centred to sum to zero over the classes (the
        identifiable, symmetric parametrisation of the softmax).
    groups : ndarray of shape (n_samples,)
        Latent group of each row (int64), only when ``return_groups=True``.

    Examples
    --------
    >>> from autoglm_graph.datasets import make_varying_coefficients
    >>> X, y, coef = make_varying_coefficients(
    ...     n_samples=200, n_features=4, family="poisson", random_state=0)
    >>> X.shape, y.shape, coef.shape
    ((200, 4), (200,), (200, 5))
    >>> len({tuple(row) for row in coef})
    3
    """
    _check_counts(n_samples, n_features, n_groups, n_classes)
    _check_distribution(family, noise, group_separation, power)
    _check_n_group_features(n_group_features, n_features)
    rng = check_random_state(random_state)
    groups, centres = _groups_and_centres(
        rng, n_samples, n_groups, n_features, group_separation, n_group_features
    )
    X = centres[groups] + rng.standard_normal((n_samples, n_features))
    shape = (n_groups, n_classes) if family == "multinomial" else (n_groups,)
    coef = _group_coefficients(rng, shape, centres)[groups]
    eta = coef[..., 0] + np.einsum("n...p,np->n...", coef[..., 1:], X)
    y = _sample(rng, family, eta, noise, power)
    if return_frame:
        X = pd.DataFrame(X, columns=[f"x{j}" for j in range(n_features)])
    return (X, y, coef, groups) if return_groups else (X, y, coef)


def _check_counts(n_samples, n_features, n_groups, n_classes) -> None:
    for name, value, low in (
        ("n_samples", n_samples, 1),
        ("n_features", n_features, 1),
        ("n_groups", n_groups, 1),
        ("n_classes", n_classes, 2),
    ):
        if not isinstance(value, Integral) or isinstance(value, bool) or value < low:
            raise ValueError(
                f"The '{name}' parameter must be an int >= {low}; got {value!r}."
            )


def _check_distribution(family, noise, group_separation, power) -> None:
    if family not in SYNTHETIC_FAMILIES:
        raise ValueError(
            f"The 'family' parameter must be one of {list(SYNTHETIC_FAMILIES)}; "
            f"got {family!r}."
        )
    if not isinstance(noise, Real) or not noise >= 0:
        raise ValueError(f"The 'noise' parameter must be a float >= 0; got {noise!r}.")
    if family in _NEEDS_POSITIVE_NOISE and noise == 0:
        raise ValueError(
            f"The 'noise' parameter must be > 0 for family={family!r}; got noise=0."
        )
    if not isinstance(group_separation, Real) or not group_separation >= 0:
        raise ValueError(
            "The 'group_separation' parameter must be a float >= 0; "
            f"got {group_separation!r}."
        )
    if family == "tweedie" and not (isinstance(power, Real) and 1 < power < 2):
        raise ValueError(
            "The 'power' parameter must be strictly between 1 and 2 for "
            f"family='tweedie' (compound Poisson-gamma); got power={power!r}."
        )


def _check_n_group_features(n_group_features, n_features) -> None:
    if n_group_features is not None and (
        not isinstance(n_group_features, Integral)
        or isinstance(n_group_features, bool)
        or not 1 <= n_group_features <= n_features
    ):
        raise ValueError(
            "The 'n_group_features' parameter must be None or an int in "
            f"[1, n_features={n_features}]; got {n_group_features!r}."
        )


def _groups_and_centres(
    rng, n_samples, n_groups, n_features, separation, n_group_features
):
    """The latent group of each row and the groups' centres."""
    groups = rng.permutation(np.arange(n_samples) % n_groups).astype(np.int64)
    n_varying = n_features if n_group_features is None else n_group_features
    centres = np.zeros((n_groups, n_features))
    centres[:, :n_varying] = _group_centres(rng, n_groups, n_varying, separation)
    return groups, centres


def _group_centres(rng, n_groups, n_features, separation):
    """Random centred centres whose closest pair is ``separation`` apart."""
    centres = rng.standard_normal((n_groups, n_features))
    if n_groups == 1:
        return np.zeros((1, n_features))
    centres -= centres.mean(axis=0)
    dist = np.linalg.norm(centres[:, None, :] - centres[None, :, :], axis=-1)
    closest = dist[np.triu_indices(n_groups, k=1)].min()
    return centres * (separation / closest)


def _group_coefficients(rng, shape, centres):
    """Intercept + slopes per group (and class): ``shape + (n_features + 1,)``.

    The intercept puts the linear predictor at the group centre at ``U(-1, 1)``.
    """
    n_features = centres.shape[1]
    slopes = rng.standard_normal((*shape, n_features)) / np.sqrt(n_features)
    level = rng.uniform(-1.0, 1.0, size=shape)
    if len(shape) == 2:  # multinomial: centre over classes (sum-to-zero)
        slopes -= slopes.mean(axis=1, keepdims=True)
        level -= level.mean(axis=1, keepdims=True)
    centre = centres.reshape(shape[0], *([1] * (len(shape) - 1)), n_features)
    intercept = level - (slopes * centre).sum(axis=-1)
    return np.concatenate([intercept[..., None], slopes], axis=-1)


def _sample(rng, family, eta, noise, power):
    """Draw ``y`` given the linear predictor ``eta``."""
    if family == "gaussian":
        return eta + noise * rng.standard_normal(eta.shape)
    if family == "binomial":
        return (rng.random(eta.shape) < expit(eta)).astype(np.int64)
    if family == "multinomial":
        cum = np.cumsum(softmax(eta, axis=1), axis=1)
        y = (rng.random((eta.shape[0], 1)) > cum).sum(axis=1)
        return np.minimum(y, eta.shape[1] - 1).astype(np.int64)
    mu = np.exp(eta)
    if family == "poisson":
        return rng.poisson(mu).astype(np.int64)
    dispersion = noise**2
    if family == "gamma":
        shape = 1.0 / dispersion
        y = rng.gamma(shape, mu / shape)
        return np.maximum(y, np.finfo(np.float64).tiny)  # y > 0 even on underflow
    if family == "negative_binomial":
        rate = rng.gamma(1.0 / dispersion, mu * dispersion)
        return rng.poisson(rate).astype(np.int64)
    return _sample_tweedie(rng, mu, dispersion, power)


def _sample_tweedie(rng, mu, dispersion, power):
    """Compound Poisson-gamma: ``N ~ Poisson(lam)``, ``y = sum of N gammas``."""
    lam = mu ** (2 - power) / (dispersion * (2 - power))
    alpha = (2 - power) / (power - 1)  # gamma shape of each summand
    theta = dispersion * (power - 1) * mu ** (power - 1)  # gamma scale
    counts = rng.poisson(lam)
    y = np.zeros_like(mu)
    pos = counts > 0
    y[pos] = rng.gamma(counts[pos] * alpha, theta[pos])
    return y
