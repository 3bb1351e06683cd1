"""Penalised spline main effects of the global GLM (the estimators' ``splines``).

A numeric column ``x`` chosen for a spline keeps its linear term (the
preprocessed column, as without splines) and gains the non-linear part of a
cubic B-spline basis ``B`` on uniform knots over its training range
(P-splines, Eilers & Marx 1996), penalised by ``lam`` times the sum of squared
second differences of the B-spline coefficients, ``lam * ||D b||^2``.

The penalty is made diagonal by a change of basis: with ``D'D = U diag(e) U'``
the columns ``B U_w`` of the eigenvectors with ``e > 0`` carry the penalty
``lam * e`` each; the null space of ``D`` (coefficients constant or linear in
the knot index, i.e. functions ``1`` and ``x`` on uniform knots) is the
intercept and the linear term. So the existing diagonal-ridge solver
(:func:`~autoglm_graph.glm._solver.fit_global_glm`) solves the penalised problem
exactly, in float64, and ``lam -> inf`` is the linear GLM. One ``lam`` serves
every spline column; it is chosen by generalised cross-validation on the
global GLM (:func:`choose_penalty`). Beyond the training range the basis is
extended linearly (``extrapolation="linear"``): each shape continues with its
slope at the boundary, as a natural spline does, and the linear GLM is its
limit there too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
from scipy import linalg
from sklearn.preprocessing import SplineTransformer

from ._solver import _Objective, fit_global_glm

__all__ = [
    "SPLINES_LOCAL",
    "SplineDesign",
    "SplineTerm",
    "check_splines",
    "choose_penalty",
]

#: The values of the estimators' ``splines_local``: the network varies each
#: spline column's linear term only (its basis held global), or every term.
SPLINES_LOCAL = ("linear", "all")


def check_splines(splines) -> None:
    """The type of the ``splines`` parameter (its names are checked in fit)."""
    if splines is True or splines is False:
        return
    if isinstance(splines, (str, bytes)) or not hasattr(splines, "__iter__"):
        raise ValueError(
            "The 'splines' parameter must be False, True or a list of numeric "
            f"column names; got {splines!r}."
        )
    if not all(isinstance(c, str) for c in splines):
        raise ValueError(
            f"The 'splines' parameter must list column names; got {splines!r}."
        )


@dataclass(frozen=True)
class SplineTerm:
    """One column's penalised basis.

    Attributes
    ----------
    name : str
        The preprocessed column's name (its linear term's).
    position : int
        Its column in the preprocessed design (standardised units).
    breakpoints : ndarray
        The uniform knots, in the design's units.
    rotation : ndarray of shape (n_basis, n_wiggly)
        ``U_w``: the B-spline coefficients of each penalised direction.
    eigenvalues : ndarray of shape (n_wiggly,)
        ``e``: each direction's share of ``||D b||^2``.
    """

    name: str
    position: int
    breakpoints: np.ndarray
    rotation: np.ndarray
    eigenvalues: np.ndarray
    #: The B-splines' degree (cubic) and the penalty's order of differences
    #: (second: the constant and the linear term go unpenalised), facts of a
    #: saved state too.
    degree: ClassVar[int] = 3
    difference_order: ClassVar[int] = 2

    @classmethod
    def fit(cls, name: str, position: int, x: np.ndarray, n_knots: int) -> SplineTerm:
        breakpoints = np.linspace(x.min(), x.max(), n_knots)
        n_basis = n_knots + cls.degree - 1
        D = np.diff(np.eye(n_basis), n=cls.difference_order, axis=0)
        eigenvalues, vectors = linalg.eigh(D.T @ D)
        wiggly = eigenvalues > 1e-9 * eigenvalues.max()
        return cls(
            str(name),
            int(position),
            breakpoints,
            vectors[:, wiggly],
            eigenvalues[wiggly],
        )

    def basis(self, x: np.ndarray) -> np.ndarray:
        """``B(x) U_w``: the penalised columns of rows with values ``x``."""
        knots = self.breakpoints[:, None]
        spline = SplineTransformer(
            knots=knots, degree=self.degree, extrapolation="linear"
        ).fit(knots)
        return spline.transform(np.asarray(x, np.float64)[:, None]) @ self.rotation

    def state(self) -> dict:
        return {
            "name": self.name,
            "position": self.position,
            "breakpoints": [float(v) for v in self.breakpoints],
            "rotation": [[float(v) for v in row] for row in self.rotation],
            "eigenvalues": [float(v) for v in self.eigenvalues],
        }

    @classmethod
    def from_state(cls, state: dict) -> SplineTerm:
        rotation = np.asarray(state["rotation"], dtype=np.float64)
        eigenvalues = np.asarray(state["eigenvalues"], dtype=np.float64)
        breakpoints = np.asarray(state["breakpoints"], dtype=np.float64)
        n_basis = len(breakpoints) + cls.degree - 1
        if rotation.shape != (n_basis, len(eigenvalues)) or np.any(eigenvalues <= 0):
            raise ValueError(
                "A spline's rotation must match its knots and eigenvalues."
            )
        if len(breakpoints) < 2 or np.any(np.diff(breakpoints) <= 0):
            raise ValueError("A spline's breakpoints must increase.")
        return cls(
            str(state["name"]),
            int(state["position"]),
            breakpoints,
            rotation,
            eigenvalues,
        )


@dataclass(frozen=True)
class SplineDesign:
    """The spline columns appended to the design, and their penalty.

    Attributes
    ----------
    terms : tuple of SplineTerm
    shift, scale : ndarray of shape (n_columns,)
        Appended column ``j`` is ``(z_j - shift[j]) / scale[j]`` of the basis
        column ``z_j`` (the user's unit of its coefficient).
    penalty : float
        ``lam``, the smoothing penalty in the solver's scaling (the
        deviance's mean over rows).
    """

    terms: tuple
    shift: np.ndarray
    scale: np.ndarray
    penalty: float

    @classmethod
    def fit(
        cls,
        context: np.ndarray,
        positions,
        names,
        fit_intercept: bool,
        max_knots: int = 12,
    ) -> SplineDesign:
        """The bases of design columns ``positions`` (named ``names``), with
        ``min(max_knots, distinct values - 2)`` knots each, standardised."""
        terms = []
        for position, name in zip(positions, names, strict=True):
            x = context[:, position]
            n_knots = min(max_knots, len(np.unique(x)) - 2)
            terms.append(SplineTerm.fit(name, position, x, n_knots))
        values = np.hstack([t.basis(context[:, t.position]) for t in terms])
        shift = values.mean(axis=0) if fit_intercept else np.zeros(values.shape[1])
        spread = values.std(axis=0)
        scale = np.where(spread > 1e-12, spread, 1.0)
        return cls(tuple(terms), shift, scale, 0.0)

    @property
    def names(self) -> list[str]:
        return [
            f"{t.name}_s{k + 1}" for t in self.terms for k in range(len(t.eigenvalues))
        ]

    @property
    def blocks(self) -> dict:
        """Column name -> positions of its basis among the appended columns."""
        blocks, start = {}, 0
        for t in self.terms:
            blocks[t.name] = list(range(start, start + len(t.eigenvalues)))
            start += len(t.eigenvalues)
        return blocks

    def transform(self, context: np.ndarray) -> np.ndarray:
        """The standardised float64 spline columns of rows whose
        preprocessed design is ``context``."""
        values = np.hstack([t.basis(context[:, t.position]) for t in self.terms])
        return (values - self.shift) / self.scale

    def penalty_weights(self, penalty: float | None = None) -> np.ndarray:
        """``lam * e / scale**2`` per appended column (``lam`` is
        :attr:`penalty` unless given)."""
        lam = self.penalty if penalty is None else penalty
        eigenvalues = np.concatenate([t.eigenvalues for t in self.terms])
        return lam * eigenvalues / self.scale**2

    def with_penalty(self, penalty: float) -> SplineDesign:
        return replace(self, penalty=float(penalty))

    def state(self) -> dict:
        """A JSON-able description from which :meth:`from_state` rebuilds it."""
        return {
            "terms": [t.state() for t in self.terms],
            "shift": [float(v) for v in self.shift],
            "scale": [float(v) for v in self.scale],
            "penalty": float(self.penalty),
        }

    @classmethod
    def from_state(cls, state: dict) -> SplineDesign:
        terms = tuple(SplineTerm.from_state(t) for t in state["terms"])
        shift = np.asarray(state["shift"], dtype=np.float64)
        scale = np.asarray(state["scale"], dtype=np.float64)
        width = sum(len(t.eigenvalues) for t in terms)
        if not (len(shift) == len(scale) == width) or np.any(scale <= 0):
            raise ValueError("The splines' shift and scale must match their columns.")
        penalty = float(state["penalty"])
        if not penalty >= 0:
            raise ValueError("The splines' penalty must be >= 0.")
        return cls(terms, shift, scale, penalty)


def choose_penalty(
    design: np.ndarray,
    y: np.ndarray,
    family,
    penalty_weights,
    *,
    n_outputs: int = 1,
    sample_weight: np.ndarray | None = None,
    offset: np.ndarray | None = None,
    fit_intercept: bool = True,
    penalties=tuple(float(f"1e{k}") for k in range(-7, 2)),
    max_rows: int = 20_000,
    random_state: int = 0,
) -> tuple[float, dict]:
    """The smoothing penalty of least GCV score on the global GLM.

    Each ``lam`` of ``penalties`` is an exact penalised GLM solve with
    weights ``penalty_weights(lam)``; its score is ``n * D / (n - edf)**2``
    (the mean deviance ``D``, ``edf = tr((H + S)^-1 H)`` of the penalised
    Hessian, as mgcv's GCV for a GLM), on at most ``max_rows`` rows drawn
    with ``random_state``.

    Returns
    -------
    penalty : float
    scores : dict of float to float
        Each penalty's GCV score.
    """
    n = design.shape[0]
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
    if n > max_rows:
        rows = np.sort(np.random.default_rng(random_state).permutation(n)[:max_rows])
        design, y, w = design[rows], y[rows], w[rows]
        offset = None if offset is None else offset[rows]
        n = max_rows
    scores = {}
    glm = None  # each solve starts from the previous penalty's solution
    for lam in penalties:
        weights = penalty_weights(lam)
        glm = fit_global_glm(
            design,
            y,
            family,
            n_outputs=n_outputs,
            sample_weight=w,
            offset=offset,
            alpha=1.0,
            penalty_weights=weights,
            fit_intercept=fit_intercept,
            start=glm,
        )
        scores[float(lam)] = _gcv(
            design, y, family, glm, w, offset, weights, n_outputs, fit_intercept
        )
    best = min(scores, key=lambda lam: (scores[lam], -lam))
    return best, scores


def _gcv(design, y, family, glm, w, offset, weights, n_outputs, intercept) -> float:
    obj = _Objective(design, y, family, n_outputs, w, offset, 1.0, weights, intercept)
    B = glm.coef
    if intercept:
        B = np.concatenate([glm.coef, glm.intercept[:, None]], axis=1)
    value, _, H = obj.parts(B)
    mean_deviance = 2.0 * (value - obj.penalty(B))
    unpenalised = H - obj.penalty_hessian()
    edf = float(np.trace(linalg.pinvh(H) @ unpenalised))
    n = design.shape[0]
    return n * mean_deviance / max(n - edf, 1.0) ** 2
