"""Constraints on the per-row coefficients: terms held global, signs kept.

The estimators' ``global_terms`` and ``local_sign`` are resolved against the
fitted design (:func:`coefficient_map`) into a :class:`CoefficientMap`, the
last step of the network's head: it maps the head's raw output to the
coefficient deviations that enter the linear predictor
(:func:`autoglm_graph.network.rows.linear_predictor`), in training and in prediction
alike. The constraints therefore hold by construction, for any row:

- a term held global gets no deviation (exactly 0.0); the intercept held
  global gets the deviation that keeps it constant in the user's units
  (``sum_j delta_j * shift_j / scale_j``, the slopes' deviations moved to the
  origin of the user's columns);
- a signed term's coefficient is ``theta_global * exp(delta)``: the head's
  raw output is a log ratio, so the coefficient keeps the global GLM's sign
  (which must be the one asked for). At ``delta = 0`` (the zero-initialised
  head) the model is the global GLM, as without constraints.

The design's columns are ``(u - shift) / scale`` of the user's columns with
``scale > 0``, so a sign on the design is the sign in the user's units.

Under treatment coding the network also varies each categorical column's base
level, reported in the intercept's and the other levels' deviations
(:meth:`autoglm_graph.glm._terms.GLMTerms.reduce`). That would break both
constraints on a level (a level held global would move with its base, a
signed one leave ``theta * exp(delta)``) and on the intercept, so the network
varies no base level of a column with a level named in either, and none at
all when the intercept is held global (:func:`constrained_positions`): there
the reported deviations are the map's, as without a varied base.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..utils import torch

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "SIGNS",
    "CoefficientMap",
    "check_constraint_params",
    "coefficient_map",
    "constrained_positions",
]

#: The values of ``local_sign``.
SIGNS = ("positive", "negative")


@dataclass(frozen=True)
class CoefficientMap:
    """The head's raw output -> per-row coefficient deviations.

    Attributes
    ----------
    held : ndarray of int
        Positions (0: intercept, ``1 + j``: design column ``j``) whose
        deviation is 0.
    signed : ndarray of int
        Positions whose coefficient is ``theta * exp(raw)``.
    theta : ndarray of shape (n_outputs, len(signed))
        The global GLM's coefficients at ``signed`` (on the design).
    intercept_tie : ndarray of shape (n_features,) or None
        ``shift / scale`` of the design columns when the intercept is held
        global in the user's units; None otherwise.
    """

    held: np.ndarray
    signed: np.ndarray
    theta: np.ndarray
    intercept_tie: np.ndarray | None = None
    #: float32 resolves 6e-8 near 1: a log ratio of at least -15 (exp(-15) =
    #: 3e-7) keeps ``exp(delta) - 1`` above -1, so a signed coefficient never
    #: rounds to 0.
    log_ratio_min: float = -15.0

    def apply(self, raw: Tensor) -> Tensor:
        """Deviations ``[n, n_outputs, 1 + p]`` from the raw output (same shape)."""
        device, dtype = raw.device, raw.dtype
        free = np.ones(raw.shape[2], dtype=bool)
        free[self.held] = False
        free[self.signed] = False
        zero = torch.zeros((), dtype=dtype, device=device)
        out = torch.where(torch.as_tensor(free, device=device), raw, zero)
        if len(self.signed):
            index = torch.as_tensor(self.signed, device=device)
            theta = torch.as_tensor(self.theta, dtype=dtype, device=device)
            ratio = torch.expm1(
                raw.index_select(2, index).clamp(min=self.log_ratio_min)
            )
            out = out.index_copy(2, index, theta * ratio)
        if self.intercept_tie is not None:
            tie = torch.as_tensor(self.intercept_tie, dtype=dtype, device=device)
            slopes = out[:, :, 1:]
            out = torch.cat([(slopes @ tie).unsqueeze(2), slopes], dim=2)
        return out


def check_constraint_params(global_terms, local_sign) -> None:
    """The types of ``global_terms`` and ``local_sign`` (names are checked
    against the design by :func:`coefficient_map`)."""
    if global_terms is not None and (
        isinstance(global_terms, (str, bytes, dict))
        or not hasattr(global_terms, "__iter__")
        or not all(isinstance(t, str) for t in global_terms)
    ):
        raise ValueError(
            "The 'global_terms' parameter must be None or a list of term or "
            f"column names (str); got {global_terms!r}."
        )
    if local_sign is None:
        return
    if not isinstance(local_sign, dict) or not all(
        isinstance(t, str) for t in local_sign
    ):
        raise ValueError(
            "The 'local_sign' parameter must be None or a dict of term or column "
            f"names (str) to 'positive' or 'negative'; got {local_sign!r}."
        )
    for term, sign in local_sign.items():
        if sign not in SIGNS:
            raise ValueError(
                "The 'local_sign' parameter must map each term to 'positive' or "
                f"'negative'; got {sign!r} for {term!r}."
            )


def coefficient_map(
    global_terms, local_sign, preprocessor, glm, terms=None, *, hold_bases=False
):
    """The :class:`CoefficientMap` of the parameters on a fitted design.

    Parameters
    ----------
    global_terms : list of str or None
    local_sign : dict of str to {"positive", "negative"} or None
    preprocessor : TabularPreprocessor
        Fitted; names its terms and columns.
    glm : GlobalGLM
        The global GLM on its terms.
    terms : GLMTerms or None, default=None
        The design columns the global GLM reads (:mod:`autoglm_graph.glm._terms`);
        None: all of them, with an intercept.
    hold_bases : bool, default=False
        Hold every spline column's basis global, as ``global_terms`` naming
        the column holds it, but keep its linear term free (the estimators'
        ``splines_local="linear"``). Nothing to hold without splines.

    Returns
    -------
    CoefficientMap or None
        None without constraints (the head's output is the deviation).

    Raises
    ------
    ValueError
        For a name that is neither a term, an input column nor
        ``"intercept"``; a sign on a term held global or on the intercept; a
        global coefficient (any output's) of the other sign than asked, or 0.
    """
    hold_bases = hold_bases and terms is not None and terms.splines is not None
    if not global_terms and not local_sign and not hold_bases:
        return None
    resolve = _TermResolver(preprocessor, terms)
    held = resolve.all_bases() if hold_bases else set()
    for name in global_terms or []:
        held |= resolve("global_terms", name)
    signs: dict[int, float] = {}
    for name, sign in (local_sign or {}).items():
        for position in resolve("local_sign", name):
            if position == 0:
                raise ValueError(
                    "The 'local_sign' parameter applies to slopes; the intercept "
                    f"changes sign with the origin of the columns; got {name!r}."
                )
            if position in held:
                raise ValueError(
                    "The 'local_sign' parameter names a term held global (by "
                    "global_terms, or a spline basis by splines_local='linear'): "
                    f"its coefficient cannot vary; got {name!r} "
                    f"(term {resolve.names[position]!r})."
                )
            signs[position] = 1.0 if sign == "positive" else -1.0
    signed = np.array(sorted(signs), dtype=np.int64)
    theta = glm.coef[:, signed - 1]
    _check_global_signs(theta, signed, signs, resolve.names)
    held = sorted(held)
    if terms is not None and terms.varied_bases:  # positions in the network's
        held = terms.network_positions(np.array(held, dtype=np.int64))
        signed = terms.network_positions(signed)
    tie = None
    if 0 in held:
        shift, scale = (
            preprocessor.design_scaling()
            if terms is None
            else (terms.shift, terms.scale)
        )
        tie = shift / scale
    return CoefficientMap(
        held=np.array(held, dtype=np.int64),
        signed=signed,
        theta=np.asarray(theta, dtype=np.float64),
        intercept_tie=tie,
    )


def constrained_positions(global_terms, local_sign, preprocessor, terms) -> set:
    """The positions in ``[intercept, *terms]`` that ``global_terms`` and
    ``local_sign`` name (an error for an unknown name, as
    :func:`coefficient_map`)."""
    resolve = _TermResolver(preprocessor, terms)
    positions = set()
    for name in global_terms or []:
        positions |= resolve("global_terms", name)
    for name in local_sign or {}:
        positions |= resolve("local_sign", name)
    return positions


def _check_global_signs(theta, signed, signs, names) -> None:
    for k, row in enumerate(theta):
        for position, value in zip(signed, row, strict=True):
            want = signs[int(position)]
            if not value * want > 0:
                output = f" (output {k})" if theta.shape[0] > 1 else ""
                sign = "positive" if want > 0 else "negative"
                raise ValueError(
                    f"The 'local_sign' parameter asks for a {sign} coefficient of "
                    f"{names[position]!r}, but the global GLM's coefficient is "
                    f"{value:.6g}{output}: a per-row coefficient of that sign "
                    "cannot nest the global GLM. Drop the constraint, or hold the "
                    "term global (global_terms)."
                )


class _TermResolver:
    """Names -> positions in ``[intercept, *feature_names_out]``.

    A term name first (a numeric column's slope is named as the column, its
    missing indicator ``missingindicator_<column>``), then a categorical input
    column (all its levels' terms), then ``"intercept"``.
    """

    def __init__(self, preprocessor, terms=None) -> None:
        if terms is not None and terms.formula is not None:
            self._from_formula(terms)
            return
        design_names = [str(n) for n in preprocessor.get_feature_names_out()]
        splines = None if terms is None else terms.splines
        if splines is not None:  # the basis columns follow the context
            design_names += splines.names
        columns = range(len(design_names)) if terms is None else terms.columns
        # Design column -> position among the GLM's terms (a base level has none).
        position = {int(c): i + 1 for i, c in enumerate(columns)}
        self.has_intercept = terms is None or terms.fit_intercept
        self.names = ["intercept", *(design_names[int(c)] for c in columns)]
        self.terms = {name: {i} for i, name in enumerate(self.names) if i}
        # A spline column held global holds its basis too (a sign is its
        # linear term's).
        self.bases = {}
        if splines is not None:
            self.bases = {
                name: {self.names.index(splines.names[j]) for j in block}
                for name, block in splines.blocks.items()
            }
        blocks = preprocessor.categorical_blocks()
        self.columns = {
            str(column): {position[int(j)] for j in block if int(j) in position}
            for column, block in zip(
                preprocessor.categorical_features_, blocks, strict=True
            )
        }

    def all_bases(self) -> set:
        """The positions of every spline column's basis (none without)."""
        return set().union(*self.bases.values())

    def _from_formula(self, terms) -> None:
        """A formula's terms: its column names, then its terms' names
        (``C(region)``: all its levels' columns)."""
        self.has_intercept = terms.fit_intercept
        self.bases = {}
        self.names = ["intercept", *map(str, terms.names)]
        self.terms = {name: {i} for i, name in enumerate(self.names) if i}
        self.columns = {
            term: {j + 1 for j in positions}
            for term, positions in terms.formula.term_columns.items()
        }

    def __call__(self, param: str, name: str) -> set:
        if name in self.terms:
            if param == "global_terms":
                return self.terms[name] | self.bases.get(name, set())
            return self.terms[name]
        if name in self.columns:
            return self.columns[name]
        if name == "intercept":
            if not self.has_intercept:
                raise ValueError(
                    f"The '{param}' parameter names 'intercept', but the model "
                    "has none (fit_intercept=False)."
                )
            return {0}
        raise ValueError(
            f"The '{param}' parameter must name terms (feature_names_out_), "
            f"categorical input columns or 'intercept'; got {name!r}. Terms: "
            f"{', '.join(self.names[1:])}."
        )
