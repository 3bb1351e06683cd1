"""The global GLM's design from a formula (the estimators' ``formula``).

A formula such as ``"y ~ age + C(region) + bs(age, df=4) + age:density"`` is
parsed and materialised by formulaic (the library glum uses), as glum reads
it: the left side names the target, a column of ``X``; the right side's
columns are the global GLM's terms. The network's context is not read from
the formula: it stays the preprocessed columns of ``X`` (the target column
left out). :class:`FormulaDesign` keeps formulaic's fitted state (levels,
spline knots, centring) so that new rows get the columns of ``fit``.

Numeric columns of the formula's matrix are standardised for the solver as
the preprocessor standardises numeric columns (0/1 columns, e.g. levels, are
kept as they are); the penalty stays in the user's units through the
standardisation's ``scale`` (:class:`~autoglm_graph.glm._terms.GLMTerms`).
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..preprocessing import UnseenCategoryWarning
from ..utils import LazyModule

if TYPE_CHECKING:
    import formulaic
    from formulaic import ModelSpec
else:
    # Imported at a formula's first use: a model without one loads and
    # predicts without it (30 ms of a fresh process).
    formulaic = LazyModule("formulaic")

__all__ = ["FormulaDesign", "check_formula", "left_side_columns", "split_target"]

_INTERCEPT = "Intercept"

#: The functions a saved formula may call: formulaic's transforms and
#: contrasts (a loaded model file must not run arbitrary code).
SAFE_FUNCTIONS = frozenset(
    {"C", "I", "Q", "bs", "cr", "cs", "cc", "te", "center", "scale", "poly"}
    | {"contr", "treatment", "sum", "helmert", "diff", "poly", "custom"}
    | {"np", "numpy", "abs", "min", "max", "round", "True", "False", "None"}
)
#: numpy's functions a saved formula may call besides its ufuncs.
SAFE_NUMPY = frozenset({"clip", "where", "round", "abs", "pi", "e"})


def check_formula(formula) -> None:
    """The type of the ``formula`` parameter (its names are checked in fit)."""
    if formula is not None and not isinstance(formula, str):
        raise ValueError(
            "The 'formula' parameter must be None or a formula string such as "
            f"'y ~ age + C(region)'; got {type(formula).__name__} {formula!r}."
        )


def left_side_columns(formula: str) -> list[str]:
    """The columns that the left side of ``formula`` reads, sorted (empty
    without a left side); ValueError when it does not parse."""
    check_formula(formula)
    try:
        parsed = formulaic.Formula(formula)
    except (formulaic.errors.FormulaicError, SyntaxError, ValueError) as exc:
        raise ValueError(
            f"The 'formula' parameter could not be parsed: {formula!r} ({exc})."
        ) from exc
    lhs = getattr(parsed, "lhs", None)
    return [] if lhs is None else sorted(map(str, lhs.required_variables))


def _parse(formula: str, fit_intercept: bool):
    """(left side or None, right side) of ``formula``; ValueError when it
    does not parse or its intercept contradicts ``fit_intercept``."""
    try:
        parser = formulaic.parser.DefaultFormulaParser(include_intercept=fit_intercept)
        parsed = formulaic.Formula(formula, _parser=parser)
    except (formulaic.errors.FormulaicError, SyntaxError, ValueError) as exc:
        raise ValueError(
            f"The 'formula' parameter could not be parsed: {formula!r} ({exc})."
        ) from exc
    lhs = getattr(parsed, "lhs", None)
    rhs = parsed.rhs if lhs is not None else parsed
    if lhs is not None and len(lhs) != 1:
        raise ValueError(
            "The 'formula' parameter must have one term on its left side (the "
            f"target); got {formula!r}."
        )
    has_intercept = any(str(term) == "1" for term in rhs)
    if has_intercept != bool(fit_intercept):
        raise ValueError(
            f"The 'formula' parameter {formula!r} "
            f"{'has' if has_intercept else 'removes'} an intercept, which "
            f"contradicts fit_intercept={fit_intercept}; set the intercept with "
            "fit_intercept (as glum does), not in the formula."
        )
    return lhs, rhs


def _check_columns(variables, X: pd.DataFrame, formula: str) -> None:
    missing = sorted(str(v) for v in variables if v not in X.columns)
    if missing:
        raise ValueError(
            f"The 'formula' parameter names column(s) {missing!r} that X does not "
            f"have (formula {formula!r}; X's columns: {list(map(str, X.columns))!r})."
        )


def split_target(formula: str, fit_intercept: bool, X, y):
    """``(X without the target's columns, y)`` for a formula.

    With a left side the target is evaluated on ``X`` (``y`` must be None)
    and its columns leave ``X``; without one ``X`` and ``y`` pass through.
    """
    if not isinstance(X, pd.DataFrame):
        raise ValueError(
            "The 'formula' parameter reads columns by name: X must be a pandas "
            f"DataFrame; got {type(X).__name__}."
        )
    lhs, rhs = _parse(formula, fit_intercept)
    _check_columns(rhs.required_variables, X, formula)
    if lhs is None:
        return X, y
    if y is not None:
        raise ValueError(
            f"The 'formula' parameter {formula!r} names the target on its left "
            "side, and y was given too; pass y=None, or a formula without a "
            "left side."
        )
    _check_columns(lhs.required_variables, X, formula)
    both = sorted(set(lhs.required_variables) & set(rhs.required_variables))
    if both:
        raise ValueError(
            f"The 'formula' parameter {formula!r} uses column(s) {both!r} on both "
            "sides."
        )
    return X.drop(columns=sorted(lhs.required_variables)), _left_side(lhs, X, formula)


def _left_side(lhs, X: pd.DataFrame, formula: str) -> np.ndarray:
    """The target: a column named on the left side as it is (class labels
    stay labels), or the value of an expression of columns (one column)."""
    factors = [factor for term in lhs for factor in term.factors]
    if len(factors) == 1 and factors[0].eval_method.value == "lookup":
        name = factors[0].expr.strip("`")
        if name in X.columns:
            return X[name].to_numpy(copy=True)
    target = formulaic.model_matrix(lhs, X, na_action="raise", output="pandas")
    if target.shape[1] != 1:
        raise ValueError(
            f"The left side of the 'formula' parameter {formula!r} gives "
            f"{target.shape[1]} columns ({list(map(str, target.columns))}); the "
            "target must be one column (name a column of labels as it is)."
        )
    return target.to_numpy()[:, 0].copy()


@dataclass(frozen=True)
class FormulaDesign:
    """The fitted right side of a formula: new rows -> the GLM's columns.

    Attributes
    ----------
    formula : str
        The right side as formulaic writes it (the intercept as ``1``).
    fit_intercept : bool
    full_rank : bool
        formulaic's ``ensure_full_rank`` (treatment coding: True).
    names : ndarray of str
        The GLM's terms (formulaic's column names, the intercept left out).
    term_columns : dict of str to list of int
        Each formula term (``C(region)``, ``bs(age, df=4)``) -> its positions
        among ``names``.
    shift, scale : ndarray of shape (n_terms,)
        Column ``j`` of :meth:`transform` is ``(u_j - shift[j]) / scale[j]``.
    target_columns : tuple of str
        The columns of the left side (left out of the network's context).
    spec : ModelSpec
        formulaic's fitted state.
    """

    formula: str
    fit_intercept: bool
    full_rank: bool
    names: np.ndarray
    term_columns: dict
    shift: np.ndarray
    scale: np.ndarray
    target_columns: tuple
    spec: ModelSpec = field(repr=False, compare=False)

    @classmethod
    def fit(
        cls, formula: str, X: pd.DataFrame, fit_intercept: bool, full_rank: bool
    ) -> FormulaDesign:
        """Materialise the right side of ``formula`` on ``X`` and standardise."""
        lhs, rhs = _parse(formula, fit_intercept)
        try:
            matrix = formulaic.model_matrix(
                rhs, X, na_action="raise", ensure_full_rank=full_rank, output="pandas"
            )
        except (
            formulaic.errors.FormulaicError,
            ValueError,
            TypeError,
            NameError,
        ) as exc:
            raise ValueError(
                f"The 'formula' parameter {formula!r} could not be evaluated on "
                f"X: {exc}"
            ) from exc
        spec = matrix.model_spec
        values, names = _without_intercept(matrix)
        shift, scale = _standardisation(values, fit_intercept)
        return cls(
            formula=str(spec.formula),
            fit_intercept=bool(fit_intercept),
            full_rank=bool(full_rank),
            names=np.asarray(names, dtype=object),
            term_columns=_term_columns(spec, names),
            shift=shift,
            scale=scale,
            target_columns=tuple(
                sorted(str(c) for c in getattr(lhs, "required_variables", ()))
            ),
            spec=spec,
        )

    @property
    def n_terms(self) -> int:
        return len(self.names)

    def levels(self, term: str) -> list | None:
        """The levels of a categorical term (``C(region)``) as strings; None
        for any other term."""
        kind, state = self.spec.encoder_state.get(term, (None, {}))
        if getattr(kind, "value", kind) != "categorical" or ":" in term:
            return None
        return [str(level) for level in state["categories"]]

    def level_groups(self) -> tuple:
        """``(positions, n_levels)`` per treatment-coded categorical term: its
        0/1 columns' positions among the terms, one level (the base) left out
        (:attr:`GLMTerms.level_groups <autoglm_graph.glm._terms.GLMTerms>`).
        Other contrasts (``contr.sum``, ...) are left as plain columns."""
        groups = []
        for term, positions in self.term_columns.items():
            levels = self.levels(term)
            if levels is None or len(positions) != len(levels) - 1 or not positions:
                continue
            if np.all(self.shift[positions] == 0) and np.all(
                self.scale[positions] == 1
            ):
                groups.append((tuple(int(j) for j in positions), len(levels)))
        return tuple(groups)

    def term_variables(self, term: str, columns) -> list:
        """The columns among ``columns`` that the formula's ``term`` reads
        (in the order of ``columns``)."""
        found = next((t for t in self.spec.formula if str(t) == term), None)
        names = set()
        for factor in () if found is None else found.factors:
            if factor.eval_method.value == "lookup":
                names.add(factor.expr.strip("`"))
                continue
            tree = ast.parse(factor.expr, mode="eval")
            names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        return [c for c in columns if c in names]

    def context_X(self, X):
        """``X`` without the target's columns (those present)."""
        if not isinstance(X, pd.DataFrame):
            return X
        present = [c for c in self.target_columns if c in X.columns]
        return X.drop(columns=present) if present else X

    def transform(self, X) -> np.ndarray:
        """The standardised float64 columns of the GLM's terms for rows ``X``."""
        if not isinstance(X, pd.DataFrame):
            raise ValueError(
                "This model was fitted with a formula: X must be a pandas "
                f"DataFrame; got {type(X).__name__}."
            )
        _check_columns(self.spec.formula.required_variables, X, self.formula)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                matrix = self.spec.get_model_matrix(X)
            except (formulaic.errors.FormulaicError, ValueError, TypeError) as exc:
                raise ValueError(
                    f"The formula {self.formula!r} could not be evaluated on X: {exc}"
                ) from exc
        unseen = [w for w in caught if "outside of the nominated" in str(w.message)]
        for warning in caught:
            if unseen and "not in that dtype's categories" in str(warning.message):
                continue  # pandas on formulaic's cast of the same levels
            if warning not in unseen:
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
        if unseen:
            levels = re.search(r"\{.*\}", str(unseen[0].message))
            warnings.warn(
                "Found unknown categories in the formula's terms during transform, "
                f"levels that fit did not see: {levels.group(0) if levels else '?'} "
                "(encoded as no level (all zeros): the base level's coefficients).",
                UnseenCategoryWarning,
                stacklevel=4,
            )
        values, names = _without_intercept(matrix)
        if list(names) != list(self.names):
            raise ValueError(
                f"The formula {self.formula!r} gives columns {names!r} on X; fit "
                f"gave {list(self.names)!r}."
            )
        return (values - self.shift) / self.scale

    # ------------------------------------------------------------ saving
    def state(self) -> dict:
        """A JSON-able description from which :meth:`from_state` rebuilds it."""
        encoders = {
            str(name): [kind.value, {"categories": _plain(s["categories"])}]
            if "categories" in s
            else [kind.value, {}]
            for name, (kind, s) in self.spec.encoder_state.items()
        }
        return {
            "formula": self.formula,
            "fit_intercept": self.fit_intercept,
            "full_rank": self.full_rank,
            "names": [str(n) for n in self.names],
            "target_columns": list(self.target_columns),
            "term_columns": {k: list(v) for k, v in self.term_columns.items()},
            "shift": [float(v) for v in self.shift],
            "scale": [float(v) for v in self.scale],
            "transform_state": _plain(self.spec.transform_state),
            "encoder_state": encoders,
        }

    @classmethod
    def from_state(cls, state: dict, columns) -> FormulaDesign:
        """The design saved by :meth:`state` (formulaic's state rebuilt from
        the levels and transforms' parameters: no pickled objects). Its
        expressions may name ``columns`` and :data:`SAFE_FUNCTIONS` only."""
        _, rhs = _parse(state["formula"], bool(state["fit_intercept"]))
        check_safe(rhs, set(map(str, columns)))
        spec = formulaic.ModelSpec(
            formula=rhs,
            ensure_full_rank=bool(state["full_rank"]),
            na_action="raise",
            output="pandas",
            transform_state=state["transform_state"],
            encoder_state={k: tuple(v) for k, v in state["encoder_state"].items()},
        )
        names = [str(n) for n in state["names"]]
        shift = np.asarray(state["shift"], dtype=np.float64)
        scale = np.asarray(state["scale"], dtype=np.float64)
        if not (len(shift) == len(scale) == len(names)) or np.any(scale <= 0):
            raise ValueError("The formula's shift and scale must match its terms.")
        term_columns = {
            str(term): [int(j) for j in columns]
            for term, columns in state["term_columns"].items()
        }
        if sorted(j for c in term_columns.values() for j in c) != list(
            range(len(names))
        ):
            raise ValueError("The formula's term_columns must cover its terms once.")
        return cls(
            formula=str(state["formula"]),
            fit_intercept=bool(state["fit_intercept"]),
            full_rank=bool(state["full_rank"]),
            names=np.asarray(names, dtype=object),
            term_columns=term_columns,
            shift=shift,
            scale=scale,
            target_columns=tuple(str(c) for c in state["target_columns"]),
            spec=spec,
        )


def check_safe(rhs, columns: set) -> None:
    """ValueError unless every expression of ``rhs`` names ``columns``,
    :data:`SAFE_FUNCTIONS` and numpy's ufuncs only (formulaic evaluates them
    as Python)."""
    for term in rhs:
        for factor in term.factors:
            if factor.eval_method.value != "python":
                continue
            try:
                tree = ast.parse(factor.expr, mode="eval")
            except SyntaxError as exc:
                raise ValueError(
                    f"The formula's {factor.expr!r} is no expression."
                ) from exc
            for node in ast.walk(tree):
                if not _safe_node(node, columns):
                    raise ValueError(
                        f"The formula's expression {factor.expr!r} uses "
                        f"{ast.unparse(node)!r}, which a saved model may not call "
                        "(column names, formulaic's transforms and numpy's ufuncs "
                        "only)."
                    )


def _safe_node(node, columns: set) -> bool:
    if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.comprehension)):
        return False
    if isinstance(node, ast.Name):
        return node.id in columns or node.id in SAFE_FUNCTIONS
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            return False
        if isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"):
            member = getattr(np, node.attr, None)
            return isinstance(member, np.ufunc) or node.attr in SAFE_NUMPY
        return isinstance(node.value, ast.Name) and node.value.id == "contr"
    return True


def _without_intercept(matrix) -> tuple[np.ndarray, list]:
    names = [str(c) for c in matrix.columns]
    keep = [j for j, n in enumerate(names) if n != _INTERCEPT]
    values = np.asarray(matrix.to_numpy(dtype=np.float64)[:, keep], dtype=np.float64)
    return np.ascontiguousarray(values), [names[j] for j in keep]


def _standardisation(values: np.ndarray, fit_intercept: bool):
    """Mean and standard deviation of the numeric columns (0/1 columns: 0, 1;
    without an intercept nothing is centred, which would add one)."""
    indicator = np.all((values == 0) | (values == 1), axis=0)
    shift = np.where(indicator | (not fit_intercept), 0.0, values.mean(axis=0))
    spread = values.std(axis=0)
    scale = np.where(indicator | (spread <= 1e-12), 1.0, spread)
    return shift.astype(np.float64), scale.astype(np.float64)


def _term_columns(spec: ModelSpec, names: list) -> dict:
    position = {n: j for j, n in enumerate(names)}
    return {
        str(s.term): [position[c] for c in s.columns if c in position]
        for s in spec.structure
        if str(s.term) != "1"
    }


def _plain(value):
    """``value`` with numpy scalars and arrays as JSON numbers and lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
