"""One table for a fitted model's global GLM, as statsmodels' ``GLMResults.summary()``.

:func:`glm_summary` (the estimators' ``summary`` method) gathers what a
statsmodels or R user reads first: the family and link, the number of rows
and parameters, the deviance and the null deviance, D², the log-likelihood,
AIC and BIC, the dispersion (scale), and the coefficient table of
:func:`~autoglm_graph.glm.coef_table`. It returns a :class:`GLMSummary`:
``print`` gives the plain-text table, a notebook the HTML one, and its
``header`` and ``coefficients`` give the numbers.

Called without data, as statsmodels' and R's summaries are, it reports the
training rows: ``fit`` keeps these figures (scalars, and the coefficient
table's p x p covariances) in ``glm_statistics_``
(:class:`~autoglm_graph.glm.GLMStatistics`), and the model file saves them;
the estimator keeps neither ``y`` nor its design. Given rows (``X`` and
``y``), it reports on those.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from ..utils import align_to_rows, check_offset
from ._inference import (
    coef_table,
    design_rank,
    encode_target,
    kept_statistics,
    rows_of_call,
)
from ._solver import fit_global_glm
from .families import GaussianFamily, NegativeBinomialFamily, TweedieFamily

__all__ = ["GLMSummary", "glm_summary"]

#: The header's keys in the text's left and right columns, with their labels.
_LEFT = (
    ("dep_variable", "Dep. Variable:"),
    ("model", "Model:"),
    ("family", "Model Family:"),
    ("link", "Link Function:"),
    ("power", "Power:"),
    ("theta", "Theta:"),
    ("n_obs", "No. Observations:"),
    ("sum_weights", "Sum of Weights:"),
    ("n_params", "No. Parameters:"),
    ("df_model", "Df Model:"),
    ("df_resid", "Df Residuals:"),
    ("alpha", "Alpha (L2):"),
    ("network", "Network:"),
    ("cov_type", "Covariance Type:"),
)
_RIGHT = (
    ("scale", "Scale:"),
    ("log_likelihood", "Log-Likelihood:"),
    ("deviance", "Deviance:"),
    ("null_deviance", "Null Deviance:"),
    ("d2", "D²:"),
    ("pearson_chi2", "Pearson chi2:"),
    ("aic", "AIC:"),
    ("bic", "BIC:"),
)
_COLUMNS = ("coef", "std_err", "z", "p_value", "ci_lower", "ci_upper")
_CELL = 11  # width of a numeric column of the text table


@dataclass
class GLMSummary:
    """The summary of a fitted model's global GLM.

    ``str(summary)`` (or ``print(summary)``) is the plain-text table, laid out
    as statsmodels' ``GLMResults.summary()``; in a notebook it shows as HTML.

    Attributes
    ----------
    title : str
    header : dict
        The model's figures by key: ``dep_variable``, ``model``, ``family``,
        ``link``, ``power`` (tweedie) or ``theta`` (negative binomial),
        ``n_obs``, ``sum_weights`` (None without weights), ``n_params``,
        ``df_model``, ``df_resid``, ``alpha`` (the L2 penalty), ``network``
        (``"kept"`` or ``"dropped"``), ``global_only_reason``, ``cov_type``,
        ``scale``, ``log_likelihood``, ``deviance``, ``null_deviance``,
        ``d2``, ``pearson_chi2``, ``aic`` and ``bic``.
    coefficients : DataFrame
        :func:`~autoglm_graph.glm.coef_table`'s table.
    alpha : float
        The level of the confidence intervals (not the L2 penalty).
    notes : list of str
        The lines printed under the table.
    """

    title: str
    header: dict
    coefficients: pd.DataFrame
    alpha: float = 0.05
    notes: list[str] = field(default_factory=list)

    def as_text(self) -> str:
        """The plain-text table (what ``str`` returns)."""
        table = _coefficient_lines(self.coefficients, self.alpha, self.header)
        width = max(len(table[0]), 78)
        lines = [self.title.center(width), "=" * width]
        lines += _header_lines(self.header, width)
        lines += ["=" * width, *table, "=" * width]
        for i, note in enumerate(self.notes, start=1):
            lines += textwrap.wrap(f"[{i}] {note}", width, subsequent_indent="    ")
        return "\n".join(lines)

    def as_html(self) -> str:
        """The table as HTML (what a notebook shows)."""
        left, right = _header_pairs(self.header)
        rows = "".join(
            f"<tr><th>{a}</th><td>{b}</td><th>{c}</th><td>{d}</td></tr>"
            for (a, b), (c, d) in zip(left, right, strict=True)
        )
        notes = "".join(f"<li>{note}</li>" for note in self.notes)
        return (
            f"<h4>{self.title}</h4><table>{rows}</table>"
            + self.coefficients.to_html(float_format=lambda x: f"{x:.4f}")
            + (f"<ol>{notes}</ol>" if notes else "")
        )

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()

    def _repr_html_(self) -> str:
        return self.as_html()


def glm_summary(
    estimator,
    X=None,
    y=None,
    sample_weight=None,
    offset=None,
    *,
    alpha: float = 0.05,
    cov_type: str = "fisher",
    weights: str = "variance",
) -> GLMSummary:
    """The summary table of a fitted model's global GLM, as statsmodels'.

    Called without data (``model.summary()``), the summary of the training
    rows, from the figures ``fit`` kept (``glm_statistics_``, saved with the
    model); with ``X`` and ``y``, the same figures computed on those rows.

    Parameters
    ----------
    estimator : GraphGLMRegressor or GraphGLMClassifier
        A fitted estimator.
    X : array-like or DataFrame of shape (n_samples, n_features), default=None
        None (with ``y``, ``sample_weight`` and ``offset`` None too): the
        training rows, with the ``sample_weight`` and ``offset`` of the fit.
        Else the rows to report on (the training rows give the same summary
        as None, to rounding). With a ``formula`` that names the target,
        ``X`` may hold it and ``y`` be None, as in ``fit``.
    y : array-like of shape (n_samples,), default=None
        The target of the rows ``X``; a Series' name is the header's
        ``dep_variable`` (without data: the name of ``fit``'s ``y``, or the
        formula's left side).
    sample_weight : array-like of shape (n_samples,), default=None
        The weights of the rows ``X``; ``weights`` says what they mean.
    offset : array-like of shape (n_samples,), default=None
        The offset of the rows ``X``.
    alpha : float, default=0.05
        Level of the confidence intervals, ``1 - alpha`` (not the L2 penalty,
        which the header shows as ``Alpha (L2)``).
    cov_type : {"fisher", "sandwich"}, default="fisher"
        The standard errors' covariance (see :func:`~autoglm_graph.glm.coef_table`).
    weights : {"variance", "frequency"}, default="variance"
        ``"variance"``: statsmodels' ``var_weights`` (row ``i``'s dispersion
        is ``scale / w_i``; the number of observations is the number of
        rows). ``"frequency"``: statsmodels' ``freq_weights`` (row ``i``
        counts ``w_i`` times: the number of observations, the residual
        degrees of freedom and BIC use ``sum(w)``). As in ``coef_table``.

    Returns
    -------
    GLMSummary
        ``print`` it for the table; ``.header`` and ``.coefficients`` hold
        the numbers.

    Raises
    ------
    ValueError
        When ``X`` comes without ``y`` (and no formula names the target), ``y``
        without ``X``, or ``sample_weight`` or ``offset`` without both; and,
        called without data, for an estimator that kept no figures (one
        loaded from a file written before they were kept): pass it the
        training data.

    Notes
    -----
    The figures are statsmodels' ``GLMResults``' at ``alpha=0``:

    - ``deviance``: ``sum_i w_i d_i``, the unit deviances of the family.
    - ``null_deviance``: the deviance of the intercept-only GLM fitted with the
      same offset and weights (by the same solver; with ``fit_intercept=False``
      the model with the offset alone, as R's ``glm``). ``d2`` is
      ``1 - deviance / null_deviance``.
    - ``scale``: the coefficient table's dispersion, Pearson chi2 over
      ``df_resid`` for the gaussian, gamma and tweedie families, 1 for the
      binomial, multinomial, poisson and negative binomial ones.
    - ``log_likelihood``: the family's ``loglike`` at that scale, except for
      the gaussian family (tweedie power 0 too), whose likelihood is the
      concentrated one at ``sum_i w_i (y_i - mu_i)**2 / n_obs``. The tweedie
      family with ``1 < power < 2`` uses its series density; with
      ``power > 2`` it is NaN (no closed form), as are AIC and BIC.
    - ``n_params``: the rank of the GLM's design (intercept included), times
      ``K - 1`` for ``K`` classes; the dispersion and a negative binomial
      ``theta`` are not counted. ``aic = -2 llf + 2 n_params``,
      ``bic = -2 llf + n_params log(n_obs)``, ``df_resid = n_obs - n_params``.

    All of them, and the coefficients, are the global GLM's. When the network
    was kept, the fitted model varies the coefficients per row around them
    (``local_coef``); a footnote says so.

    Examples
    --------
    >>> import numpy as np
    >>> from autoglm_graph import GraphGLMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = rng.poisson(np.exp(0.3 * X[:, 0]))
    >>> model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    >>> summary = model.summary()
    >>> summary.header["family"], summary.header["n_params"]
    ('poisson', 3)
    >>> bool(np.isclose(model.summary(X, y).header["aic"], summary.header["aic"]))
    True
    >>> print(summary)  # doctest: +SKIP
    """
    check_is_fitted(estimator, "global_glm_")
    options = {"cov_type": cov_type, "alpha": alpha, "weights": weights}
    rows = rows_of_call(estimator, X, y, sample_weight, offset, "summary")
    if rows is None:
        figures = kept_statistics(estimator, "summary").figures(weights)
        coefficients = coef_table(estimator, **options)
    else:
        coefficients = coef_table(estimator, *rows, **options)
        fit = _GLMFit.from_data(estimator, *rows)
        figures = fit.figures(
            coefficients.attrs["dispersion"],
            weights,
            target=target_name(estimator, rows[1]),
            weighted=rows[2] is not None,
        )
    header = _header(estimator, figures, coefficients, weights)
    notes = _notes(estimator, header, coefficients, weights)
    title = f"Global GLM of {type(estimator).__name__}"
    return GLMSummary(title, header, coefficients, alpha, notes)


@dataclass(frozen=True)
class _GLMFit:
    """The global GLM on rows: what the header is computed from."""

    family: object
    y: np.ndarray  # [n] or one-hot [n, K]
    w: np.ndarray
    eta: np.ndarray  # [n, n_outputs], offset included
    null_eta: np.ndarray
    rank: int  # of the GLM's design, intercept included

    @classmethod
    def from_data(cls, estimator, X, y, sample_weight, offset) -> _GLMFit:
        design = estimator.predictor().design(X)
        y_model = encode_target(estimator, y)
        sample_weight = align_to_rows(sample_weight, X, "sample_weight")
        offset = align_to_rows(offset, X, "offset")
        return cls.from_design(estimator, design, y_model, sample_weight, offset)

    @classmethod
    def from_design(
        cls, estimator, design, y_model, sample_weight, offset, rank=None
    ) -> _GLMFit:
        """The rows' design (``predictor().design``'s), encoded target,
        weights (None: ones), offset (None: none) and the rank of the GLM's
        design, where known (None: computed)."""
        predictor = estimator.predictor()
        n = design.shape[0]
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
        offset = check_offset(offset, n)
        eta = predictor.global_eta(design, offset)
        if rank is None:
            terms = predictor.glm_terms
            ones = [np.ones(n)] if terms.fit_intercept else []
            rank = design_rank(np.column_stack([*ones, terms.select(design)]))
        null_eta = _null_eta(estimator, y_model, w, offset, eta.shape)
        return cls(estimator.family_, y_model, w, eta, null_eta, rank)

    def mean(self, eta: np.ndarray) -> np.ndarray:
        """The fitted means (class probabilities), shaped as ``y``."""
        mu = np.asarray(self.family.inverse_link(eta))
        return mu if self.family.multi_output else mu[:, 0]

    def deviance(self, eta: np.ndarray) -> float:
        """``sum_i w_i d_i`` (not the family's weighted mean)."""
        d = self.family.unit_deviance(self.y, eta)
        return float(self.w @ np.asarray(d))

    def pearson_chi2(self) -> float:
        """``sum_i w_i (y_i - mu_i)**2 / V(mu_i)``, summed over the classes."""
        mu = self.mean(self.eta)
        if self.family.multi_output:
            variance = mu  # the multinomial's Pearson statistic: (y - p)**2 / p
        else:
            variance = np.asarray(self.family.unit_variance(mu))
        chi2 = (self.y - mu) ** 2 / variance
        return float(self.w @ (chi2.sum(axis=1) if chi2.ndim == 2 else chi2))

    def log_likelihood(self, scale: float, weights: str) -> float:
        """The family's log-likelihood at ``scale``; the gaussian one at the
        scale that maximises it, ``sum w (y - mu)**2 / n_obs`` (statsmodels)."""
        frequency = weights == "frequency"
        n_obs = float(self.w.sum()) if frequency else self.y.shape[0]
        mu = self.mean(self.eta)
        if _gaussian_like(self.family):
            scale = float(self.w @ (self.y - mu) ** 2) / n_obs
        if frequency:
            return self.family.loglike(self.y, mu, freq_weights=self.w, scale=scale)
        return self.family.loglike(self.y, mu, var_weights=self.w, scale=scale)

    def figures(self, scale: float, weights: str, *, target: str, weighted: bool):
        """The header's figures of these rows (see :func:`_header`)."""
        return {
            "dep_variable": target,
            "n_rows": self.y.shape[0],
            "total_weight": float(self.w.sum()),
            "weighted": weighted,
            "rank": self.rank,
            "deviance": self.deviance(self.eta),
            "null_deviance": self.deviance(self.null_eta),
            "pearson_chi2": self.pearson_chi2(),
            "log_likelihood": self.log_likelihood(scale, weights),
        }


def _null_eta(estimator, y_model, w, offset, shape) -> np.ndarray:
    """The linear predictor of the intercept-only GLM with the same offset and
    weights; the offset alone without an intercept."""
    n, n_outputs = shape
    base = (
        np.zeros(shape) if offset is None else np.repeat(offset[:, None], n_outputs, 1)
    )
    if not getattr(estimator, "fit_intercept", True):
        return base
    glm = fit_global_glm(
        np.empty((n, 0)),
        y_model,
        estimator.family_,
        n_outputs=n_outputs,
        sample_weight=w,
        offset=offset,
    )
    return base + glm.intercept


def _header(estimator, figures: dict, coefficients, weights: str) -> dict:
    """The header of :class:`GLMSummary` from the rows' ``figures`` (the
    training rows' kept ones, or those of :meth:`_GLMFit.figures`)."""
    family = estimator.family_
    n_outputs = estimator.global_glm_.coef.shape[0]
    per_block = 1 if n_outputs == 1 else n_outputs - 1  # reference class
    n_params = figures["rank"] * per_block
    n_intercepts = per_block if getattr(estimator, "fit_intercept", True) else 0
    frequency = weights == "frequency"
    n_obs = figures["total_weight"] if frequency else figures["n_rows"]
    llf = figures["log_likelihood"]
    deviance, null_deviance = figures["deviance"], figures["null_deviance"]
    reason = getattr(estimator, "global_only_reason_", None)
    return {
        "dep_variable": figures["dep_variable"],
        "model": type(estimator).__name__,
        "family": family.name,
        "link": family.link_name,
        "power": family.power if isinstance(family, TweedieFamily) else None,
        "theta": family.theta if isinstance(family, NegativeBinomialFamily) else None,
        "n_obs": n_obs,
        "sum_weights": figures["total_weight"] if figures["weighted"] else None,
        "n_params": n_params,
        "df_model": n_params - n_intercepts,
        "df_resid": n_obs - n_params,
        "alpha": float(estimator.alpha),
        "network": "dropped" if estimator.network_ is None else "kept",
        "global_only_reason": reason,
        "cov_type": coefficients.attrs["cov_type"],
        "scale": float(coefficients.attrs["dispersion"]),
        "log_likelihood": llf,
        "deviance": deviance,
        "null_deviance": null_deviance,
        "d2": 1.0 - deviance / null_deviance if null_deviance > 0 else math.nan,
        "pearson_chi2": figures["pearson_chi2"],
        "aic": -2.0 * llf + 2.0 * n_params,
        "bic": -2.0 * llf + n_params * math.log(n_obs),
    }


def _gaussian_like(family) -> bool:
    """The normal distribution: statsmodels concentrates its likelihood."""
    return isinstance(family, GaussianFamily) or (
        isinstance(family, TweedieFamily) and family.power == 0
    )


def target_name(estimator, y) -> str:
    """The header's ``dep_variable``: ``y``'s name (a Series'), else the left
    side of the estimator's formula, else ``"y"``."""
    name = getattr(y, "name", None)
    if name is not None:
        return str(name)
    formula = getattr(estimator, "formula", None)
    left = formula.split("~", 1)[0].strip() if formula and "~" in formula else ""
    return left or "y"


def _notes(estimator, header, coefficients, weights) -> list:
    family = estimator.family_
    notes = []
    if header["network"] == "kept":
        notes.append(
            "The network was kept: these are the global GLM's coefficients and "
            "figures; the fitted model's coefficients vary per row around them "
            "(see local_coef(X) and local_coef_summary(X))."
        )
    else:
        reason = header["global_only_reason"]
        if getattr(estimator, "location_effect_", None) is not None:
            notes.append(
                "The network was dropped, a location effect kept: each row's "
                "intercept is shifted from the global GLM's (see local_coef(X))."
            )
        elif reason is not None:
            notes.append(f"The network was dropped ({reason}): the model is this GLM.")
    reference = coefficients.attrs.get("reference_class")
    if reference is not None:
        notes.append(
            f"Class {reference} is the reference: each block is a class's "
            "coefficients minus the reference class's."
        )
    if math.isnan(header["log_likelihood"]):
        notes.append(
            f"The {family!r} log-likelihood is not available (no closed form "
            "or a series that did not converge): Log-Likelihood, AIC and BIC are NaN."
        )
    if _gaussian_like(family):
        notes.append(
            "The log-likelihood is the gaussian one at the scale sum(w (y - mu)^2) "
            "/ n (its maximum, as statsmodels); Scale is Pearson chi2 / Df Residuals."
        )
    if header["sum_weights"] is not None:
        kind = "var_weights" if weights == "variance" else "freq_weights"
        notes.append(
            f"sample_weight is read as statsmodels' {kind} (weights={weights!r})."
        )
    if header["alpha"] > 0:
        notes.append(
            f"The coefficients are penalised (alpha={header['alpha']:g}); at alpha=0 "
            "they are the maximum-likelihood GLM's."
        )
    return notes


def _format_value(value) -> str:
    if isinstance(value, (bool, np.bool_, str)):
        return str(value)
    if isinstance(value, (int, np.integer)) or float(value).is_integer():
        return f"{int(value):d}"
    return f"{value:.6g}"


def _header_pairs(header: dict) -> tuple[list, list]:
    """The (label, text) pairs of the two columns, padded to one length."""
    columns = [
        [
            (label, _format_value(header[key]))
            for key, label in keys
            if header[key] is not None
        ]
        for keys in (_LEFT, _RIGHT)
    ]
    length = max(len(c) for c in columns)
    left, right = (c + [("", "")] * (length - len(c)) for c in columns)
    return left, right


def _header_lines(header: dict, width: int) -> list[str]:
    half = width // 2
    lines = []
    for (a, b), (c, d) in zip(*_header_pairs(header), strict=True):
        left = f"{a}{b:>{half - len(a) - 3}}   " if a else " " * half
        right = f"{c}{d:>{width - half - len(c)}}" if c else ""
        lines.append((left + right).rstrip())
    return lines


def _format_number(x: float, column: str) -> str:
    if not math.isfinite(x):
        return str(x)
    if column == "p_value":
        return f"{x:.3f}"
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-4):
        return f"{x:.3e}"
    return f"{x:.4f}"


def _coefficient_lines(coefficients: pd.DataFrame, alpha: float, header) -> list:
    """The coefficient table's lines: a header, then one block per class."""
    names = ["coef", "std err", "z", "P>|z|", f"[{alpha / 2:g}", f"{1 - alpha / 2:g}]"]
    blocks = [(header["dep_variable"], coefficients)]
    if isinstance(coefficients.index, pd.MultiIndex):
        classes = coefficients.index.get_level_values(0).unique()
        blocks = [(f"class={c}", coefficients.xs(c, level=0)) for c in classes]
    terms = [str(t) for _, block in blocks for t in block.index]
    term_width = max([len(t) for t in terms] + [len(b) for b, _ in blocks] + [12])
    width = term_width + _CELL * len(names)
    lines = []
    for label, block in blocks:
        lines.append(label.ljust(term_width) + "".join(f"{n:>{_CELL}}" for n in names))
        lines.append("-" * width)
        for term, row in block.iterrows():
            cells = (_format_number(float(row[c]), c) for c in _COLUMNS)
            lines.append(
                str(term).ljust(term_width) + "".join(f"{c:>{_CELL}}" for c in cells)
            )
    return lines
