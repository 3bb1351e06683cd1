"""The models compared by ``benchmarks/run.py``: one small factory each.

Every factory takes a :class:`Task` (the family of the dataset and the run's
settings) and returns an adapter with a common interface:

- ``fit(X, y, offset, groups=None)`` with ``X`` the dataset's DataFrame, ``y``
  the target (int class codes for classification), ``offset`` the log
  exposure or None and ``groups`` the units owning several rows (only GraphGLM
  uses them, for its validation split and neighbour masking);
- ``predict(X, offset)`` returning the predicted mean, shape (n,), for regression
  families, or the class probabilities, shape (n, n_classes), for binomial and
  multinomial.

An adapter may have a ``note()`` method whose text goes into the report.
A factory raises :class:`NotApplicable` when its model does not handle the family
(or an offset); the runner records "n/a" with the reason. ``Task`` and
``NotApplicable`` live in :mod:`benchmarks._lib.task` (shared with
:mod:`benchmarks._lib.peers`, whose tuned peers are registered here). The registry
:data:`MODELS` maps a model name to its factory; :data:`REQUIRES` names the
optional package each model needs, so that a missing one is skipped with a note.

Models that have no offset (scikit-learn's GLMs, the MLP and k-NN) are fitted
for log-link families on the rate ``y / exposure`` with sample weight
``exposure ** (2 - power)`` (power 1 for poisson, 2 for gamma), and their
predictions are multiplied back by the exposure. For Poisson this is the
standard trick (weight = exposure); for any Tweedie power it is exact, since
the unit deviance is homogeneous: ``d(y, mu) = e**(2 - p) d(y / e, mu / e)``.
(scikit-learn normalises the weights by their sum, so its L2 penalty is
relatively a little different.) The MLP and k-NN take the rate only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import tempfile
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.linear_model import (
    GammaRegressor,
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    TweedieRegressor,
)
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import StandardScaler

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor, TabularPreprocessor
from benchmarks._lib.peers import EBMModel, LightGBMTunedModel
from benchmarks._lib.task import (
    CLASSIFICATION,
    LOG_LINK,
    NotApplicable,
    Task,
    string_levels,
    with_categories,
)

# Floor of predicted means for log-link families (models fitted without a link).
MEAN_FLOOR = 1e-6
# GraphGLM's default alpha; glum and scikit-learn use the same scaling.
ALPHA = 1e-6


# ------------------------------------------------------------------ helpers


def _rate_target(task: Task, y, offset):
    """``(y / exposure, exposure ** (2 - p))``, or ``(y, None)`` without offset."""
    if offset is None:
        return y, None
    if task.family not in LOG_LINK:
        raise NotApplicable(f"no offset support for family={task.family!r}")
    exposure = np.exp(offset)
    return y / exposure, exposure ** (2.0 - task.variance_power)


def _rescale(task: Task, mean: np.ndarray, offset) -> np.ndarray:
    """Undo :func:`_rate_target` on predictions and clip to the family's range."""
    mean = np.asarray(mean, dtype=np.float64).reshape(-1)
    if offset is not None:
        mean = mean * np.exp(offset)
    if task.family in LOG_LINK:
        mean = np.maximum(mean, MEAN_FLOOR)
    return mean


def _two_columns(p: np.ndarray) -> np.ndarray:
    """Probability of class 1, shape (n,) or (n, 1), as (n, 2) probabilities."""
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    return np.column_stack([1.0 - p, p])


def _no_offset(name: str, offset) -> None:
    if offset is not None:
        raise NotApplicable(f"{name} has no offset for this family")


# ------------------------------------------------------------------ adapters


class GraphGLMModel:
    """Our estimators: DataFrames, offsets and families are native."""

    def __init__(self, task: Task, package=None, **params) -> None:
        # ``package``: another version of ``autoglm_graph`` (a git revision's).
        classifier, regressor = (
            (GraphGLMClassifier, GraphGLMRegressor)
            if package is None
            else (package.GraphGLMClassifier, package.GraphGLMRegressor)
        )
        self.task = task
        params.setdefault("n_jobs", task.threads)  # None: the estimator's 1
        if task.is_classification:
            self.estimator = classifier(random_state=task.seed, **params)
        else:
            self.estimator = regressor(
                family=task.family,
                power=task.power,
                theta=task.theta,
                random_state=task.seed,
                **params,
            )

    def fit(self, X, y, offset=None, groups=None):
        self.estimator.fit(X, y, offset=offset, groups=groups)
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        if self.task.is_classification:
            return self.estimator.predict_proba(X, offset=offset)
        return self.estimator.predict(X, offset=offset)

    def note(self) -> str:
        """Epochs run, and why the fitted model is the global GLM if it is."""
        est = self.estimator
        if est.is_global_only_:
            return f"global GLM only: {est.global_only_reason_}"
        return f"{est.n_iter_} epochs, best {est.best_epoch_}"


