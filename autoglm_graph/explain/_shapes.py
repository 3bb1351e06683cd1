"""The shape of a numeric column's term in the global GLM (``plot_term``).

A column's contribution to the global GLM's linear predictor, its linear
term plus its spline basis (``splines``), over a grid of its values, centred
on the grid's mean (the level belongs to the intercept), with a pointwise
band from the coefficient covariance of :func:`~autoglm_graph.glm.coef_table`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.utils.validation import check_is_fitted

from ..glm import coef_table

__all__ = ["term_shape"]


def term_shape(
    model, column: str, X=None, y=None, sample_weight=None, offset=None, **kwargs
) -> pd.DataFrame:
    """The global GLM's centred contribution of numeric ``column``.

    Parameters
    ----------
    model : GraphGLMRegressor or GraphGLMClassifier
        Fitted, with one linear predictor (not multinomial).
    column : str
        A numeric term of ``feature_names_out_`` (the preprocessed column).
    X, y, sample_weight, offset
        The training data, as for :func:`~autoglm_graph.glm.coef_table`:
        with ``y`` the band is drawn. ``X`` alone sets the range of a term
        without splines.
    n_points : int, default=200
    level : float, default=0.95
        The band's pointwise coverage.

    Returns
    -------
    DataFrame
        ``value`` (the column in the user's units), ``contribution``, and
        with ``y`` the band's ``lower`` and ``upper``.
    """
    n_points, level = kwargs.pop("n_points", 200), kwargs.pop("level", 0.95)
    check_is_fitted(model, "global_glm_")
    if model.global_glm_.coef.shape[0] != 1:
        raise ValueError("term_shape draws models with one linear predictor.")
    terms = model.predictor().glm_terms
    names = [str(n) for n in model.preprocessor_.get_feature_names_out()]
    numeric = set(map(str, model.preprocessor_.numeric_features_))
    if terms.formula is not None or column not in numeric or column not in names:
        raise ValueError(
            f"The 'column' parameter must name a numeric term of the global GLM "
            f"(without a formula); got {column!r}."
        )
    position = names.index(column)
    spline = None
    if terms.splines is not None:
        spline = next((t for t in terms.splines.terms if t.name == column), None)
    grid = _grid(model, spline, position, X, n_points)
    features, index = _features(model, terms, spline, column, grid)
    shift, scale = model.preprocessor_.design_scaling()
    J = features - features.mean(axis=0)  # centred: the intercept takes the level
    out = pd.DataFrame({"value": grid * scale[position] + shift[position]})
    if y is None:
        theta = model.predictor().global_theta_user()[0]
        names_all = ["intercept", *map(str, model.feature_names_out_)]
        coef = theta[[names_all.index(i) for i in index]]
        out["contribution"] = J @ coef
        return out
    table = coef_table(model, X, y, sample_weight, offset, **kwargs)
    where = [table.index.get_loc(i) for i in index]
    coef, cov = (
        table["coef"].to_numpy()[where],
        table.attrs["cov"][np.ix_(where, where)],
    )
    se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", J, cov, J), 0.0))
    z = stats.norm.ppf(0.5 + level / 2)
    out["contribution"] = J @ coef
    out["lower"] = out["contribution"] - z * se
    out["upper"] = out["contribution"] + z * se
    return out


def _grid(model, spline, position: int, X, n_points: int) -> np.ndarray:
    """Values of the column in the design's units: the spline's range, or X's."""
    if spline is not None:
        low, high = spline.breakpoints[0], spline.breakpoints[-1]
    elif X is not None:
        design = model.predictor().design(X)[:, position]
        low, high = design.min(), design.max()
    else:
        raise ValueError(
            "A term without splines needs X to set its range: pass the training X."
        )
    return np.linspace(low, high, n_points)


def _features(model, terms, spline, column: str, grid: np.ndarray):
    """The term's columns in the user's units over ``grid`` (the linear one:
    the column; the basis: its unstandardised values), and their names."""
    shift, scale = model.preprocessor_.design_scaling()
    names = [str(n) for n in model.preprocessor_.get_feature_names_out()]
    position = names.index(column)
    columns, index = [grid * scale[position] + shift[position]], [column]
    if spline is not None:
        block = terms.splines.blocks[column]
        columns += list(spline.basis(grid).T)
        index += [terms.splines.names[j] for j in block]
    return np.column_stack(columns), index
