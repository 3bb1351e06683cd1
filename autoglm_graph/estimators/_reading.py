"""Reading a fitted estimator: predictions' linear predictor, per-row
coefficients, attention and tables (:class:`_ReadingMixin`).

Everything here goes through the fitted model's
:class:`~autoglm_graph.predictor.Predictor` (``self.predictor()``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..utils import OffsetWarning, align_to_rows, check_offset, with_thread_limit


def _n_rows(X) -> int:
    """Rows of X as predict reads it (a Series is one row, as df.iloc[i])."""
    return 1 if isinstance(X, pd.Series) else len(X)


class _ReadingMixin:
    """The reading methods of :class:`~autoglm_graph._base.BaseGraphGLM`."""

    def _linear_predictor(self, X, offset=None) -> np.ndarray:
        offset = self._predict_offset(X, offset)
        predictor = self.predictor()
        eta, _ = predictor.coefficients(predictor.design(X), offset)
        return eta

    def _predict_offset(self, X, offset) -> np.ndarray | None:
        """The offset of a prediction, checked against the fit's: aligned to
        X's rows, an exposure passed for a log-exposure refused, an offset for
        a model fitted without one warned about."""
        if offset is not None:
            offset = align_to_rows(offset, X, "offset")
            offset = check_offset(offset, _n_rows(X))
            if not getattr(self, "offset_used_", True) and np.any(offset != 0):
                warnings.warn(
                    f"This {type(self).__name__} was fitted without an offset, "
                    "and predict got one: it shifts every linear predictor (a "
                    "log-link prediction is multiplied by exp(offset)). Leave it "
                    "out, or refit with the offset.",
                    OffsetWarning,
                    stacklevel=4,
                )
            self.family_.check_offset(
                offset, fitted_range=getattr(self, "offset_range_", None)
            )
            return offset
        if getattr(self, "offset_used_", False):
            # A warning, not an error: offset 0 (a rate per unit of exposure)
            # is a valid prediction, and scikit-learn's tools call predict(X).
            warnings.warn(
                f"This {type(self).__name__} was fitted with an offset, and "
                "predict got none: the predictions are for offset=0 (e.g. a rate "
                "per unit of exposure). Pass offset= to predict with exposure.",
                UserWarning,
                stacklevel=4,
            )
        return None

    def _global_theta_user(self) -> np.ndarray:
        """The global GLM's ``[n_outputs, 1 + p]`` (intercept, slopes), user units."""
        return self.predictor().global_theta_user()

    def local_coef(self, X, offset=None, interval=None) -> pd.DataFrame:
        """Per-row GLM coefficients: the global GLM plus each row's deviation.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        offset : float or array-like of shape (n_samples,), default=None
            Accepted for symmetry with ``predict``; it does not change coefficients.
        interval : float or None, default=None
            With a level in (0, 1), e.g. 0.9, also the lower and upper bounds
            of each coefficient from the bootstrap members of the fit
            (``interval_members``; see :mod:`autoglm_graph.intervals`). For
            a model that is the global GLM, the GLM's Wald interval on every
            row: ``coef_table(X_train, y_train, alpha=1 - interval)``'s
            ``ci_lower`` and ``ci_upper``.

        Returns
        -------
        DataFrame of shape (n_samples, n_terms)
            Columns ``intercept`` (absent with ``fit_intercept=False``) and
            ``feature_names_out_``; for the multinomial family a (class, term)
            column MultiIndex. With ``interval``, three times as many columns
            under a first column level ``statistic``: ``"coef"`` (the frame
            above), ``"lower"`` and ``"upper"``, so that
            ``local_coef(X, interval=0.9)["lower"]`` is shaped as
            ``local_coef(X)``.
        """
        if interval is not None:
            from ..explain import local_coef_interval

            coef = self.local_coef(X, offset)
            return local_coef_interval(self, X, coef, interval, offset)
        predictor = self.predictor()
        _, theta = predictor.coefficients(predictor.design(X), offset)
        theta = predictor.to_user_units(theta)
        terms = ["intercept", *self.feature_names_out_]
        if not predictor.glm_terms.fit_intercept:  # no intercept column
            theta, terms = theta[..., 1:], terms[1:]
        index = self._row_labels(X)
        if self._n_outputs == 1:
            return pd.DataFrame(theta[:, 0, :], columns=terms, index=index)
        columns = pd.MultiIndex.from_product(
            [list(self.classes_), terms], names=["class", "term"]
        )
        return pd.DataFrame(
            theta.reshape(theta.shape[0], -1), columns=columns, index=index
        )

    @with_thread_limit
    def explain(self, X) -> pd.DataFrame:
        """The training rows each row attended to, with attention weights.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        DataFrame
            One line per (row, neighbour): ``row`` (X's index, or position),
            ``neighbor`` (the training row's index in the training data, or its
            position), ``rank``, ``similarity`` and ``attention`` (last layer,
            mean over heads), sorted by row then rank. Empty when the fitted
            model is the global GLM.
        """
        predictor = self.predictor()
        design = predictor.design(X)
        row_labels = self._row_labels(X)
        columns = ["row", "neighbor", "rank", "similarity", "attention"]
        if predictor.network is None:
            return pd.DataFrame(columns=columns)
        frames = []
        step = predictor.chunk_rows
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
                        "row": row_labels[start + dst],
                        "neighbor": self._train_index[predictor.network.positions[src]],
                        "rank": rank,
                        "similarity": graph.similarities[graph.mask].cpu().numpy(),
                        "attention": alpha.mean(dim=1).cpu().numpy(),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)[columns]

    @staticmethod
    def _row_labels(X) -> pd.Index:
        if isinstance(X, pd.Series):  # one row: its name labels it
            return pd.Index([0 if X.name is None else X.name])
        if hasattr(X, "index"):
            return X.index
        return pd.RangeIndex(X.shape[0])

    def coef_table(
        self,
        X,
        y,
        sample_weight=None,
        offset=None,
        cov_type: str = "fisher",
        alpha: float = 0.05,
        weights: str = "variance",
    ) -> pd.DataFrame:
        """The global GLM's coefficients with standard errors, z, p and CIs.

        See :func:`autoglm_graph.explain.coef_table`.

        Parameters
        ----------
        X, y, sample_weight, offset
            The data of the fit (the estimator does not keep its design).
        cov_type : {"fisher", "sandwich"}, default="fisher"
        alpha : float, default=0.05
            Level of the confidence intervals (not the L2 penalty).
        weights : {"variance", "frequency"}, default="variance"
            What ``sample_weight`` means for the standard errors
            (statsmodels' ``var_weights`` or ``freq_weights``).

        Returns
        -------
        DataFrame
            ``coef``, ``std_err``, ``z``, ``p_value``, ``ci_lower``,
            ``ci_upper`` per term.
        """
        from ..glm import coef_table

        return coef_table(
            self,
            X,
            y,
            sample_weight,
            offset,
            cov_type=cov_type,
            alpha=alpha,
            weights=weights,
        )

    def wald_test_terms(
        self,
        X,
        y,
        sample_weight=None,
        offset=None,
        cov_type: str = "fisher",
        weights: str = "variance",
    ) -> pd.DataFrame:
        """Joint Wald tests per term of the global GLM (a categorical
        column's levels together), as statsmodels' ``wald_test_terms``.

        See :func:`autoglm_graph.explain.wald_test_terms`.

        Parameters
        ----------
        X, y, sample_weight, offset
            The data of the fit.
        cov_type : {"fisher", "sandwich"}, default="fisher"
        weights : {"variance", "frequency"}, default="variance"

        Returns
        -------
        DataFrame
            ``chi2``, ``df`` and ``p_value`` per term.
        """
        from ..glm import wald_test_terms

        return wald_test_terms(
            self, X, y, sample_weight, offset, cov_type=cov_type, weights=weights
        )

    def summary(
        self,
        X,
        y,
        sample_weight=None,
        offset=None,
        *,
        alpha: float = 0.05,
        cov_type: str = "fisher",
        weights: str = "variance",
    ):
        """The global GLM's summary table, as statsmodels' ``GLMResults.summary()``.

        See :func:`autoglm_graph.summary.glm_summary`.

        Parameters
        ----------
        X, y, sample_weight, offset
            The data of the fit (the estimator keeps neither its design nor y).
        alpha : float, default=0.05
            Level of the confidence intervals (not the L2 penalty).
        cov_type : {"fisher", "sandwich"}, default="fisher"
        weights : {"variance", "frequency"}, default="variance"
            What ``sample_weight`` means (statsmodels' ``var_weights`` or
            ``freq_weights``).

        Returns
        -------
        GLMSummary
            ``print`` it for the table: family, link, rows, parameters,
            deviance, null deviance, D², log-likelihood, AIC, BIC, scale and
            the coefficients; ``.header`` (dict) and ``.coefficients``
            (DataFrame) hold the numbers.
        """
        from ..glm import glm_summary

        return glm_summary(
            self,
            X,
            y,
            sample_weight,
            offset,
            alpha=alpha,
            cov_type=cov_type,
            weights=weights,
        )

    def factor_table(
        self,
        X,
        y=None,
        sample_weight=None,
        offset=None,
        *,
        alpha: float = 0.05,
        cov_type: str = "fisher",
        weights: str = "variance",
    ) -> pd.DataFrame:
        """Per term and level: relativity, its interval, weight and local spread.

        See :func:`autoglm_graph.tariffs.factor_table`.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            With the data of the fit, the standard errors and intervals
            (else NaN).
        sample_weight, offset : array-like of shape (n_samples,), default=None
        alpha : float, default=0.05
        cov_type : {"fisher", "sandwich"}, default="fisher"
        weights : {"variance", "frequency"}, default="variance"

        Returns
        -------
        DataFrame
            One row per term and level (see the function).
        """
        from ..explain import factor_table

        return factor_table(
            self,
            X,
            y,
            sample_weight,
            offset,
            alpha=alpha,
            cov_type=cov_type,
            weights=weights,
        )

    def local_coef_summary(self, X, offset=None) -> pd.DataFrame:
        """How the per-row coefficients vary over the rows of X, per term.

        See :func:`autoglm_graph.explain.local_coef_summary`.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        offset : float or array-like of shape (n_samples,), default=None

        Returns
        -------
        DataFrame
            ``global``, ``mean``, ``sd``, quantiles and
            ``opposite_sign_share`` per term.
        """
        from ..glm import local_coef_summary

        return local_coef_summary(self, X, offset)
