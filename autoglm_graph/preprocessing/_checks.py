"""Helpers of :class:`~autoglm_graph.preprocessing.TabularPreprocessor`: the
checks of its input columns, the wording of its warnings and errors, and the
widths of its one-hot blocks."""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
from sklearn.preprocessing import OneHotEncoder


def _onehot_widths(encoder: OneHotEncoder) -> list[int]:
    """Output columns per input column of a fitted encoder (no level dropped)."""
    widths = []
    # infrequent_categories_ exists only where levels can be grouped
    # (min_frequency or max_categories set).
    grouping = encoder.min_frequency is not None or encoder.max_categories is not None
    for i, categories in enumerate(encoder.categories_):
        infrequent = encoder.infrequent_categories_[i] if grouping else None
        if infrequent is None:
            widths.append(len(categories))
        else:  # the rare levels share one "infrequent" column
            widths.append(len(categories) - len(infrequent) + 1)
    return widths


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _drop_reason(values: pd.Series, categorical: bool, min_frequency: Any) -> str:
    """Why a column gave no feature; the wording the warning shows."""
    present = values.dropna()
    if present.empty:
        return "all values missing"
    distinct = present.astype(str).unique() if categorical else present.unique()
    if len(distinct) == 1 and not values.isna().any():
        return f"constant ({_plain(present.iloc[0])!r})"
    if not categorical:  # numeric: constant apart from missing values
        return f"constant ({_plain(present.iloc[0])!r}) where not missing"
    why = (
        f"each of its {len(distinct)} distinct values is rarer than "
        f"min_frequency={min_frequency!r}, so all share one constant "
        "'infrequent' feature"
    )
    numbers = pd.to_numeric(present.astype(str), errors="coerce")
    if numbers.notna().all():
        return (
            f"numbers stored as text ({values.dtype}): {why}; convert it with "
            "pandas.to_numeric to use it as a number"
        )
    return f"{why} (an identifier?)"


def _readings(value: Any) -> list[str]:
    """The level strings a number or bool could stand for: ``1.0`` is ``"1"``,
    ``"1.0"`` or ``"True"``; ``0`` is ``"0"``, ``"0.0"`` or ``"False"``."""
    if isinstance(value, bool | np.bool_):
        return [str(bool(value)), str(int(value))]
    if not isinstance(value, Integral | float | np.floating):
        return []
    number = float(value)
    readings = [str(number)]
    if number.is_integer():
        readings.append(str(int(number)))
    if number in (0.0, 1.0):
        readings.append(str(bool(number)))
    return readings


def _to_fitted_levels(values: pd.Series, levels: set[str]) -> tuple[list, list, list]:
    """``values`` with each value that is not a fitted level, but has exactly one
    reading that is, replaced by that level; (value, level) examples; and the
    values (first of each) that matched no level."""
    out, examples, unmatched = values.astype(object).tolist(), [], []
    seen: dict[Any, str | None] = {}
    for i, value in enumerate(out):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        if str(value) in levels:
            continue
        if value not in seen:
            matches = {r for r in _readings(value) if r in levels}
            seen[value] = matches.pop() if len(matches) == 1 else None
            if seen[value] is not None:
                examples.append((_plain(value), seen[value]))
            else:
                unmatched.append(_plain(value))
        if seen[value] is not None:
            out[i] = seen[value]
    return out, examples, unmatched


def _not_numeric_error(frame: pd.DataFrame) -> ValueError:
    """A ValueError naming the numeric columns of fit whose values are not numbers."""
    bad = []
    for label in frame.columns:
        column = frame[label]
        try:
            column.to_numpy(dtype=np.float64, na_value=np.nan)
            continue
        except (TypeError, ValueError):
            pass
        present = column[column.notna()]
        numbers = pd.to_numeric(present.astype(str), errors="coerce")
        examples = present[numbers.isna()].drop_duplicates().head(3).tolist()
        bad.append(
            f"{label!r} ({column.dtype}, e.g. "
            f"{', '.join(repr(_plain(v)) for v in examples) or 'non-numeric values'})"
        )
    return ValueError(
        f"Column(s) {'; '.join(bad)} were numeric in fit and hold values that are "
        "not numbers here; pass numbers (missing values may be NaN)."
    )


def _check_variance_is_finite(values: np.ndarray, labels: list) -> None:
    """Raise a ValueError naming numeric columns too large to standardise.

    Values around 1e200 overflow the variance in float64; the column then came
    out constant and was dropped with nothing but numpy's overflow warnings.
    """
    if values.shape[1] == 0:
        return
    with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        centred = values - np.nanmean(values, axis=0)
        variance = np.nanmean(centred**2, axis=0)
        present = ~np.isnan(values).all(axis=0)
        bad = ~np.isfinite(variance) & present
    if bad.any():
        names = [
            f"{label!r} (values up to {np.nanmax(np.abs(values[:, j])):.3g})"
            for j, (label, b) in enumerate(zip(labels, bad, strict=True))
            if b
        ]
        raise ValueError(
            f"Numeric column(s) {', '.join(names)} are too large to standardise in "
            "float64 (their variance overflows); rescale them (divide by a power "
            "of ten, or take the log) before fitting."
        )


