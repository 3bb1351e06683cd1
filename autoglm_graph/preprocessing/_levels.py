"""Categorical levels at ``transform``: levels that ``fit`` never saw, and
columns whose dtype changed since ``fit``, matched back to the fitted levels.

Helpers of :class:`~autoglm_graph.preprocessing.TabularPreprocessor`; each
takes the fitted preprocessor and the checked frame.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
from sklearn.exceptions import DataConversionWarning
from sklearn.preprocessing import OneHotEncoder

from ..utils import caller_stacklevel
from ._checks import UnseenCategoryWarning, _plain


def _warn_unseen_levels(preprocessor, X: pd.DataFrame) -> None:
    """Warn once about values of categorical columns that ``fit`` never saw.

    As ``OneHotEncoder(handle_unknown="warn")``: an unseen level is encoded
    as the column's infrequent level, or as no level at all, which moves a
    prediction. Columns whose dtype changed since ``fit`` are left to
    :func:`_match_fitted_levels`, which says more about them.
    """
    fitted = getattr(preprocessor, "_dtypes", None)  # absent in older model files
    if fitted is None or not preprocessor._categorical_idx:
        return
    encoder = _fitted_encoder(preprocessor)
    # infrequent_categories_ exists only where levels can be grouped.
    grouping = (
        preprocessor.min_frequency is not None
        or preprocessor.max_categories is not None
    )
    found = []
    for i, col in enumerate(preprocessor._categorical_idx):
        values = X.iloc[:, col]
        if str(values.dtype) != fitted[col]:
            continue
        levels = set(encoder.categories_[i].tolist())
        present = pd.unique(values[values.notna()].astype(object))
        unseen = [_plain(v) for v in present if str(v) not in levels]
        if not unseen:
            continue
        shown = ", ".join(repr(v) for v in unseen[:5])
        shown += f", ... ({len(unseen)} in all)" if len(unseen) > 5 else ""
        infrequent = grouping and encoder.infrequent_categories_[i] is not None
        coded = "its infrequent level" if infrequent else "no level (all zeros)"
        label = preprocessor._columns[col]
        found.append(f"{label!r}: {shown} (encoded as {coded})")
    if found:
        warnings.warn(
            "Found unknown categories in column(s) during transform, levels "
            f"that fit did not see: {'; '.join(found)}.",
            UnseenCategoryWarning,
            stacklevel=caller_stacklevel(),
        )


def _match_fitted_levels(preprocessor, X: pd.DataFrame) -> pd.DataFrame:
    """Map the values of categorical columns whose dtype changed since
    ``fit`` back to the fitted levels, and say so.

    Category codes that arrive as floats (``1.0`` for the level ``"1"``),
    bools as ``0``/``1``, or any column through ``X.to_numpy()`` would
    otherwise become unseen levels, which moves the predictions silently.
    A value is mapped only when exactly one reading of it is a fitted level.
    """
    fitted = getattr(preprocessor, "_dtypes", None)  # absent in older model files
    if fitted is None or not preprocessor._categorical_idx:
        return X
    encoder = _fitted_encoder(preprocessor)
    changed: list[str] = []
    unseen: list[str] = []
    for col, levels in zip(
        preprocessor._categorical_idx, encoder.categories_, strict=True
    ):
        values = X.iloc[:, col]
        if str(values.dtype) == fitted[col]:
            continue
        mapped, examples, unmatched = _to_fitted_levels(values, set(levels.tolist()))
        # "'col' (dtype in fit, dtype here", closed by each message below
        column = (
            f"{preprocessor._columns[col]!r} ({fitted[col]} in fit, {values.dtype} here"
        )
        if examples:
            if not changed:
                X = X.copy()
            X.isetitem(col, mapped)
            shown = ", ".join(f"{v!r} -> {lv!r}" for v, lv in examples[:3])
            changed.append(f"{column}; {shown})")
        if unmatched:
            unseen.append(f"{column}): {_no_level_text(unmatched, levels)}")
    _warn_matched_levels(changed, unseen)
    return X


def _fitted_encoder(preprocessor) -> OneHotEncoder:
    """The one-hot encoder of the categorical columns, as fitted."""
    columns = preprocessor.column_transformer_.named_steps["columns"]
    return columns.named_transformers_["categorical"][-1]


def _no_level_text(unmatched: list, levels: np.ndarray) -> str:
    """Values of a column whose dtype changed that match no fitted level: most
    likely the wrong column or codes for labels, not new categories."""
    fitted_levels = ", ".join(repr(_plain(v)) for v in levels[:5])
    fitted_levels += ", ..." if len(levels) > 5 else ""
    return (
        f"{', '.join(repr(v) for v in unmatched[:3])} match no "
        f"level of fit ({fitted_levels})"
    )


def _warn_matched_levels(changed: list[str], unseen: list[str]) -> None:
    """The warnings of :func:`_match_fitted_levels`: the columns matched, and
    those holding values that match no fitted level."""
    if changed:
        warnings.warn(
            "Categorical column(s) with another dtype than in fit were matched "
            f"to the fitted levels: {'; '.join(changed)}. Pass the dtypes of "
            "fit to silence this warning.",
            DataConversionWarning,
            stacklevel=caller_stacklevel(),
        )
    if unseen:
        warnings.warn(
            "Categorical column(s) with another dtype than in fit hold values "
            f"that are no level of fit, encoded as unseen levels: "
            f"{'; '.join(unseen)}. Check the column, or pass the labels of fit "
            "rather than codes.",
            DataConversionWarning,
            stacklevel=caller_stacklevel(),
        )


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
