"""Fitting the location effect of ``location_columns`` (:class:`_LocationMixin`).

The effect itself (its search and its selection) is
:mod:`autoglm_graph.location`'s; this mixin maps the estimator's parameters
and fitted preprocessor onto it during ``fit``.
"""

from __future__ import annotations

import numpy as np

from ..network import fit_location_effect


class _LocationMixin:
    """``fit``'s location effect step of :class:`~autoglm_graph._base.BaseGraphGLM`."""

    def _location_design_columns(self) -> list[int]:
        """Design columns of ``location_columns`` (numeric columns only)."""
        names_in = getattr(self, "feature_names_in_", None)
        numeric = set(map(str, self.preprocessor_.numeric_features_))
        out = list(map(str, self.preprocessor_.get_feature_names_out()))
        columns = []
        for column in self.location_columns:
            if isinstance(column, (int, np.integer)):
                if not 0 <= column < self.n_features_in_:
                    raise ValueError(
                        f"location_columns: column {column} is out of range for "
                        f"{self.n_features_in_} features."
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

    def _fit_location(
        self, design, y_model, sample_weight, offset, train_pos, val_pos, groups
    ) -> np.ndarray | None:
        """Fit ``location_effect_`` (:mod:`autoglm_graph.location`); returns the
        linear predictor's shift of every row (None without the effect)."""
        if self.location_columns is None:
            return None
        if self._n_outputs != 1:
            raise ValueError(
                "location_columns needs a single-output family; the multinomial "
                "family has one linear predictor per class."
            )
        if groups is not None:
            raise ValueError(
                "location_columns cannot be combined with groups yet: a row's "
                "neighbourhood would hold rows of its own group."
            )
        columns = self._location_design_columns()
        predictor = self.predictor()
        eta = predictor.global_eta(design, offset)[:, 0]
        locations = predictor.locations(design, columns)

        def rows(positions):
            if positions is None or not len(positions):
                return None
            return (
                locations[positions],
                y_model[positions],
                eta[positions],
                sample_weight[positions],
            )

        effect, train_shift, report = fit_location_effect(
            self.family_,
            columns,
            rows(train_pos),
            rows(val_pos),
            self.location_neighbors,
        )
        self.location_report_ = report
        if effect is None:
            return None
        self.location_effect_ = effect
        shift = np.zeros(design.shape[0])
        shift[train_pos] = train_shift
        if val_pos is not None and len(val_pos):
            shift[val_pos] = effect.shift(locations[val_pos])
        return shift
