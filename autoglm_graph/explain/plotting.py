"""Plots of fitted graph GLMs and of hyperparameter searches (needs matplotlib).

matplotlib is an optional dependency (``pip install matplotlib``, or the
``plot`` extra: ``pip install "autoglm-graph[plot]"``); it is imported when a
function is called, not when this module is.

Every function takes ``ax=None`` and returns the Axes it drew on (a new figure
is created when ``ax`` is None):

- :func:`plot_local_coef`: the spread of the per-row coefficients of each
  feature, against the global GLM's coefficient.
- :func:`plot_coefficient_map`: a per-row coefficient (or the model's linear
  predictor) against the global GLM's, over two coordinate columns (a map).
- :func:`plot_neighborhood`: the training rows one row attended to, with their
  attention weights and similarities.
- :func:`plot_history`: train and validation deviance per epoch, the kept epoch
  and the global GLM's validation deviance.
- :func:`plot_term`: the global GLM's shape of a numeric column (its linear
  term and, with ``splines``, its basis), with a pointwise band.
- :func:`plot_search_history`, :func:`plot_param_importances`: an Optuna study
  (or a search estimator with a ``study_`` attribute).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from ._shapes import term_shape

if TYPE_CHECKING:  # pragma: no cover
    import optuna
    from matplotlib.axes import Axes

__all__ = [
    "plot_coefficient_map",
    "plot_history",
    "plot_local_coef",
    "plot_neighborhood",
    "plot_param_importances",
    "plot_search_history",
    "plot_term",
]


def _pyplot():
    """Import matplotlib.pyplot, or say how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            "autoglm_graph.explain.plotting needs matplotlib; install it with "
            '`pip install matplotlib` (or `pip install "autoglm-graph[plot]"`).'
        ) from error
    return plt


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value, so that it prints as ``1``, not
    ``np.int64(1)`` (numpy >= 2 repr)."""
    return value.item() if isinstance(value, np.generic) else value


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=figsize, layout="constrained")
    return ax


# --------------------------------------------------------- local coefficients
def _global_terms(model, terms: pd.Index, class_label) -> pd.Series:
    """The global GLM's intercept and slopes (of one class), named by ``terms``."""
    coef = np.atleast_2d(model.coef_)
    intercept = np.atleast_1d(model.intercept_)
    row = 0 if class_label is None else list(model.classes_).index(class_label)
    return pd.Series(np.concatenate([[intercept[row]], coef[row]]), index=terms)


def _select_class(model, local: pd.DataFrame, class_label):
    """Reduce a multinomial (class, term) frame to one class's terms."""
    if not isinstance(local.columns, pd.MultiIndex):
        return local, None
    classes = list(model.classes_)
    if class_label is None:
        class_label = classes[0]
    if class_label not in classes:
        raise ValueError(
            f"The 'class_label' parameter must be one of "
            f"{[_plain(c) for c in classes]}; got {_plain(class_label)!r}."
        )
    return local[class_label], class_label


def _choose_features(local: pd.DataFrame, features, max_features: int) -> list[str]:
    if features is None:
        spread = local.drop(columns="intercept").std(axis=0)
        order = spread.sort_values(ascending=False, kind="stable").index
        return list(order[:max_features])
    features = [features] if isinstance(features, str) else list(features)
    unknown = [f for f in features if f not in local.columns]
    if unknown:
        raise ValueError(
            f"Unknown features {unknown}; expected names from "
            f"'intercept' and feature_names_out_: {list(local.columns[1:])}."
        )
    return features


def _horizontal_boxplot(ax: Axes, data: list[np.ndarray]) -> None:
    import matplotlib

    major, minor = (int(p) for p in matplotlib.__version__.split(".")[:2])
    kwargs = (
        {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}
    )
    ax.boxplot(data, widths=0.6, showfliers=True, **kwargs)


