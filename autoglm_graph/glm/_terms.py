"""The global GLM's terms: which columns of the design it reads, and how.

The preprocessor's design keeps every level of a categorical column: it is
the network's context. The global GLM reads a selection of its columns
(:class:`GLMTerms`): by default each categorical column's base level is left
out (treatment coding, as R and statsmodels code a factor), so the levels'
coefficients are contrasts with the base and are identified without a
penalty. Without an intercept the numeric columns are scaled but not centred
(centring would add an intercept to the model). With a formula
(:mod:`autoglm_graph.glm._formula`) the GLM's columns are the formula's, appended
to the preprocessed design after the network's context; so are the
penalised spline columns of ``splines`` (:mod:`autoglm_graph.glm._splines`).

The network varies the GLM's terms per row, and under treatment coding (with
an intercept, without a formula or splines) also each categorical column's
base level (:meth:`GLMTerms.vary_bases`): its head reads the all-levels
design, as with ``categorical_coding="all_levels"``. Its deviations are
reported in the GLM's (treatment) basis (:meth:`GLMTerms.reduce`): the base
level's deviation is added to the intercept's and subtracted from the other
levels' of its column, the same linear predictor for a row with one level.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ..preprocessing import TabularPreprocessor
from ..utils import torch
from ._formula import FormulaDesign
from ._splines import SplineDesign

__all__ = ["CATEGORICAL_CODINGS", "GLMTerms", "choose_columns"]

#: The values of the estimators' ``categorical_coding`` parameter.
CATEGORICAL_CODINGS = ("treatment", "all_levels")


@dataclass(frozen=True)
class GLMTerms:
    """The global GLM's columns of the preprocessed design.

    Attributes
    ----------
    columns : ndarray of int
        Positions, in the preprocessed design, of the GLM's terms.
    fit_intercept : bool
    names : ndarray of str
        The terms' names (``feature_names_out_``).
    shift, scale : ndarray of shape (n_terms,)
        Term ``j`` of the GLM's design is ``(u_j - shift[j]) / scale[j]`` in
        the user's units ``u_j`` (``shift`` is 0 without an intercept).
    add : ndarray of shape (n_terms,) or None
        Added to the selected design columns (to undo their centring when
        there is no intercept); None when nothing is added.
    full : bool
        Whether the GLM reads every design column as it is.
    formula : FormulaDesign or None
        The formula whose columns follow the network's context in the design
        (:meth:`design`); None: the GLM reads preprocessed columns.
    n_context : int or None
        The network's context columns at the front of a formula's or the
        splines' design.
    splines : SplineDesign or None
        The penalised spline columns that follow the context (the GLM's last
        terms); None without.
    varied_bases : tuple or None
        ``(base, levels)`` per categorical column whose base level the network
        varies too: the base's design column (not a GLM term) and its other
        levels' (GLM terms); None: the network varies the GLM's terms only.
    level_groups : tuple
        ``(positions, n_levels)`` per treatment-coded categorical column of a
        model with an intercept: its levels' positions among the terms (the
        base left out) and its number of levels, base included. Their penalty
        is on the levels' spread (:meth:`slope_penalty`).
    """

    columns: np.ndarray
    fit_intercept: bool
    names: np.ndarray
    shift: np.ndarray
    scale: np.ndarray
    add: np.ndarray | None
    full: bool
    formula: FormulaDesign | None = None
    n_context: int | None = None
    splines: SplineDesign | None = None
    varied_bases: tuple | None = None
    level_groups: tuple = ()

    @classmethod
    def from_preprocessor(
        cls, preprocessor: TabularPreprocessor, columns, fit_intercept: bool = True
    ) -> GLMTerms:
        """The terms at ``columns`` of a fitted preprocessor's design."""
        shift, scale = preprocessor.design_scaling()
        names = np.asarray(preprocessor.get_feature_names_out(), dtype=object)
        columns = np.asarray(columns, dtype=np.intp).reshape(-1)
        shift, scale = shift[columns], scale[columns]
        add = None
        if not fit_intercept and np.any(shift != 0):
            add, shift = shift / scale, np.zeros_like(shift)
        full = np.array_equal(columns, np.arange(len(names)))
        groups = ()
        if fit_intercept:
            where = {int(c): i for i, c in enumerate(columns)}
            groups = tuple(
                (tuple(where[int(c)] for c in block if int(c) in where), len(block))
                for block in preprocessor.categorical_blocks()
                if len(block) > 1 and sum(int(c) not in where for c in block) == 1
            )
        return cls(
            columns,
            bool(fit_intercept),
            names[columns],
            shift,
            scale,
            add,
            full,
            level_groups=groups,
        )

    @classmethod
    def from_formula(cls, formula: FormulaDesign, n_context: int) -> GLMTerms:
        """The formula's columns, after ``n_context`` columns of context."""
        columns = n_context + np.arange(formula.n_terms, dtype=np.intp)
        return cls(
            columns,
            formula.fit_intercept,
            formula.names,
            formula.shift,
            formula.scale,
            None,
            False,
            formula,
            int(n_context),
            level_groups=formula.level_groups() if formula.fit_intercept else (),
        )

    def with_splines(self, splines: SplineDesign, n_context: int) -> GLMTerms:
        """These terms and the spline columns appended after ``n_context``
        columns of context."""
        width = len(splines.shift)
        return replace(
            self,
            columns=np.r_[self.columns, n_context + np.arange(width)].astype(np.intp),
            names=np.asarray([*self.names, *splines.names], dtype=object),
            shift=np.r_[self.shift, splines.shift],
            scale=np.r_[self.scale, splines.scale],
            add=None if self.add is None else np.r_[self.add, np.zeros(width)],
            full=False,
            n_context=int(n_context),
            splines=splines,
        )

    @property
    def n_terms(self) -> int:
        return len(self.columns)

    def vary_bases(self, blocks) -> GLMTerms:
        """These terms, the network also varying the base level of each
        categorical column of ``blocks`` (its levels' design columns) whose
        base the GLM leaves out.

        For treatment coding with an intercept: the base's deviation moves
        into the intercept's when reported (:meth:`reduce`). Without an
        intercept there is none to absorb it, and a formula's or the splines'
        columns are not the preprocessor's: keep ``self`` there.
        """
        kept = {int(c) for c in self.columns}
        varied = []
        for block in blocks:
            dropped = [int(c) for c in block if int(c) not in kept]
            if len(dropped) == 1 and len(block) > 1:
                levels = tuple(int(c) for c in block if int(c) in kept)
                varied.append((dropped[0], levels))
        return replace(self, varied_bases=tuple(varied) or None)

    @property
    def network_columns(self) -> np.ndarray:
        """The design columns whose coefficients the network varies (the GLM's
        terms and the varied base levels), in design order."""
        if not self.varied_bases:
            return self.columns
        bases = [base for base, _ in self.varied_bases]
        return np.sort(np.r_[self.columns, bases]).astype(np.intp)

    @property
    def n_network_terms(self) -> int:
        """Slopes per output of the network's head."""
        return len(self.network_columns)

    def network_positions(self, positions) -> np.ndarray:
        """Positions in ``[intercept, *terms]`` -> in ``[intercept,
        *network_columns]``."""
        positions = np.asarray(positions, dtype=np.intp)
        if not self.varied_bases:
            return positions
        where = {int(c): i + 1 for i, c in enumerate(self.network_columns)}
        lookup = np.array([0, *(where[int(c)] for c in self.columns)], dtype=np.intp)
        return lookup[positions]

    def expand(self, theta: np.ndarray) -> np.ndarray:
        """``[..., 1 + n_terms]`` on the GLM's terms -> ``[..., 1 +
        n_network_terms]`` on the network's, 0 at the base levels."""
        if not self.varied_bases:
            return theta
        out = np.zeros((*theta.shape[:-1], 1 + self.n_network_terms), theta.dtype)
        out[..., self.network_positions(np.arange(1 + self.n_terms))] = theta
        return out

    @cached_property
    def _reduction(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keep, bases, move)`` of :meth:`reduce`, derived once (it runs
        at every training step): the positions of the GLM's terms and of the
        varied bases among the network's, and each base's ``[1 + n_terms]``
        row (+1 at the intercept, -1 at its column's other levels)."""
        keep = self.network_positions(np.arange(1 + self.n_terms))
        where = {int(c): i + 1 for i, c in enumerate(self.network_columns)}
        term = {int(c): i + 1 for i, c in enumerate(self.columns)}
        bases = np.array([where[b] for b, _ in self.varied_bases], dtype=np.intp)
        move = np.zeros((len(bases), 1 + self.n_terms))
        for i, (_, levels) in enumerate(self.varied_bases):
            move[i, 0] = 1.0
            move[i, [term[c] for c in levels]] = -1.0
        return keep, bases, move

    def reduce(self, delta):
        """The network's deviations ``[..., 1 + n_network_terms]`` (a tensor
        or an array) -> the GLM's terms' ``[..., 1 + n_terms]``.

        Each varied base level's deviation is added to the intercept's and
        subtracted from its column's other levels' (treatment coding): the
        linear predictor of a row with one level of each column is unchanged.
        """
        if not self.varied_bases:
            return delta
        keep, bases, move = self._reduction
        if isinstance(delta, np.ndarray):
            return delta[..., keep] + delta[..., bases] @ move.astype(delta.dtype)
        device = delta.device
        index = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
        moved = delta.index_select(-1, index(bases))
        return delta.index_select(-1, index(keep)) + moved @ torch.as_tensor(
            move, dtype=delta.dtype, device=device
        )

    def slope_penalty(self) -> np.ndarray:
        """The solver's penalty per unit of ``alpha``: the squared slopes in
        the user's units, a categorical column's levels measured from their
        mean.

        The slopes ``u_j = beta_j / scale_j`` in the user's units are
        penalised by ``sum_j u_j**2``, except that a treatment-coded column of
        ``L`` levels (:attr:`level_groups`) pays ``sum_l (e_l - mean(e))**2``
        on its levels' effects ``e`` (the base's 0 among them). That does not
        depend on which level is the base, so a ``DataFrame`` (base: the
        heaviest level), a formula's ``C(column)`` (base: the first level)
        and ``categorical_coding="all_levels"`` (every level, squared slopes,
        the intercept absorbing their mean) fit the same GLM at any
        ``alpha``. A vector (the diagonal) without such columns, else the
        ``[n_terms, n_terms]`` matrix.
        """
        inverse = 1.0 / self.scale
        if not self.level_groups:
            return inverse**2
        matrix = np.diag(inverse**2)
        for positions, n_levels in self.level_groups:
            d = np.zeros(self.n_terms)
            d[list(positions)] = inverse[list(positions)]
            # sum_l e_l**2 - (sum_l e_l)**2 / L, the base's e = 0.
            matrix -= np.outer(d, d) / n_levels
        return matrix

    def penalty_weights(self, alpha: float) -> np.ndarray:
        """The solver's per-term penalty: ``alpha`` times
        :meth:`slope_penalty`, plus the splines' smoothing penalty on their
        columns (a vector, or a matrix where :meth:`slope_penalty` is one)."""
        weights = alpha * self.slope_penalty()
        if self.splines is not None:
            smoothing = self.splines.penalty_weights()
            tail = np.arange(self.n_terms - len(smoothing), self.n_terms)
            if weights.ndim == 2:
                weights[tail, tail] += smoothing
            else:
                weights[tail] += smoothing
        return weights

    def design(self, context: np.ndarray, X) -> np.ndarray:
        """The design of rows ``X`` whose preprocessed columns are ``context``:
        ``context`` itself, or with the formula's or splines' columns appended."""
        if self.splines is not None:
            values = self.splines.transform(context.astype(np.float64, copy=False))
            return np.hstack([context, values.astype(context.dtype)])
        if self.formula is None:
            return context
        return np.hstack([context, self.formula.transform(X).astype(context.dtype)])

    def context(self, design: np.ndarray) -> np.ndarray:
        """The network's context columns of ``design`` (all without a formula
        or splines)."""
        if self.formula is None and self.splines is None:
            return design
        return design[:, : self.n_context]

    def select(self, design: np.ndarray) -> np.ndarray:
        """The GLM's design from the preprocessed one (the same array when the
        GLM reads every column as it is)."""
        out = design if self.full else design[:, self.columns]
        if self.add is not None:
            out = out + self.add.astype(out.dtype, copy=False)
        return out


def choose_columns(
    preprocessor: TabularPreprocessor,
    design: np.ndarray,
    sample_weight: np.ndarray,
    *,
    categorical_coding: str = "treatment",
    base_levels: dict | None = None,
    fit_intercept: bool = True,
) -> tuple[np.ndarray, dict]:
    """The design columns of the GLM's terms, and each categorical column's base.

    The base level of a categorical column is ``base_levels[column]``, or the
    level with the largest total ``sample_weight`` (ties: the first in sorted
    order). Without an intercept the first categorical column keeps all its
    levels (as R codes ``y ~ 0 + f``).

    Returns
    -------
    columns : ndarray of int
    base_levels : dict
        Categorical column -> its base level (as encoded, a string).
    """
    n_columns = design.shape[1]
    if categorical_coding == "all_levels":
        if base_levels:
            raise ValueError(
                "The 'base_levels' parameter needs categorical_coding='treatment'; "
                f"got categorical_coding='all_levels' and base_levels={base_levels!r}."
            )
        return np.arange(n_columns), {}
    names = list(preprocessor.categorical_features_)
    chosen = _check_base_levels(base_levels, names, preprocessor.categorical_levels())
    dropped, bases = [], {}
    keep_all = not fit_intercept
    blocks = preprocessor.categorical_blocks()
    for name, block, levels in zip(
        names, blocks, preprocessor.categorical_levels(), strict=True
    ):
        if len(block) < 2:
            continue
        if keep_all:  # the first factor stands in for the intercept
            keep_all = False
            continue
        if name in chosen:
            base = int(np.flatnonzero(levels == chosen[name])[0])
        else:
            base = int(np.argmax(sample_weight @ design[:, block]))
        dropped.append(block[base])
        bases[name] = str(levels[base])
    return np.setdiff1d(np.arange(n_columns), dropped), bases


def _check_base_levels(base_levels, names: list, levels: list) -> dict:
    """``base_levels`` with each level as encoded; ValueError naming what is
    unknown."""
    if base_levels is None:
        return {}
    if not isinstance(base_levels, dict):
        raise ValueError(
            "The 'base_levels' parameter must be None or a dict of categorical "
            f"column -> level; got {base_levels!r}."
        )
    by_name = {str(n): (n, lv) for n, lv in zip(names, levels, strict=True)}
    unknown = [c for c in base_levels if str(c) not in by_name]
    if unknown:
        raise ValueError(
            f"The 'base_levels' parameter names column(s) {unknown!r} that are "
            f"not categorical columns of X (categorical columns: {names!r})."
        )
    chosen = {}
    for column, level in base_levels.items():
        name, encoded = by_name[str(column)]
        if str(level) not in set(encoded.tolist()):
            raise ValueError(
                f"The 'base_levels' parameter gives level {level!r} for column "
                f"{column!r}, which is not one of its levels "
                f"{[str(v) for v in encoded]!r}."
            )
        chosen[name] = str(level)
    return chosen
