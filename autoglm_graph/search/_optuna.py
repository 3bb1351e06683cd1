"""Optuna glue of the search: pruning callback, storages, suggestions."""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
import warnings

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
    distribution_to_json,
)
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import StudyDirection
from optuna.trial import TrialState

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


def make_storage(
    storage,
    *,
    heartbeat_interval: int = 30,
    grace_period: int = 120,
    max_retry: int = 3,
    attempts: int = 10,
    sqlite_busy_ms: int = 60_000,
) -> BaseStorage | None:
    """An Optuna storage from ``GraphGLMSearchCV``'s ``storage`` parameter.

    A storage object made here (with other heartbeat settings, say) can be
    passed to the search as its ``storage``.

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
        ``grace_period`` seconds and retries them up to ``max_retry`` times.
    heartbeat_interval : int, default=30
        Seconds between a running trial's heartbeats (database URLs).
    grace_period : int, default=120
        Seconds without a heartbeat after which a running trial counts as dead.
    max_retry : int, default=3
        Times a trial of a dead worker is retried (with the same parameters).
    attempts : int, default=10
        Times opening a database is tried when workers started together race
        to create its schema (one gets an IntegrityError or "database is
        locked"; the schema exists at the next try).
    sqlite_busy_ms : int, default=60000
        Milliseconds a SQLite connection waits for another worker's write lock.

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
    heartbeat = {
        "heartbeat_interval": heartbeat_interval,
        "grace_period": grace_period,
        "max_retry": max_retry,
    }
    try:
        return _open_database(text, heartbeat, attempts, sqlite_busy_ms)
    except Exception as exc:  # sqlalchemy raises many kinds for a bad URL
        raise ValueError(
            f"The 'storage' URL {storage!r} could not be opened as a database: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _open_database(
    url: str, heartbeat: dict, attempts: int, sqlite_busy_ms: int
) -> RDBStorage:
    """``RDBStorage(url)``, tried again when another process created the schema
    at the same moment (optuna creates the tables and inserts the alembic
    version row; of two workers on a fresh database one then fails)."""
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    # ProgrammingError: PostgreSQL's "relation already exists" of the same race.
    race = (IntegrityError, OperationalError, ProgrammingError)
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():  # heartbeats are "experimental"
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = RDBStorage(url, **_heartbeat_kwargs(**heartbeat))
            if storage.engine.dialect.name == "sqlite":
                _serialize_sqlite(storage.engine, sqlite_busy_ms)
            return storage
        except race:
            if attempt == attempts - 1:
                raise
            # Jittered backoff (0.05 s doubling, at most 1 s): the workers
            # that collided do not collide again.
            time.sleep(min(1.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")


def _serialize_sqlite(engine, busy_ms: int) -> None:
    """Make every transaction of a SQLite engine take the write lock at BEGIN.

    RDBStorage pops a queued trial by reading its state and writing RUNNING
    ``FOR UPDATE``, which SQLite ignores: two workers that read at the same
    moment both ran the same queued trial, and the second one's result failed
    with "Cannot tell a COMPLETE trial" (seen with 4 workers started together
    on a fresh file). ``BEGIN IMMEDIATE`` serialises those read-then-write
    transactions, as PostgreSQL's row lock does (SQLAlchemy's pysqlite recipe).
    """
    from sqlalchemy import event

    engine.dispose()  # pooled connections were opened without the listeners

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself
        # Wait for the lock rather than fail with "database is locked".
        dbapi_connection.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")

    @event.listens_for(engine, "begin")
    def _begin(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def fail_stale_trials(study: optuna.Study) -> None:
    """Fail (and so retry) the trials of workers whose heartbeat stopped.

    Optuna does it before each new trial; a worker that starts when the study
    already has its ``n_trials`` runs no trial, so it does it here first,
    otherwise a dead worker's trial stayed RUNNING for good.
    """
    with warnings.catch_warnings():  # a no-op for storages without heartbeats
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def _heartbeat_kwargs(
    heartbeat_interval: int, grace_period: int, max_retry: int
) -> dict:
    """Heartbeat and retry of stale trials, by the names of the installed optuna."""
    kwargs = {"heartbeat_interval": heartbeat_interval, "grace_period": grace_period}
    retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    if retry is not None:  # optuna >= 4.9
        kwargs["heartbeat_stale_trial_callback"] = retry(max_retry=max_retry)
    else:
        retry = optuna.storages.RetryFailedTrialCallback
        kwargs["failed_trial_callback"] = retry(max_retry=max_retry)
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


# ---------------------------------------------------------------- fingerprints
#: Version of what a fingerprint covers; a study of another version is refused.
FINGERPRINT_VERSION = 1


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))  # no two splits hash alike
        h.update(part)
    return h.hexdigest()


def array_digest(values) -> str:
    """sha256 of an array-like or DataFrame: its values, dtypes, shape and
    column names (``"none"`` for None)."""
    import numpy as np
    import pandas as pd

    if values is None:
        return "none"
    if isinstance(values, pd.DataFrame | pd.Series):
        frame = values.to_frame() if isinstance(values, pd.Series) else values
        names = json.dumps([str(c) for c in frame.columns]).encode()
        dtypes = json.dumps([str(t) for t in frame.dtypes]).encode()
        try:
            rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()
        except TypeError:  # unhashable cells: their text
            rows = np.asarray(frame.astype(str).to_numpy().tolist(), dtype=object)
            return _digest(names, dtypes, json.dumps(rows.tolist()).encode())
        return _digest(names, dtypes, rows.tobytes())
    array = np.asarray(values)
    shape = json.dumps(array.shape).encode()
    if array.dtype.kind in "biufcmM":
        data = np.ascontiguousarray(array).tobytes()
    else:  # strings and objects: their JSON text
        data = json.dumps(array.tolist(), default=repr).encode()
    return _digest(array.dtype.str.encode(), shape, data)


def study_fingerprint(
    estimator, space: dict, data, cv, scoring, family: str
) -> dict[str, str]:
    """What a study is a study of: the data (X, y, weights, offset, groups),
    the estimator class and family, the search space and how trials are
    scored. Workers and resumed runs must agree on all of it."""
    space_json = json.dumps(
        {name: distribution_to_json(dist) for name, dist in sorted(space.items())}
    )
    if callable(scoring):
        scoring = getattr(scoring, "__qualname__", type(scoring).__name__)
    return {
        "version": str(FINGERPRINT_VERSION),
        "estimator": type(estimator).__name__,
        "family": family,
        "X": array_digest(data.X),
        "y": array_digest(data.y),
        "sample_weight": array_digest(data.sample_weight),
        "offset": array_digest(data.offset),
        "groups": array_digest(data.groups),
        "search space": _digest(space_json.encode()),
        "cv": repr(cv),
        # scoring=None scores are negated deviances (higher is better).
        "scoring": "negated deviance" if scoring is None else repr(scoring),
    }


def default_study_name(fingerprint: dict[str, str]) -> str:
    """A stable name for a study of ``fingerprint``: runs on the same data,
    family and space find (and resume) the same study."""
    text = json.dumps(fingerprint, sort_keys=True).encode()
    return f"autoglm-{hashlib.sha256(text).hexdigest()[:16]}"


def check_fingerprint(study: optuna.Study, fingerprint: dict[str, str]) -> None:
    """Record ``fingerprint`` in a new study, or refuse a study made for other
    data, another family, space or scoring."""
    name = study.study_name
    advice = (
        "Use another study_name (with a storage and no study_name, the name is "
        "derived from the data, family and search space) or another storage."
    )
    if study.direction != StudyDirection.MAXIMIZE:
        raise ValueError(
            f"The study {name!r} minimises; GraphGLMSearchCV's studies maximise "
            f"(negated deviances, as scikit-learn's scores). {advice}"
        )
    stored = study.user_attrs.get("fingerprint")
    if stored is None:
        trials = study.get_trials(deepcopy=False)
        started = [t for t in trials if t.state != TrialState.WAITING]
        if started:
            raise ValueError(
                f"The study {name!r} has {len(started)} trial(s) but no record "
                "of the data, family and search space they were run on (made by "
                f"another program or an older autoglm_graph). {advice}"
            )
        study.set_user_attr("fingerprint", fingerprint)
        # Read back: of two workers with different data that start a new study
        # together, the one whose record was overwritten refuses below.
        stored = study.user_attrs.get("fingerprint")
    if not isinstance(stored, dict):
        stored = {}
    differs = sorted(
        k for k in set(stored) | set(fingerprint) if stored.get(k) != fingerprint.get(k)
    )
    if differs:
        raise ValueError(
            f"The study {name!r} in this storage was run on other "
            f"{', '.join(differs)} than this fit has; its trials do not compare "
            f"with this fit's. {advice}"
        )