def plot_local_coef(
    model,
    X,
    features: str | list[str] | None = None,
    ax: Axes | None = None,
    *,
    class_label=None,
    max_features: int = 15,
    standardize: bool = True,
) -> Axes:
    """Distribution of the per-row coefficients of each feature (box plots).

    Each box summarises ``model.local_coef(X)`` for one term; a red diamond
    marks the global GLM's coefficient of the same term. With a global-only
    model the boxes collapse onto the diamonds.

    Parameters
    ----------
    model : GraphGLMRegressor or GraphGLMClassifier
        A fitted model.
    X : array-like or DataFrame of shape (n_samples, n_features)
        Rows whose local coefficients are summarised.
    features : str, list of str or None, default=None
        Terms to show (names from ``"intercept"`` and
        ``model.feature_names_out_``). None shows the slopes with the largest
        spread across rows, at most ``max_features``.
    ax : matplotlib Axes or None, default=None
        Where to draw; a new figure when None.
    class_label : label or None, default=None
        For a multinomial model, the class whose coefficients are shown (the
        first class when None).
    max_features : int, default=15
        How many slopes ``features=None`` shows (largest spread first).
    standardize : bool, default=True
        Show the slopes of numeric columns per standard deviation of the
        column (of fit), so that columns on different scales share the axis;
        False shows them per unit. Levels of categorical columns are per level
        either way.

    Returns
    -------
    matplotlib Axes
    """
    local = model.local_coef(X)
    local, class_label = _select_class(model, local, class_label)
    global_terms = _global_terms(model, local.columns, class_label)
    if standardize:
        scale = model.predictor().glm_terms.scale
        factor = pd.Series(np.r_[1.0, scale], index=local.columns)
        local, global_terms = local * factor, global_terms * factor
    features = _choose_features(local, features, max_features)
    ax = _axes(ax, (7.0, 1.0 + 0.45 * len(features)))
    positions = np.arange(1, len(features) + 1)
    _horizontal_boxplot(ax, [local[f].to_numpy() for f in features])
    ax.scatter(
        global_terms[features].to_numpy(),
        positions,
        marker="D",
        color="tab:red",
        zorder=3,
        label="global GLM",
    )
    ax.set_yticks(positions)
    ax.set_yticklabels(features)
    ax.invert_yaxis()  # the first feature on top
    ax.axvline(0.0, color="0.7", linewidth=0.8, zorder=0)
    unit = "standard deviation" if standardize else "unit"
    ax.set_xlabel(f"coefficient (per {unit} of the column; per level)")
    title = f"per-row coefficients of {len(local)} rows"
    if class_label is not None:
        title += f", class {_plain(class_label)!r}"
    if getattr(model, "is_global_only_", False):
        title += (
            "\nno network: the model is its global GLM "
            f"({model.global_only_reason_}), one coefficient per term"
        )
    ax.set_title(title)
    ax.legend(loc="best")
    return ax


# ----------------------------------------------------------------------- map
#: The term of plot_coefficient_map that maps the whole linear predictor.
LINEAR_PREDICTOR = "linear_predictor"


def _map_values(model, X, term: str, class_label) -> np.ndarray:
    """Per row: the local coefficient of ``term`` less the global one."""
    if term == LINEAR_PREDICTOR:
        predictor = model.predictor()
        design = predictor.design(X)
        eta, _ = predictor.coefficients(design)
        return (eta - predictor.global_eta(design, None))[:, 0]
    local = model.local_coef(X)
    local, class_label = _select_class(model, local, class_label)
    if term not in local.columns:
        raise ValueError(
            f"The 'term' parameter must be {LINEAR_PREDICTOR!r}, 'intercept' or "
            f"one of feature_names_out_ {list(local.columns[1:])}; got {term!r}."
        )
    global_terms = _global_terms(model, local.columns, class_label)
    return local[term].to_numpy() - global_terms[term]