class DesignModel:
    """A scikit-learn style estimator on the output of ``TabularPreprocessor``.

    Parameters
    ----------
    task : Task
    estimator : estimator
        Fitted on the standardised design matrix.
    use_rate : bool, default=True
        Fit log-link families with an offset on the rate (see the module
        docstring); otherwise an offset is not supported.
    weights : bool, default=True
        Pass the rate trick's weights as ``sample_weight``.
    """

    def __init__(self, task: Task, estimator, *, use_rate=True, weights=True) -> None:
        self.task = task
        self.estimator = estimator
        self.use_rate = use_rate
        self.weights = weights

    def fit(self, X, y, offset=None, groups=None):
        self.preprocessor_ = TabularPreprocessor()
        design = self.preprocessor_.fit_transform(X).astype(np.float64)
        if not self.use_rate:
            _no_offset(type(self.estimator).__name__, offset)
        target, weight = _rate_target(self.task, y, offset)
        if weight is not None and self.weights:
            self.estimator.fit(design, target, sample_weight=weight)
        else:
            self.estimator.fit(design, target)
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        design = self.preprocessor_.transform(X).astype(np.float64)
        if self.task.is_classification:
            return self.estimator.predict_proba(design)
        return _rescale(self.task, self.estimator.predict(design), offset)


class GlumModel(DesignModel):
    """glum's ``GeneralizedLinearRegressor``: offsets are native."""

    def fit(self, X, y, offset=None, groups=None):
        self.preprocessor_ = TabularPreprocessor()
        design = self.preprocessor_.fit_transform(X).astype(np.float64)
        self.estimator.fit(design, y, offset=offset)
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        design = self.preprocessor_.transform(X).astype(np.float64)
        mean = self.estimator.predict(design, offset=offset)
        return _two_columns(mean) if self.task.is_classification else mean


class LightGBMModel:
    """LightGBM on the raw DataFrame (pandas categories are native; string
    columns become categories of their training levels).

    Early stopping on a seeded 10% validation split of the training rows; the
    offset, plus the log of the observed rate (LightGBM's own starting value,
    which it skips when given an ``init_score``), enters as ``init_score`` when
    fitting and is added to the raw score (then the inverse link) when
    predicting.
    """

    def __init__(self, task: Task, n_estimators: int) -> None:
        import lightgbm

        self.task = task
        params = {
            "n_estimators": n_estimators,
            "random_state": task.seed,
            "verbose": -1,
            "n_jobs": task.threads,
        }
        if task.is_classification:
            self.estimator = lightgbm.LGBMClassifier(**params)
        else:
            objective = {
                "gaussian": "regression",
                "negative_binomial": "poisson",  # no NB objective: same mean model
            }.get(task.family, task.family)
            if objective == "tweedie":
                params["tweedie_variance_power"] = task.power
            self.estimator = lightgbm.LGBMRegressor(objective=objective, **params)

    def fit(self, X, y, offset=None, groups=None):
        import lightgbm

        if offset is not None and self.task.family not in LOG_LINK:
            raise NotApplicable(f"offset for family={self.task.family!r}")
        self.levels_ = string_levels(X)
        X = with_categories(X, self.levels_)
        stratify = y if self.task.is_classification else None
        parts = train_test_split(
            X,
            y,
            *([] if offset is None else [offset]),
            test_size=0.1,
            random_state=self.task.seed,
            stratify=stratify,
        )
        X_tr, X_val, y_tr, y_val = parts[:4]
        init = {}
        self.base_score_ = 0.0
        if offset is not None:
            # With an init_score LightGBM skips boost_from_average and starts
            # at rate 1 per unit of exposure; start at the observed rate.
            self.base_score_ = float(np.log(np.sum(y_tr) / np.sum(np.exp(parts[4]))))
            init = {
                "init_score": parts[4] + self.base_score_,
                "eval_init_score": [parts[5] + self.base_score_],
            }
        self.estimator.fit(
            X_tr,
            y_tr,
            eval_X=(X_val,),
            eval_y=(y_val,),
            callbacks=[lightgbm.early_stopping(50, verbose=False)],
            **init,
        )
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        X = with_categories(X, self.levels_)
        if self.task.is_classification:
            return self.estimator.predict_proba(X)
        if offset is None:
            return self.estimator.predict(X)
        raw = self.estimator.predict(X, raw_score=True) + self.base_score_
        return np.exp(raw + offset)  # every objective with an offset has a log link


