"""Optuna glue of the search: pruning callback, storages, suggestions."""

from __future__ import annotations

import os
import warnings

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import StudyDirection

#: Seconds between a running trial's heartbeats in an RDB storage made from a URL.
HEARTBEAT_INTERVAL = 30
#: Seconds without a heartbeat after which a running trial counts as dead.
GRACE_PERIOD = 120
#: Times a trial of a dead worker is retried (with the same parameters).
MAX_RETRY = 3
#: File endings that make a ``storage`` string a journal file, not a database URL.
JOURNAL_SUFFIXES = (".log", ".jsonl", ".journal")


class OptunaPruningCallback:
    """Reports an estimator's validation deviance to an Optuna trial each epoch.

    Use it in the ``callbacks`` parameter of a graph GLM estimator (which needs
    ``early_stopping=True`` for a validation split). When the trial's pruner
    says so, it raises :class:`optuna.TrialPruned`, which ends the fit.

    Parameters
    ----------
    trial : optuna.trial.Trial
    monitor : str, default="val_deviance"
        Key of the epoch log to report; epochs without it are skipped. The value
        is negated when the study maximises (deviance is lower-is-better).

    Examples
    --------
    >>> import optuna
    >>> from autoglm_graph import GraphGLMRegressor, OptunaPruningCallback
    >>> from autoglm_graph.datasets import make_varying_coefficients
    >>> X, y, _ = make_varying_coefficients(300, 3, random_state=0)
    >>> def objective(trial):
    ...     est = GraphGLMRegressor(
    ...         learning_rate=trial.suggest_float("learning_rate", 1e-3, 1e-2),
    ...         max_epochs=5,
    ...         callbacks=[OptunaPruningCallback(trial)],
    ...     ).fit(X, y)
    ...     return min(h["val_deviance"] for h in est.history_)
    >>> study = optuna.create_study(pruner=optuna.pruners.MedianPruner())
    >>> study.optimize(objective, n_trials=2)
    >>> sorted(study.trials[0].intermediate_values)
    [1, 2, 3, 4, 5]
    """

    def __init__(self, trial: optuna.trial.Trial, monitor: str = "val_deviance"):
        self.trial = trial
        self.monitor = monitor

    def on_epoch_end(self, trainer, logs: dict) -> bool:
        value = logs.get(self.monitor)
        if value is None:
            return False
        epoch = int(logs["epoch"])
        if self.trial.study.direction == StudyDirection.MAXIMIZE:
            value = -value
        self.trial.report(float(value), step=epoch)
        if self.trial.should_prune():
            raise optuna.TrialPruned(
                f"Pruned at epoch {epoch} with {self.monitor}={value:.6g}."
            )
        return False


def make_storage(storage) -> BaseStorage | None:
    """An Optuna storage from ``GraphGLMSearchCV``'s ``storage`` parameter.

    Parameters
    ----------
    storage : None, str, path or optuna.storages.BaseStorage
        ``None``: in memory. A storage object: used as is. ``"journal:PATH"``
        or a path ending in ``.log``, ``.jsonl`` or ``.journal``: a
        ``JournalStorage`` on that file (shared by processes on one file
        system; no heartbeat, so a dead worker's trial stays RUNNING and is not
        retried). Any other string with ``"://"``: a database URL
        (``sqlite:///sweep.db``, ``postgresql://...``) opened as an
        ``RDBStorage`` whose heartbeat fails the trials of dead workers after
        :data:`GRACE_PERIOD` seconds and retries them up to :data:`MAX_RETRY`
        times.

    Returns
    -------
    optuna.storages.BaseStorage or None
    """
    if storage is None or isinstance(storage, BaseStorage):
        return storage
    expected = (
        "The 'storage' parameter must be None, an optuna storage, a database URL "
        "such as 'sqlite:///sweep.db', or a journal file ('journal:PATH' or a path "
        f"ending in {', '.join(JOURNAL_SUFFIXES)})"
    )
    if not isinstance(storage, str | os.PathLike):
        raise ValueError(f"{expected}; got {storage!r}.")
    text = os.fspath(storage)
    if text.startswith("journal:") or text.endswith(JOURNAL_SUFFIXES):
        path = text.removeprefix("journal:")
        if not path:
            raise ValueError(f"{expected}; got {storage!r} (no file name).")
        try:
            return JournalStorage(JournalFileBackend(path))
        except OSError as exc:
            raise ValueError(
                f"The 'storage' journal file {path!r} cannot be opened: {exc}"
            ) from exc
    if "://" not in text:
        raise ValueError(f"{expected}; got {storage!r}.")
    try:
        with warnings.catch_warnings():  # heartbeats are "experimental" in optuna
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(text, **_heartbeat_kwargs())
    except Exception as exc:  # sqlalchemy raises many kinds for a bad URL
        raise ValueError(
            f"The 'storage' URL {storage!r} could not be opened as a database: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _heartbeat_kwargs() -> dict:
    """Heartbeat and retry of stale trials, by the names of the installed optuna."""
    kwargs = {"heartbeat_interval": HEARTBEAT_INTERVAL, "grace_period": GRACE_PERIOD}
    retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    if retry is not None:  # optuna >= 4.9
        kwargs["heartbeat_stale_trial_callback"] = retry(max_retry=MAX_RETRY)
    else:
        retry = optuna.storages.RetryFailedTrialCallback
        kwargs["failed_trial_callback"] = retry(max_retry=MAX_RETRY)
    return kwargs


def _suggest(trial: optuna.trial.Trial, name: str, dist: BaseDistribution):
    if isinstance(dist, FloatDistribution):
        return trial.suggest_float(
            name, dist.low, dist.high, log=dist.log, step=dist.step
        )
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(
            name, dist.low, dist.high, log=dist.log, step=dist.step
        )
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(name, dist.choices)
    raise ValueError(
        f"param_distributions[{name!r}] must be a Float-, Int- or "
        f"CategoricalDistribution; got {type(dist).__name__}."
    )


def start_point(params: dict, space: dict[str, BaseDistribution]) -> dict:
    """The values of ``params`` that lie in ``space`` (a search's first trial)."""
    point = {}
    for name, dist in space.items():
        value = params.get(name)
        if isinstance(dist, CategoricalDistribution):
            ok = any(
                value is c or (type(value) is type(c) and value == c)
                for c in dist.choices
            )
        elif isinstance(dist, FloatDistribution | IntDistribution):
            ok = (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and dist.low <= value <= dist.high
                and (dist.step is None or _on_step(value, dist.low, dist.step))
            )
        else:
            ok = False
        if ok:
            point[name] = value
    return point


def _on_step(value: float, low: float, step: float) -> bool:
    ratio = (value - low) / step
    return abs(ratio - round(ratio)) < 1e-8