def plot_coefficient_map(
    model,
    X,
    term: str = LINEAR_PREDICTOR,
    x: str = "long",
    y: str = "lat",
    ax: Axes | None = None,
    *,
    class_label=None,
    cmap: str = "RdBu_r",
) -> Axes:
    """Map of where a coefficient differs from the global GLM's.

    Each location (a distinct pair of coordinates, e.g. a municipality centre)
    is a dot coloured by the mean over its rows of the local coefficient less
    the global one, on a diverging scale centred at 0; the dot's area grows
    with the number of rows there.

    Parameters
    ----------
    model : GraphGLMRegressor or GraphGLMClassifier
        A fitted model.
    X : DataFrame of shape (n_samples, n_features)
        Rows to map: the model's columns and the coordinate columns ``x`` and
        ``y`` (model inputs or extra columns).
    term : str, default="linear_predictor"
        ``"linear_predictor"``: the model's linear predictor less the global
        GLM's (offset excluded), for the log link the log of the local
        relativity, e.g. of the base claim frequency. Otherwise ``"intercept"``
        or a name of ``model.feature_names_out_``: that per-row coefficient
        (``local_coef``, the user's units) less the global one.
    x, y : str, default="long", "lat"
        The coordinate columns of ``X``.
    ax : matplotlib Axes or None, default=None
        Where to draw; a new figure when None.
    class_label : label or None, default=None
        For a multinomial model, the class whose coefficients are mapped.
    cmap : str, default="RdBu_r"
        A diverging colormap.

    Returns
    -------
    matplotlib Axes
    """
    if not hasattr(X, "columns") or x not in X.columns or y not in X.columns:
        raise ValueError(
            f"X must be a DataFrame with the coordinate columns x={x!r} and y={y!r}."
        )
    check_is_fitted(model, "global_glm_")
    inputs = X
    if hasattr(model, "feature_names_in_"):  # the coordinates may be extra columns
        inputs = X[list(model.feature_names_in_)]
    values = _map_values(model, inputs, term, class_label)
    places = _mean_per_place(X[x], X[y], values)
    label = (
        "linear predictor - global GLM's"
        if term == LINEAR_PREDICTOR
        else f"local - global coefficient of {term}"
    )
    ax = _scatter_places(places, label, ax, cmap)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{label}: {len(places)} locations, {len(X)} rows")
    return ax


def _mean_per_place(xs, ys, values) -> pd.DataFrame:
    """Per distinct pair of coordinates ``x``, ``y``: the ``mean`` of the
    values of its rows and their number (``size``)."""
    frame = pd.DataFrame(
        {"x": np.asarray(xs, float), "y": np.asarray(ys, float), "v": values}
    )
    places = frame.groupby(["x", "y"], sort=False)["v"].agg(["mean", "size"])
    return places.reset_index()


def _scatter_places(places: pd.DataFrame, label: str, ax, cmap: str) -> Axes:
    """One dot per place, coloured on a diverging scale centred at 0 (clipped
    at the 98th percentile of the absolute means), its area by its rows."""
    limit = float(np.quantile(np.abs(places["mean"]), 0.98)) or 1.0
    from matplotlib.colors import TwoSlopeNorm

    ax = _axes(ax, (7.0, 6.0))
    points = ax.scatter(
        places["x"],
        places["y"],
        c=places["mean"],
        s=8.0 * np.sqrt(places["size"] / places["size"].median()),
        cmap=cmap,
        norm=TwoSlopeNorm(0.0, -limit, limit),
        edgecolors="none",
    )
    ax.figure.colorbar(points, ax=ax, label=label, extend="both")
    return ax


# ---------------------------------------------------------------- neighbours
def plot_term(
    model,
    column: str,
    X=None,
    y=None,
    sample_weight=None,
    offset=None,
    *,
    level: float = 0.95,
    ax: Axes | None = None,
) -> Axes:
    """The global GLM's shape of a numeric column, with a pointwise band.

    The column's contribution to the linear predictor (its linear term plus,
    with ``splines``, its penalised basis) over its training range, centred on
    the grid's mean; with the training data (``X``, ``y``, ...) the band of
    ``level`` from :func:`~autoglm_graph.glm.coef_table`'s covariance (the
    Bayesian covariance of the penalised fit).

    Parameters
    ----------
    model : GraphGLMRegressor or GraphGLMClassifier
        Fitted, one linear predictor.
    column : str
        A numeric term (a preprocessed column's name, e.g. ``"age"``).
    X, y, sample_weight, offset : default=None
        The training data; without ``y`` no band is drawn.
    level : float, default=0.95
    ax : matplotlib Axes, default=None

    Returns
    -------
    matplotlib Axes
    """
    shape = term_shape(model, column, X, y, sample_weight, offset, level=level)
    ax = _axes(ax, (6.0, 4.0))
    if "lower" in shape:
        ax.fill_between(
            shape["value"],
            shape["lower"],
            shape["upper"],
            alpha=0.3,
            label=f"{level:.0%} pointwise band",
        )
    ax.plot(shape["value"], shape["contribution"], color="C0", label=column)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xlabel(column)
    ax.set_ylabel("contribution to the linear predictor (centred)")
    ax.legend(loc="best")
    return ax


