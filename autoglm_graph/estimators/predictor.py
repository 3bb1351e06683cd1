"""A fitted model's arithmetic: rows -> design -> linear predictor and coefficients.

:class:`Predictor` holds what prediction reads of a fitted estimator (the
preprocessor, the global GLM, the location effect, the fitted network) and
nothing of how it was fitted. The readers of a fitted model
(:mod:`autoglm_graph.explain`, :mod:`autoglm_graph.explain.heterogeneity`,
:mod:`autoglm_graph.explain.plotting`, the search's scoring) call it rather than the
estimator's private methods; an estimator hands one out with
``estimator.predictor()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..glm import GLMTerms, GlobalGLM
from ..network import CoefficientMap, LocationEffect
from ..preprocessing import TabularPreprocessor
from ..utils import check_offset, limit_threads, torch

if TYPE_CHECKING:
    from ..network import FittedNetwork

# Without a network (the global GLM, a location effect) the arithmetic is
# numpy's: torch and the training module are imported for a network only.

__all__ = ["Predictor"]


@dataclass(frozen=True)
class Predictor:
    """Design, linear predictor and per-row coefficients of a fitted model.

    Parameters
    ----------
    preprocessor : TabularPreprocessor
        The fitted preprocessor (rows -> standardised design).
    global_glm : GlobalGLM
        The global GLM, on the standardised design.
    n_outputs : int
        Linear predictors per row.
    check_X : callable
        Validates new rows against those of ``fit`` (the estimator's
        ``validate_data``); returns them.
    predict_chunk : int
        Rows per call of the network (bounds memory; results do not depend
        on it): ``FitPolicy.predict_chunk``.
    n_jobs : int or None, default=None
        Threads of :meth:`coefficients` (scikit-learn's meaning).
    location_effect : LocationEffect or None, default=None
    network : FittedNetwork or None, default=None
        The fitted network; None for the global GLM (and a location effect).
    terms : GLMTerms or None, default=None
        The design columns the global GLM reads (None: all, with an intercept).
    coef_map : CoefficientMap or None, default=None
        The constraints on the network's deviations
        (:mod:`autoglm_graph.network.constraints`); None: none.
    """

    preprocessor: TabularPreprocessor
    global_glm: GlobalGLM
    n_outputs: int
    check_X: Callable
    predict_chunk: int
    n_jobs: int | None = None
    location_effect: LocationEffect | None = None
    network: FittedNetwork | None = None
    terms: GLMTerms | None = None
    coef_map: CoefficientMap | None = None

    @property
    def glm_terms(self) -> GLMTerms:
        """:attr:`terms`, or every design column with an intercept."""
        if self.terms is not None:
            return self.terms
        n = self.preprocessor.n_features_out_
        return GLMTerms.from_preprocessor(self.preprocessor, np.arange(n))

    def design(self, X) -> np.ndarray:
        """The float64 design of new rows ``X`` (validated as ``predict`` does):
        the preprocessed columns, then a formula's (``glm_terms.design``)."""
        terms = self.glm_terms
        if terms.formula is None:
            X_checked = self.check_X(X)
        else:
            if isinstance(X, pd.Series):  # one row, as df.iloc[i] gives it
                X = X.to_frame().T.infer_objects()
            X_checked = self.check_X(terms.formula.context_X(X))
        if X_checked.shape[0] == 0:
            raise ValueError("Found array with 0 sample(s); at least 1 is required.")
        context = self.preprocessor.transform(X_checked, dtype=np.float64)
        return terms.design(context, X)

    def global_eta(self, design: np.ndarray, offset) -> np.ndarray:
        """The global GLM's linear predictor ``[n, n_outputs]`` (offset added)."""
        glm = self.global_glm
        design = self.glm_terms.select(design.astype(np.float64, copy=False))
        eta = design @ glm.coef.T + glm.intercept
        if offset is not None:
            eta = eta + offset[:, None]
        return eta

    def to_user_units(self, theta: np.ndarray) -> np.ndarray:
        """Map ``[..., intercept, slopes]`` on the GLM's terms to the user's units."""
        terms = self.glm_terms
        shift, scale = terms.shift, terms.scale
        slopes = theta[..., 1:] / scale
        intercept = theta[..., 0] - slopes @ shift
        return np.concatenate([intercept[..., None], slopes], axis=-1)

    def global_theta_user(self) -> np.ndarray:
        """The global GLM's ``[n_outputs, 1 + p]`` (intercept, slopes), user units."""
        glm = self.global_glm
        theta = np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
        return self.to_user_units(theta)

    def locations(self, design: np.ndarray, columns: list[int]) -> np.ndarray:
        """The location columns of ``design`` in the user's units."""
        shift, scale = self.preprocessor.design_scaling()
        return design[:, columns] * scale[columns] + shift[columns]

    def location_shift(self, design: np.ndarray) -> np.ndarray | None:
        """The fitted location effect's shift of rows' linear predictor."""
        effect = self.location_effect
        if effect is None:
            return None
        return effect.shift(self.locations(design, effect.columns))

    def coefficients(self, design: np.ndarray, offset=None):
        """Per-row (eta ``[n, n_outputs]``, theta ``[n, n_outputs, p + 1]``).

        Parameters
        ----------
        design : ndarray of shape (n_samples, p)
            From :meth:`design`.
        offset : float or array-like of shape (n_samples,), default=None
        """
        with limit_threads(self.n_jobs):
            return self._coefficients(design, offset)

    def _coefficients(self, design: np.ndarray, offset):
        design = np.require(design, requirements=["W"])  # torch warns on read-only
        offset = check_offset(offset, design.shape[0])
        glm = self.global_glm
        theta_global = np.concatenate([glm.intercept[:, None], glm.coef], axis=1)
        eta = self.global_eta(design, offset)
        theta = np.broadcast_to(
            theta_global, (design.shape[0], *theta_global.shape)
        ).copy()
        location = self.location_shift(design)
        if location is not None:  # a shift of each row's intercept
            eta = eta + location[:, None]
            theta[:, :, 0] += location[:, None]
        if self.network is None:
            return eta, theta
        from ..network import RowData, linear_predictor

        deltas = [
            self.query(design[s : s + self.predict_chunk])
            for s in range(0, design.shape[0], self.predict_chunk)
        ]
        delta = torch.cat(deltas).double()
        terms = self.glm_terms
        rows = RowData(
            context=None,
            design=torch.as_tensor(terms.select(design), dtype=torch.float64),
            y=None,
            weight=None,
            eta_global=torch.as_tensor(eta),
        )
        eta_local, delta = linear_predictor(
            delta,
            rows,
            self.n_outputs,
            self.coef_map,
            intercept=terms.fit_intercept,
            reduce=terms.reduce if terms.varied_bases else None,
        )
        eta_local = eta_local.reshape(eta.shape)
        return eta_local.numpy(), theta + delta.numpy()

    def query(self, design_chunk: np.ndarray, **kwargs):
        """The network's output for rows of the design (see ``FittedNetwork.query``)."""
        context = torch.as_tensor(
            self.glm_terms.context(design_chunk),
            dtype=torch.float32,
            device=self.network.device,
        )
        out = self.network.query(context, **kwargs)
        if kwargs:
            return out
        return out.cpu()
