"""Choosing the global GLM's terms during ``fit`` (:class:`_TermsMixin`).

Which columns of the preprocessed design the GLM reads (:mod:`autoglm_graph._terms`:
treatment coding, base levels), or a formula's columns
(:mod:`autoglm_graph._formula`), and the spline bases of ``splines`` with their
smoothing penalty (:mod:`autoglm_graph._splines`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..glm import FormulaDesign, GLMTerms, SplineDesign, choose_columns, choose_penalty
from ..network import constrained_positions


class _TermsMixin:
    """``fit``'s choice of the global GLM's terms of
    :class:`~autoglm_graph._base.BaseGraphGLM`."""

    def _smoothing_penalty(self, glm_design, y_model, terms, glm_kwargs) -> GLMTerms:
        """The terms with the splines' penalty of least GCV score
        (``splines_penalty_``, each penalty's score in ``splines_scores_``)."""
        splines = terms.splines

        def weights(lam):
            trial = replace(terms, splines=splines.with_penalty(lam))
            return trial.penalty_weights(self.alpha)

        penalty, self.splines_scores_ = choose_penalty(
            glm_design,
            y_model,
            self.family_,
            weights,
            n_outputs=self._n_outputs,
            sample_weight=glm_kwargs["sample_weight"],
            offset=glm_kwargs["offset"],
            fit_intercept=terms.fit_intercept,
        )
        self.splines_penalty_ = penalty
        self._terms = replace(terms, splines=splines.with_penalty(penalty))
        return self._terms

    def _add_splines(self, terms: GLMTerms, design) -> GLMTerms:
        """``terms`` with the spline bases of the ``splines`` parameter's
        numeric columns appended (themselves when it is False)."""
        chosen = _splines_of(self)
        if chosen is False:
            return terms
        names = [str(n) for n in self.preprocessor_.get_feature_names_out()]
        numeric = set(map(str, self.preprocessor_.numeric_features_))
        in_glm = {names[int(c)]: int(c) for c in terms.columns}
        candidates = {
            name: position
            for name, position in in_glm.items()
            if name in numeric and len(np.unique(design[:, position])) >= 6
        }
        if chosen is True:
            selected = list(candidates)
        else:
            unknown = [c for c in chosen if c not in candidates]
            if unknown:
                raise ValueError(
                    f"The 'splines' parameter names column(s) {unknown!r} that are "
                    "not numeric terms of the GLM with at least 6 distinct values "
                    f"(those are: {sorted(candidates)!r})."
                )
            selected = list(dict.fromkeys(chosen))
        if not selected:
            return terms
        splines = SplineDesign.fit(
            design,
            [candidates[c] for c in selected],
            selected,
            terms.fit_intercept,
        )
        self._terms = terms.with_splines(splines, design.shape[1])
        self.feature_names_out_ = self._terms.names
        return self._terms

    def _vary_base_levels(self, terms: GLMTerms) -> GLMTerms:
        """``terms`` with the network also varying each categorical column's
        base level under treatment coding (:meth:`GLMTerms.vary_bases`), as it
        varies every level under ``categorical_coding="all_levels"``.

        Not without an intercept (none to absorb the base's deviation), with a
        formula or splines (the GLM's columns are not the preprocessor's), for
        a column with a level in ``global_terms`` or ``local_sign``, nor at all
        with the intercept in ``global_terms``: there the network varies the
        GLM's terms only, so that the constraints hold on the reported
        coefficients (:mod:`autoglm_graph.constraints`).
        """
        if (
            self.categorical_coding != "treatment"
            or not terms.fit_intercept
            or terms.formula is not None
            or terms.splines is not None
        ):
            return terms
        touched = constrained_positions(
            getattr(self, "global_terms", None),
            getattr(self, "local_sign", None),
            self.preprocessor_,
            terms,
        )
        if 0 in touched:
            return terms
        columns = {int(terms.columns[p - 1]) for p in touched}
        blocks = [
            block
            for block in self.preprocessor_.categorical_blocks()
            if not columns & {int(c) for c in block}
        ]
        self._terms = terms.vary_bases(blocks)
        return self._terms

    def _choose_terms(self, design, sample_weight, X) -> GLMTerms:
        """The global GLM's terms (``_terms``), ``feature_names_out_`` and
        ``base_levels_``: the formula's columns of ``X``, or a choice among
        the preprocessed ``design``'s."""
        if self.formula is not None:
            formula = FormulaDesign.fit(
                self.formula,
                X,
                self.fit_intercept,
                full_rank=self.categorical_coding == "treatment",
            )
            self.base_levels_ = {}
            self._terms = GLMTerms.from_formula(formula, design.shape[1])
            self.feature_names_out_ = self._terms.names
            return self._terms
        if not self.fit_intercept and design.shape[1] == 0:
            raise ValueError(
                "The 'fit_intercept' parameter is False and X has no feature that "
                "varies: the model would have no term at all. Pass columns that "
                "vary, or fit_intercept=True (the intercept-only GLM)."
            )
        columns, self.base_levels_ = choose_columns(
            self.preprocessor_,
            design,
            sample_weight,
            categorical_coding=self.categorical_coding,
            base_levels=self.base_levels,
            fit_intercept=self.fit_intercept,
        )
        self._terms = GLMTerms.from_preprocessor(
            self.preprocessor_, columns, self.fit_intercept
        )
        self.feature_names_out_ = self._terms.names
        return self._terms


def _splines_of(estimator):
    """The ``splines`` parameter (False for an estimator pickled before it)."""
    return getattr(estimator, "splines", False)


def _splines_local_of(estimator):
    """The ``splines_local`` parameter ("all", the behaviour before it, for an
    estimator pickled before it)."""
    return getattr(estimator, "splines_local", "all")
