"""Helpers of :class:`~autoglm_graph.preprocessing.TabularPreprocessor`: the
warnings it gives, the checks of its input columns (their kinds, labels,
dtypes, values and missing values), the columns it drops and why, and the
widths of its one-hot blocks. The functions that take the preprocessor read
(and, in ``fit``, record) its column layout."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.preprocessing import OneHotEncoder

from ..utils import caller_stacklevel


class DroppedColumnsWarning(UserWarning):
    """A column that varied in ``fit`` produced no feature (e.g. an identifier)."""


class UnseenCategoryWarning(UserWarning):
    """A categorical column holds a level at ``transform`` that ``fit`` never saw."""


class NewMissingValuesWarning(UserWarning):
    """A column has missing values at ``transform`` and had none in ``fit``."""


def _column_kind(dtype: Any) -> str | None:
    """Return ``"numeric"``, ``"categorical"`` or ``None`` (unsupported) for a dtype."""
    types = pd.api.types
    if types.is_bool_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype):
        return "categorical"
    if types.is_object_dtype(dtype) or types.is_string_dtype(dtype):
        return "categorical"
    if types.is_numeric_dtype(dtype) and not types.is_complex_dtype(dtype):
        return "numeric"
    return None


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


def _check_column_labels(preprocessor, X: pd.DataFrame) -> None:
    """The columns of ``X`` are those of ``fit``, in the same order.

    scikit-learn checks string names only; labels of other types (integers,
    as ``pd.read_csv(header=None)`` makes) are compared here, so that
    ``X[[1, 0]]`` is refused rather than encoded column by position.
    """
    given = list(X.columns)
    if given == preprocessor._columns:
        return
    missing = [c for c in preprocessor._columns if c not in given]
    unexpected = [c for c in given if c not in preprocessor._columns]
    if not missing and not unexpected:
        raise ValueError(
            "The columns of X are those passed during fit in another order "
            f"(fit: {preprocessor._columns!r}; got: {given!r}); select them in the "
            "order of fit, e.g. X[model.feature_names_in_]."
        )
    raise ValueError(
        f"The columns of X differ from those passed during fit: missing "
        f"{missing!r}, unexpected {unexpected!r}."
    )


def _check_numeric_dtypes(preprocessor, X: pd.DataFrame) -> None:
    """Numeric columns of fit may not arrive as dates, durations or complex
    numbers (which would convert to floats silently, or fail deep inside
    scikit-learn)."""
    bad = [
        f"{X.columns[i]!r} ({X.dtypes.iloc[i]})"
        for i in preprocessor._numeric_idx
        if _column_kind(X.dtypes.iloc[i]) is None
    ]
    if bad:
        raise ValueError(
            f"Column(s) {', '.join(bad)} were numeric in fit and have a dtype "
            f"{type(preprocessor).__name__} does not read; pass numbers."
        )


def _check_missing(preprocessor, X: Any, labels: list, reset: bool) -> None:
    """Apply ``handle_missing``; in ``fit`` record the columns with missing
    values (``missing_features_``), at ``transform`` warn about the others."""
    counts = _missing_counts(X, labels)
    if counts and getattr(preprocessor, "handle_missing", "impute") == "error":
        raise ValueError(
            f"Input X has missing values in column(s) {_describe_counts(counts)} "
            f"and {type(preprocessor).__name__} was given handle_missing='error'; "
            "impute or drop them first, or set handle_missing='impute'."
        )
    if reset:
        preprocessor.missing_features_ = list(counts)
        return
    fitted = getattr(preprocessor, "missing_features_", None)  # older model files
    new = (
        {}
        if fitted is None
        else {label: n for label, n in counts.items() if label not in fitted}
    )
    if new:
        warnings.warn(
            f"Column(s) {_describe_counts(new)} have missing values, and had "
            "none in fit: a numeric column gets the median of fit (without a "
            "missing-value indicator, which fit did not make), a categorical "
            "column the level 'missing', which fit did not see (encoded as "
            "an unseen level). Impute them first to choose the values.",
            NewMissingValuesWarning,
            stacklevel=caller_stacklevel(),
        )


def _find_dropped_columns(preprocessor, X: Any) -> dict:
    """Input columns none of whose output features survived, with why."""
    columns = preprocessor.column_transformer_.named_steps["columns"]
    kept = preprocessor.column_transformer_.named_steps["drop_constant"].get_support()
    labels = (
        preprocessor._columns
        if preprocessor._fitted_on_frame
        else preprocessor.numeric_features_
    )
    outputs: dict[int, list[int]] = {}  # input position -> output positions
    for name, indices in columns.output_indices_.items():
        start = indices.start
        if name == "numeric":
            for j, col in enumerate(preprocessor._numeric_idx):
                outputs.setdefault(col, []).append(start + j)
        elif name == "missing":
            indicator = columns.named_transformers_["missing"]
            for j, feature in enumerate(indicator.features_):
                col = preprocessor._numeric_idx[feature]
                outputs.setdefault(col, []).append(start + j)
        elif name == "categorical":
            encoder = columns.named_transformers_["categorical"][-1]
            for col, n_out in zip(
                preprocessor._categorical_idx, _onehot_widths(encoder), strict=True
            ):
                outputs.setdefault(col, []).extend(range(start, start + n_out))
                start += n_out
    dropped = {}
    for col, positions in sorted(outputs.items()):
        if not kept[positions].any():
            values = X.iloc[:, col] if preprocessor._fitted_on_frame else X[:, col]
            dropped[labels[col]] = _drop_reason(
                pd.Series(values),
                col in preprocessor._categorical_idx,
                preprocessor.min_frequency,
            )
    return dropped


def _warn_dropped_columns(preprocessor) -> None:
    informative = {
        col: why
        for col, why in preprocessor.dropped_columns_.items()
        if not why.startswith(("constant", "all values missing"))
    }
    if informative:
        listed = "; ".join(f"{col!r}: {why}" for col, why in informative.items())
        warnings.warn(
            f"{type(preprocessor).__name__} dropped {len(informative)} column(s) that "
            f"produce no feature: {listed}. All dropped columns and the reasons "
            "are in dropped_columns_ (model.preprocessor_.dropped_columns_ on "
            "a fitted GraphGLM estimator).",
            DroppedColumnsWarning,
            stacklevel=caller_stacklevel(),
        )