class ContextualizedModel:
    """contextualized-ml's regressor/classifier, context = predictors = design.

    Per-row GLM coefficients from an MLP encoder of the context, trained with MSE
    (gaussian; y standardised) or binary cross-entropy (binomial). Lightning's
    files go to a temporary directory; its console output is silenced.
    """

    def __init__(self, task: Task) -> None:
        if task.family not in ("gaussian", "binomial"):
            raise NotApplicable("MSE and BCE losses only (gaussian, binomial)")
        self.task = task
        self.max_epochs = 10 if task.quick else 100

    @contextlib.contextmanager
    def _quiet(self, workdir):
        for name in ("lightning.pytorch", "pytorch_lightning", "lightning"):
            logging.getLogger(name).setLevel(logging.ERROR)
        with (
            contextlib.chdir(workdir),
            contextlib.redirect_stdout(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            yield

    def fit(self, X, y, offset=None, groups=None):
        import torch
        from contextualized.easy import (
            ContextualizedClassifier,
            ContextualizedRegressor,
        )

        _no_offset("contextualized", offset)
        self.preprocessor_ = TabularPreprocessor()
        design = self.preprocessor_.fit_transform(X)
        y = np.asarray(y, dtype=np.float64)
        self.y_mean_, self.y_scale_ = 0.0, 1.0
        if self.task.family == "gaussian":
            self.y_mean_, self.y_scale_ = y.mean(), y.std() or 1.0
        target = ((y - self.y_mean_) / self.y_scale_)[:, None]
        cls = (
            ContextualizedClassifier
            if self.task.is_classification
            else ContextualizedRegressor
        )
        self.model_ = cls()
        # Its validation split draws from numpy's global random state.
        np.random.seed(self.task.seed)  # noqa: NPY002
        torch.manual_seed(self.task.seed)
        with tempfile.TemporaryDirectory() as tmp, self._quiet(tmp):
            self.model_.fit(
                design,
                design,
                target,
                max_epochs=self.max_epochs,
                train_batch_size=128,
                val_split=0.1,
                es_patience=5,
                checkpoint_path=tmp,
            )
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        design = self.preprocessor_.transform(X)
        with tempfile.TemporaryDirectory() as tmp, self._quiet(tmp):
            if self.task.is_classification:
                # The classifier's predict is rounded; predict_proba is (n, 1, 2).
                proba = self.model_.predict_proba(design, design)
                return _two_columns(np.asarray(proba)[:, 0, 1])
            out = self.model_.predict(design, design)
        out = np.asarray(out, dtype=np.float64).reshape(-1)
        return out * self.y_scale_ + self.y_mean_


# ----------------------------------------------------------------- factories


def graphglm(task: Task):
    """GraphGLM with its defaults (30 epochs at most with ``--quick``)."""
    params = {"max_epochs": 30} if task.quick else {}
    return GraphGLMModel(task, **params)


def graphglm_global(task: Task):
    """GraphGLM with ``local_penalty=inf``: exactly its global GLM."""
    return GraphGLMModel(task, local_penalty=np.inf)


def graphglm_bf16(task: Task):
    """GraphGLM with ``precision="bf16"`` (autocast; run on request only)."""
    params = {"max_epochs": 30} if task.quick else {}
    return GraphGLMModel(task, precision="bf16", **params)


def glum_glm(task: Task):
    """glum's GLM of the family, same L2 penalty scaling (``l1_ratio=0``)."""
    import glum

    if task.family == "multinomial":
        raise NotApplicable("glum has no multinomial family")
    family = {
        "gaussian": "normal",
        "tweedie": glum.TweedieDistribution(task.power),
        "negative_binomial": glum.NegativeBinomialDistribution(theta=task.theta),
    }.get(task.family, task.family)
    estimator = glum.GeneralizedLinearRegressor(
        family=family, alpha=ALPHA, l1_ratio=0.0
    )
    return GlumModel(task, estimator)


def sklearn_glm(task: Task):
    """scikit-learn's GLM of the family with GraphGLM's L2 penalty.

    Ridge's penalty is ``alpha_ridge ||w||^2`` next to the *sum* of squared errors,
    i.e. ``alpha_ridge = ALPHA * n``; LogisticRegression's ``C = 1 / (ALPHA * n)``.
    Both need the number of training rows, so they are built in ``fit``.
    Negative binomial has no scikit-learn GLM: PoissonRegressor (the same log-link
    mean model) stands in.
    """
    return SklearnGLMModel(task)


class SklearnGLMModel(DesignModel):
    """:func:`sklearn_glm`'s adapter: picks the estimator once ``n`` is known."""

    def __init__(self, task: Task) -> None:
        super().__init__(task, None)

    def _estimator(self, n: int):
        family = self.task.family
        if family == "gaussian":
            return Ridge(alpha=ALPHA * n)
        if family in CLASSIFICATION:
            return LogisticRegression(C=1.0 / (ALPHA * n), max_iter=1000)
        solver = {"solver": "newton-cholesky", "max_iter": 1000}
        if family in ("poisson", "negative_binomial"):
            return PoissonRegressor(alpha=ALPHA, **solver)
        if family == "gamma":
            return GammaRegressor(alpha=ALPHA, **solver)
        return TweedieRegressor(
            power=self.task.power, link="log", alpha=ALPHA, **solver
        )

    def fit(self, X, y, offset=None, groups=None):
        self.estimator = self._estimator(len(y))
        if self.task.family in ("gaussian", *CLASSIFICATION):
            _no_offset("sklearn_glm", offset)
        return super().fit(X, y, offset)


def lightgbm_gbm(task: Task):
    """LightGBM with the matching objective, 500 trees (100 with ``--quick``)."""
    return LightGBMModel(task, n_estimators=100 if task.quick else 500)


def lightgbm_tuned(task: Task):
    """LightGBM tuned by Optuna (TPE, 30 trials, 3-fold CV deviance), refitted."""
    return LightGBMTunedModel(task)


def ebm(task: Task):
    """interpret's EBM with its defaults and the family's objective."""
    return EBMModel(task)


def mlp(task: Task):
    """scikit-learn MLP with early stopping.

    Regression fits the squared error on the (standardised) target and clips
    log-link predictions to ``>= MEAN_FLOOR``: an MLP has no link function.
    """
    if task.is_classification:
        est = MLPClassifier(early_stopping=True, random_state=task.seed)
        return DesignModel(task, est, use_rate=False)
    est = TransformedTargetRegressor(
        MLPRegressor(early_stopping=True, random_state=task.seed),
        transformer=StandardScaler(),
    )
    return DesignModel(task, est)


def knn(task: Task):
    """32 nearest neighbours, distance-weighted, on the standardised design.

    Regression clips log-link predictions to ``>= MEAN_FLOOR`` (a mean of zeros
    is possible). No sample weights: the rate trick takes the rate only.
    """
    params = {"n_neighbors": 32, "weights": "distance"}
    if task.is_classification:
        return DesignModel(task, KNeighborsClassifier(**params), use_rate=False)
    return DesignModel(task, KNeighborsRegressor(**params), weights=False)


def contextualized(task: Task):
    """contextualized-ml (gaussian and binomial only); see ContextualizedModel."""
    return ContextualizedModel(task)


MODELS: dict[str, Callable[[Task], object]] = {
    "graphglm": graphglm,
    "graphglm_global": graphglm_global,
    "glum": glum_glm,
    "sklearn_glm": sklearn_glm,
    "lightgbm": lightgbm_gbm,
    "mlp": mlp,
    "knn": knn,
    "contextualized": contextualized,
}
"""Model name -> factory ``Task -> adapter``."""

EXTRA_MODELS: dict[str, Callable[[Task], object]] = {
    "graphglm_bf16": graphglm_bf16,
    "lightgbm_tuned": lightgbm_tuned,
    "ebm": ebm,
}
"""Models run only when named with ``--models`` (not in the default set)."""

REQUIRES: dict[str, str] = {
    "glum": "glum",
    "lightgbm": "lightgbm",
    "lightgbm_tuned": "lightgbm",
    "ebm": "interpret",
    "contextualized": "contextualized",
}
"""Model name -> importable module it needs (others: core dependencies only)."""


def missing_package(model: str) -> str | None:
    """The module ``model`` needs when it is not importable, else None."""
    module = REQUIRES.get(model)
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    if model == "contextualized":
        return "contextualized (pip install contextualized-ml)"
    return module