def plot_neighborhood(model, X_row, ax: Axes | None = None) -> Axes:
    """The training rows one row attended to, by attention weight.

    One bar per neighbour (in order of similarity rank), its height the
    last layer's attention weight (mean over heads) and its colour the cosine
    similarity of the two rows, from ``model.explain(X_row)``.

    Parameters
    ----------
    model : GraphGLMRegressor or GraphGLMClassifier
        A fitted model with a network (not global-only).
    X_row : DataFrame with one row, Series or 1-d array
        The row (``X.iloc[[i]]``, ``X.iloc[i]`` or ``X[i]``).
    ax : matplotlib Axes or None, default=None

    Returns
    -------
    matplotlib Axes

    Raises
    ------
    ValueError
        If ``X_row`` has more than one row. A model that is its global GLM
        (``explain`` is empty) gets an empty plot that says so.
    """
    check_is_fitted(model, "global_glm_")
    n_rows = X_row.shape[0] if hasattr(X_row, "shape") and np.ndim(X_row) == 2 else 1
    if n_rows != 1:
        raise ValueError(
            f"plot_neighborhood shows one row; got X_row with {n_rows} rows."
        )
    if isinstance(X_row, pd.Series):  # a row taken with df.iloc[i]
        X_row = X_row.to_frame().T.infer_objects()
    elif not hasattr(X_row, "iloc") and np.ndim(X_row) == 1:
        X_row = np.asarray(X_row)[None, :]
    table = model.explain(X_row).sort_values("rank")
    if table.empty:  # as explain: the global GLM attends to no row
        return _empty_neighborhood(model, ax)
    plt = _pyplot()
    ax = _axes(ax, (max(5.0, 0.35 * len(table) + 2.0), 4.0))
    cmap = plt.get_cmap("viridis")
    low, high = table["similarity"].min(), table["similarity"].max()
    if not high - low > 1e-6:  # one colour for equal similarities
        low, high = low - 0.01, high + 0.01
    norm = plt.Normalize(vmin=low, vmax=high)
    positions = np.arange(len(table))
    ax.bar(positions, table["attention"], color=cmap(norm(table["similarity"])))
    ax.set_xticks(positions)
    ax.set_xticklabels([str(n) for n in table["neighbor"]], rotation=90)
    ax.set_xlabel("training row (by similarity rank)")
    ax.set_ylabel("attention weight")
    row = table["row"].iloc[0] if len(table) else "?"
    ax.set_title(f"row {row}: {len(table)} neighbours")
    colorbar = ax.figure.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax)
    colorbar.set_label("cosine similarity")
    return ax


# ------------------------------------------------------------------ training
def plot_history(model, ax: Axes | None = None) -> Axes:
    """Train and validation deviance per epoch.

    The kept epoch (``best_epoch_``) is marked with a dotted vertical line and
    the global GLM's validation deviance (epoch 0 of ``history_``) with a
    dashed horizontal line: the network is kept only when it ends up below it
    (by ``FitPolicy.keep_standard_errors`` standard errors).

    Parameters
    ----------
    model : GraphGLMRegressor or GraphGLMClassifier
        A fitted model whose network was trained (``history_`` not empty).
    ax : matplotlib Axes or None, default=None

    Returns
    -------
    matplotlib Axes

    Raises
    ------
    ValueError
        If no network was trained (e.g. ``local_penalty=inf``).
    """
    check_is_fitted(model, "global_glm_")
    history = pd.DataFrame(model.history_)
    epochs = history[history["epoch"] > 0] if len(history) else history
    if len(epochs) == 0:
        raise ValueError(
            "plot_history needs a trained network; this model trained none "
            f"({getattr(model, 'global_only_reason_', None)})."
        )
    ax = _axes(ax, (7.0, 4.0))
    ax.plot(epochs["epoch"], epochs["train_deviance"], label="train deviance")
    if "val_deviance" in epochs:
        ax.plot(epochs["epoch"], epochs["val_deviance"], label="validation deviance")
    baseline = history.loc[history["epoch"] == 0].get("val_deviance", [])
    if len(baseline):
        ax.axhline(
            baseline.iloc[0],
            color="0.3",
            linestyle="--",
            label="global GLM (validation)",
        )
    best = getattr(model, "best_epoch_", None)
    if best is not None and not model.is_global_only_:
        ax.axvline(best, color="tab:red", linestyle=":", label=f"kept epoch {best}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean deviance")
    title = "training history"
    if model.is_global_only_:
        title += " (network not kept: the model is the global GLM)"
    ax.set_title(title)
    ax.legend(loc="best")
    return ax


