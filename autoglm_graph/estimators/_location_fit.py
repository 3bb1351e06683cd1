"""The location effect's part of ``fit`` (``location_columns``).

The effect itself (its search and its selection) is
:func:`autoglm_graph.network.fit_location_effect`'s; this part maps the
estimator's parameters and fitted preprocessor onto it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..network import LocationEffect, fit_location_effect
from ._rows import FitRows


@dataclass(frozen=True)
class LocationFit:
    """What the location effect's part gives the estimator.

    Attributes
    ----------
    effect : LocationEffect or None
        The kept effect (``location_effect_``); None when not worth keeping.
    report : dict
        Its chosen size and coefficient, its validation gain (``location_report_``).
    shift : ndarray of shape (n_samples,) or None
        The linear predictor's shift of every row of the fit (leave-one-out on
        the training rows); None without the effect.
    """

    effect: LocationEffect | None
    report: dict
    shift: np.ndarray | None


def fit_location(
    estimator, rows: FitRows, train_pos: np.ndarray, val_pos: np.ndarray | None
) -> LocationFit | None:
    """Fit the location effect of ``location_columns`` on the training rows,
    kept when it lowers the deviance; None without ``location_columns``."""
    if estimator.location_columns is None:
        return None
    if estimator._n_outputs != 1:
        raise ValueError(
            "location_columns needs a single-output family; the multinomial "
            "family has one linear predictor per class."
        )
    if rows.groups is not None:
        raise ValueError(
            "location_columns cannot be combined with groups yet: a row's "
            "neighbourhood would hold rows of its own group."
        )
    columns = _design_columns(estimator)
    predictor = estimator.predictor()
    eta = predictor.global_eta(rows.design, rows.offset)[:, 0]
    locations = predictor.locations(rows.design, columns)

    def subset(positions):
        if positions is None or not len(positions):
            return None
        return (
            locations[positions],
            rows.y[positions],
            eta[positions],
            rows.sample_weight[positions],
        )

    effect, train_shift, report = fit_location_effect(
        estimator.family_,
        columns,
        subset(train_pos),
        subset(val_pos),
        estimator.location_neighbors,
    )
    if effect is None:
        return LocationFit(None, report, None)
    shift = np.zeros(rows.n_samples)
    shift[train_pos] = train_shift
    if val_pos is not None and len(val_pos):
        shift[val_pos] = effect.shift(locations[val_pos])
    return LocationFit(effect, report, shift)


def _design_columns(estimator) -> list[int]:
    """Design columns of ``location_columns`` (numeric columns only)."""
    preprocessor = estimator.preprocessor_
    names_in = getattr(estimator, "feature_names_in_", None)
    numeric = set(map(str, preprocessor.numeric_features_))
    out = list(map(str, preprocessor.get_feature_names_out()))
    columns = []
    for column in estimator.location_columns:
        if isinstance(column, (int, np.integer)):
            if not 0 <= column < estimator.n_features_in_:
                raise ValueError(
                    f"location_columns: column {column} is out of range for "
                    f"{estimator.n_features_in_} features."
                )
            column = names_in[column] if names_in is not None else f"x{column}"
        name = str(column)
        if name not in numeric or name not in out:
            raise ValueError(
                f"location_columns: {name!r} is not a numeric, non-constant "
                f"column of X (numeric columns: {sorted(numeric)})."
            )
        columns.append(out.index(name))
    return columns
