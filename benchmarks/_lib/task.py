"""What every model adapter of the suite shares: the task, and "not applicable".

:mod:`benchmarks._lib.models` (the registry and the plain adapters) and
:mod:`benchmarks._lib.peers` (the tuned peers) both import from here, so that
neither imports the other's module for these names.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

CLASSIFICATION = ("binomial", "multinomial")
LOG_LINK = ("poisson", "gamma", "tweedie", "negative_binomial")


class NotApplicable(Exception):
    """The model does not handle this family or this kind of data."""


@dataclass(frozen=True)
class Task:
    """What a model factory needs to know.

    Attributes
    ----------
    family : str
        Family of the dataset (``"poisson"``, ``"binomial"``, ...).
    power : float
        Tweedie variance power (tweedie only).
    theta : float
        Negative binomial dispersion (variance ``mu + theta * mu**2``).
    seed : int
        Random state of the models.
    quick : bool
        Smoke-test settings: fewer epochs and trees.
    threads : int or None
        Threads for LightGBM and GraphGLM (``n_jobs``); None: their
        defaults (all cores for LightGBM, one thread for GraphGLM). Torch and
        the BLAS/OpenMP pools of the other models are limited by the runner.
    tuning_trials : int
        Optuna trials of ``lightgbm_tuned``.
    tuning_folds : int
        Cross-validation folds scoring each trial of ``lightgbm_tuned``.
    ebm_budget_s : float or None
        Seconds after which an ``ebm`` fit stops and is reported n/a; None:
        no limit.
    """

    family: str
    power: float = 1.5
    theta: float = 1.0
    seed: int = 0
    quick: bool = False
    threads: int | None = None
    tuning_trials: int = 30
    tuning_folds: int = 3
    ebm_budget_s: float | None = None

    @property
    def is_classification(self) -> bool:
        """Binomial or multinomial."""
        return self.family in CLASSIFICATION

    @property
    def variance_power(self) -> float:
        """Power ``p`` of the rate trick's weight ``exposure ** (2 - p)``."""
        return {"gamma": 2.0, "tweedie": self.power}.get(self.family, 1.0)


def string_levels(X: pd.DataFrame) -> dict[str, list]:
    """The sorted levels of ``X``'s string (object) columns, for
    :func:`with_categories`; empty when ``X`` has none."""
    return {
        column: sorted(values.dropna().unique(), key=str)
        for column, values in X.items()
        if not isinstance(values.dtype, pd.CategoricalDtype)
        and (
            pd.api.types.is_object_dtype(values.dtype)
            or pd.api.types.is_string_dtype(values.dtype)
        )
    }


def with_categories(X: pd.DataFrame, levels: dict[str, list]) -> pd.DataFrame:
    """``X`` with the string columns of ``levels`` as pandas categories of those
    levels (a level unseen in them, or a missing value, becomes NaN): LightGBM
    takes categories but no strings. ``X`` itself when ``levels`` is empty."""
    if not levels:
        return X
    return X.astype(
        {
            column: pd.CategoricalDtype(categories)
            for column, categories in levels.items()
        }
    )