# -------------------------------------------------------------------- search
def _study(search_or_study: Any) -> optuna.Study:
    import optuna

    study = getattr(search_or_study, "study_", search_or_study)
    if not isinstance(study, optuna.Study):
        raise TypeError(
            "Expected an optuna Study or a fitted search with a 'study_' "
            f"attribute; got {type(search_or_study).__name__}."
        )
    if len(study.directions) != 1:
        raise ValueError(
            f"Expected a single-objective study; got {len(study.directions)} "
            "objectives."
        )
    return study


def _complete_trials(study: optuna.Study) -> list:
    import optuna

    trials = study.get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)
    )
    if not trials:
        raise ValueError(f"The study {study.study_name!r} has no completed trials.")
    return trials


def plot_search_history(search_or_study: Any, ax: Axes | None = None) -> Axes:
    """Objective value of each completed trial and the best value so far.

    Draws the same picture as ``optuna.visualization.matplotlib.
    plot_optimization_history``, but on ``ax`` (Optuna's function always
    opens a new figure).

    Parameters
    ----------
    search_or_study : optuna.Study or object with a ``study_`` attribute
        E.g. a fitted ``autoglm_graph.search.GraphGLMSearchCV``.
    ax : matplotlib Axes or None, default=None

    Returns
    -------
    matplotlib Axes
    """
    import optuna

    study = _study(search_or_study)
    trials = _complete_trials(study)
    numbers = np.array([t.number for t in trials])
    values = np.array([t.value for t in trials], dtype=float)
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    best = np.maximum.accumulate(values) if maximize else np.minimum.accumulate(values)
    ax = _axes(ax, (7.0, 4.0))
    ax.scatter(numbers, values, color="tab:blue", label="objective value")
    ax.step(numbers, best, where="post", color="tab:red", label="best value")
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(_integer_ticks())  # trials are numbered: no 2.5
    ax.set_ylabel("objective value")
    direction = "maximize" if maximize else "minimize"
    ax.set_title(f"optimization history of {study.study_name!r} ({direction})")
    ax.legend(loc="best")
    return ax


def _integer_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def plot_param_importances(search_or_study: Any, ax: Axes | None = None) -> Axes:
    """Hyperparameter importances of a study (horizontal bars).

    The importances are ``optuna.importance.get_param_importances`` (fANOVA by
    default), as in ``optuna.visualization.matplotlib.plot_param_importances``,
    drawn on ``ax``.

    Parameters
    ----------
    search_or_study : optuna.Study or object with a ``study_`` attribute
    ax : matplotlib Axes or None, default=None

    Returns
    -------
    matplotlib Axes

    Raises
    ------
    ValueError
        If the study has fewer than two completed trials or no parameters.
    """
    import optuna

    study = _study(search_or_study)
    if len(_complete_trials(study)) < 2:
        raise ValueError(
            "Parameter importances need at least 2 completed trials; the study "
            f"{study.study_name!r} has 1."
        )
    importances = optuna.importance.get_param_importances(study)
    if not importances:
        raise ValueError(f"The study {study.study_name!r} has no parameters.")
    names = list(importances)[::-1]  # the most important on top
    ax = _axes(ax, (7.0, 1.0 + 0.4 * len(names)))
    ax.barh(names, [importances[n] for n in names], color="tab:blue")
    ax.set_xlabel("importance")
    ax.set_title(f"hyperparameter importances of {study.study_name!r}")
    return ax


def _empty_neighborhood(model, ax: Axes | None) -> Axes:
    """plot_neighborhood's axes for a model without a network, with a note."""
    ax = _axes(ax, (5.0, 4.0))
    reason = getattr(model, "global_only_reason_", None) or "no network"
    ax.text(
        0.5,
        0.5,
        f"no neighbours: the model is its global GLM\n({reason})",
        ha="center",
        va="center",
        wrap=True,
        transform=ax.transAxes,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title("neighbourhood of one row")
    return ax
