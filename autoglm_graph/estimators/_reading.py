"""Reading a fitted estimator: the linear predictor of predictions, per-row
coefficients and attention.

Functions of the estimator (its public methods call them); everything goes
through the fitted model's :class:`~autoglm_graph.estimators.Predictor`
(``estimator.predictor()``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..utils import OffsetWarning, align_to_rows, check_offset
from ._rows import n_rows, row_labels


def linear_predictor(estimator, X, offset=None) -> np.ndarray:
    """The model's linear predictor ``[n_samples, n_outputs]`` of rows ``X``."""
    offset = predict_offset(estimator, X, offset)
    predictor = estimator.predictor()
    eta, _ = predictor.coefficients(predictor.design(X), offset)
    return eta


def predict_offset(estimator, X, offset) -> np.ndarray | None:
    """The offset of a prediction, checked against the fit's: aligned to
    X's rows, an exposure passed for a log-exposure refused, an offset for
    a model fitted without one warned about."""
    name = type(estimator).__name__
    if offset is not None:
        offset = align_to_rows(offset, X, "offset")
        offset = check_offset(offset, n_rows(X))
        if not getattr(estimator, "offset_used_", True) and np.any(offset != 0):
            warnings.warn(
                f"This {name} was fitted without an offset, and predict got "
                "one: it shifts every linear predictor (a log-link prediction "
                "is multiplied by exp(offset)). Leave it out, or refit with the "
                "offset.",
                OffsetWarning,
                stacklevel=4,  # the caller of predict
            )
        estimator.family_.check_offset(
            offset, fitted_range=getattr(estimator, "offset_range_", None)
        )
        return offset
    if getattr(estimator, "offset_used_", False):
        # A warning, not an error: offset 0 (a rate per unit of exposure)
        # is a valid prediction, and scikit-learn's tools call predict(X).
        warnings.warn(
            f"This {name} was fitted with an offset, and predict got none: the "
            "predictions are for offset=0 (e.g. a rate per unit of exposure). "
            "Pass offset= to predict with exposure.",
            UserWarning,
            stacklevel=4,
        )
    return None


def local_coef(estimator, X, offset=None, interval=None) -> pd.DataFrame:
    """Per-row coefficients in the user's units (see ``local_coef``)."""
    if interval is not None:
        from ..explain import local_coef_interval

        coef = estimator.local_coef(X, offset)
        return local_coef_interval(estimator, X, coef, interval, offset)
    predictor = estimator.predictor()
    _, theta = predictor.coefficients(predictor.design(X), offset)
    theta = predictor.to_user_units(theta)
    terms = ["intercept", *estimator.feature_names_out_]
    if not predictor.glm_terms.fit_intercept:  # no intercept column
        theta, terms = theta[..., 1:], terms[1:]
    index = row_labels(X)
    if predictor.n_outputs == 1:
        return pd.DataFrame(theta[:, 0, :], columns=terms, index=index)
    columns = pd.MultiIndex.from_product(
        [list(estimator.classes_), terms], names=["class", "term"]
    )
    return pd.DataFrame(theta.reshape(theta.shape[0], -1), columns=columns, index=index)


def explain(estimator, X, train_index: np.ndarray) -> pd.DataFrame:
    """The training rows each row of X attended to (see ``explain``);
    ``train_index`` labels the training rows."""
    predictor = estimator.predictor()
    design = predictor.design(X)
    labels = row_labels(X)
    columns = ["row", "neighbor", "rank", "similarity", "attention"]
    if predictor.network is None:
        return pd.DataFrame(columns=columns)
    frames = []
    step = predictor.predict_chunk
    for start in range(0, design.shape[0], step):
        chunk = design[start : start + step]
        (_, (edge_index, alpha)), graph = predictor.query(
            chunk, return_graph=True, return_attention=True
        )
        src, dst = edge_index.cpu().numpy()
        rank = graph.mask.cumsum(dim=1)[graph.mask].cpu().numpy() - 1
        frames.append(
            pd.DataFrame(
                {
                    "row": labels[start + dst],
                    "neighbor": train_index[predictor.network.positions[src]],
                    "rank": rank,
                    "similarity": graph.similarities[graph.mask].cpu().numpy(),
                    "attention": alpha.mean(dim=1).cpu().numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)[columns]
