"""The rows of a fit as its parts read them (:class:`FitRows`), and the
labels of rows that the readers report."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class FitRows:
    """The checked rows of one ``fit``, shared by its parts.

    Attributes
    ----------
    design : ndarray of shape (n_samples, n_columns)
        The preprocessed columns (the network's context), then a formula's
        or the splines' columns (``GLMTerms.design``); float64.
    y : ndarray of shape (n_samples,) or (n_samples, n_classes)
        The target as the family reads it (one-hot classes for multinomial).
    sample_weight : ndarray of shape (n_samples,)
    offset : ndarray of shape (n_samples,) or None
    groups : ndarray of int or None
        Integer codes of ``fit``'s ``groups``.
    """

    design: np.ndarray
    y: np.ndarray
    sample_weight: np.ndarray
    offset: np.ndarray | None
    groups: np.ndarray | None

    @property
    def n_samples(self) -> int:
        return self.design.shape[0]


def n_rows(X) -> int:
    """Rows of X as predict reads it (a Series is one row, as df.iloc[i])."""
    return 1 if isinstance(X, pd.Series) else len(X)


def row_labels(X) -> pd.Index:
    """X's index (a Series: its name; an array: positions)."""
    if isinstance(X, pd.Series):  # one row: its name labels it
        return pd.Index([0 if X.name is None else X.name])
    if hasattr(X, "index"):
        return X.index
    return pd.RangeIndex(X.shape[0])