def _dense_scalar_columns(X: pd.DataFrame) -> pd.DataFrame:
    """``X`` with pandas sparse columns made dense; refuse non-scalar values.

    Sparse columns failed deep in scikit-learn ("fill value must be 0 when
    converting to COO matrix") and tuples or lists in an object column with
    "setting an array element with a sequence", naming no column.
    """
    sparse = [
        i for i, dtype in enumerate(X.dtypes) if isinstance(dtype, pd.SparseDtype)
    ]
    if sparse:
        X = X.copy()
        for i in sparse:
            X.isetitem(i, X.iloc[:, i].sparse.to_dense())
    for i, dtype in enumerate(X.dtypes):
        if not pd.api.types.is_object_dtype(dtype):
            continue
        column = X.iloc[:, i]
        nested = column.map(
            lambda v: isinstance(v, list | tuple | dict | set | np.ndarray)
        )
        if nested.any():
            example = column[nested.to_numpy()].iloc[0]
            raise ValueError(
                f"Column {X.columns[i]!r} holds {type(example).__name__} values "
                f"(e.g. {example!r}); each cell must be one number, string or "
                "bool. Split such values into columns first."
            )
    return X


def _check_no_infinity(values: np.ndarray, labels: list) -> None:
    """Raise a ValueError naming the numeric columns (``values``, labelled by
    ``labels``) that contain ±inf."""
    bad = np.isinf(values).any(axis=0)
    if bad.any():
        names = [repr(label) for label, b in zip(labels, bad, strict=True) if b]
        raise ValueError(
            f"Input X contains infinity in numeric column(s) {', '.join(names)}; "
            "replace infinite values with NaN (to be imputed) or finite numbers."
        )


def _level_counts(values: pd.Series) -> pd.Series:
    """Rows per level of a categorical column's non-missing values, the levels
    as the encoder reads them (as strings: ``1`` and ``"1"`` are one level)."""
    counts = values.dropna().astype(object).value_counts(sort=False)
    if counts.empty:
        return counts
    return counts.groupby(counts.index.map(str)).sum()


def _check_text_in_numbers(values: pd.Series, label: Any) -> None:
    """Refuse a text column most of whose values are numbers, but not all.

    Such a column is a numeric column with stray text (``"n/a"``, ``"?"``) or a
    factor coded by numbers plus a few text codes; encoded as levels it would
    become one indicator per distinct number. The user says which it is.
    """
    if not (
        pd.api.types.is_object_dtype(values.dtype)
        or pd.api.types.is_string_dtype(values.dtype)
    ):
        return
    counts = _level_counts(values)
    if counts.empty:
        return
    numbers = pd.to_numeric(pd.Series(counts.index), errors="coerce").to_numpy()
    is_text = np.isnan(numbers)
    text_rows = int(counts.to_numpy()[is_text].sum())
    if not is_text.any() or 2 * text_rows >= int(counts.sum()):
        return
    text = counts[is_text].sort_values(ascending=False)
    shown = ", ".join(f"{level!r} ({n} rows)" for level, n in text.head(5).items())
    shown += f", ... ({len(text)} in all)" if len(text) > 5 else ""
    raise ValueError(
        f"Column {label!r} ({values.dtype}) holds numbers and text: "
        f"{text_rows} of its {int(counts.sum())} non-missing values are not "
        f"numbers: {shown}. If the text marks missing values, convert the "
        f"column with X[{label!r}] = pandas.to_numeric(X[{label!r}], "
        "errors='coerce') (they are then imputed as missing values); if the "
        f"column is a factor, declare it one with X[{label!r}] = "
        f"X[{label!r}].astype('category')."
    )


def _identifier_reason(values: pd.Series) -> str | None:
    """Why a categorical column is an identifier, or None when it is not.

    An identifier is a column more than half of whose rows hold a level seen
    in no other row: one indicator per row, which no GLM can estimate (each
    such coefficient fits its one row exactly) and which would make the
    design as wide as it is long.
    """
    counts = _level_counts(values)
    single = int((counts == 1).sum())
    if 2 * single <= len(values):
        return None
    why = (
        f"an identifier: {single} of its {len(values)} rows hold a level seen "
        "in no other row"
    )
    numbers = pd.to_numeric(pd.Series(counts.index), errors="coerce")
    if numbers.notna().all():
        return (
            f"numbers stored as text ({values.dtype}), {why}; convert it with "
            "pandas.to_numeric to use it as a number"
        )
    return why


def _missing_counts(X: Any, labels: list) -> dict:
    """Missing values per column of ``X`` (a DataFrame or a float array),
    for the columns that have any."""
    if isinstance(X, pd.DataFrame):
        counts = X.isna().sum().to_numpy()
    else:
        counts = np.isnan(np.asarray(X, dtype=np.float64)).sum(axis=0)
    return {label: int(n) for label, n in zip(labels, counts, strict=True) if n > 0}


def _describe_counts(counts: dict) -> str:
    return ", ".join(f"{label!r} ({n} rows)" for label, n in counts.items())
