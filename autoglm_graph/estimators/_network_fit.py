"""The network's part of ``fit``: the validation split, the rows it trains
on, the trainer, and the fitted network.

Each function reads the estimator's parameters (and its fitted global GLM)
and returns what it made; the estimator keeps it. The network's modules
(torch among them) are imported where a network is trained: a model that is
the global GLM fits and predicts without them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import (
    GroupKFold,
    GroupShuffleSplit,
    KFold,
    StratifiedKFold,
    train_test_split,
)

from ..glm import Family, GLMTerms
from ..policy import FitPolicy
from ..utils import caller_stacklevel, resolve_precision, torch
from ._rows import FitRows

if TYPE_CHECKING:
    from ..network import FittedNetwork, RowData, Trainer


def policy_of(estimator) -> FitPolicy:
    """The estimator's ``fit_policy``; the defaults for None (or an estimator
    pickled before the parameter existed)."""
    return getattr(estimator, "fit_policy", None) or FitPolicy()


def split_rows(estimator, rows: FitRows, seed: int):
    """Positions of the training rows and of the validation rows (None
    without ``early_stopping``), sorted: ``validation_fraction`` of the rows,
    whole groups with ``groups``, stratified by class where the classes
    allow."""
    positions = np.arange(rows.n_samples)
    if not estimator.early_stopping:
        return positions, None
    fraction = estimator.validation_fraction
    if rows.groups is not None:
        splitter = GroupShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
        train, val = next(splitter.split(positions, groups=rows.groups))
        return np.sort(train), np.sort(val)
    stratify = estimator._stratify_labels(rows.y)
    try:
        train, val = train_test_split(
            positions, test_size=fraction, random_state=seed, stratify=stratify
        )
    except ValueError:  # a class too small to stratify
        train, val = train_test_split(positions, test_size=fraction, random_state=seed)
    return np.sort(train), np.sort(val)


def fold_rows(estimator, rows: FitRows, n_folds: int, seed: int) -> list[np.ndarray]:
    """The held-out positions of each of ``n_folds`` folds of all the rows
    (fewer where there are fewer groups; none below 2), sorted and shuffled
    by ``seed``: whole groups with ``groups``, stratified by class where the
    classes allow, as :func:`split_rows`'s one validation split."""
    positions = np.arange(rows.n_samples)
    labels = {}
    if rows.groups is not None:
        n_folds = min(n_folds, len(np.unique(rows.groups)))
        splitter = GroupKFold
        labels = {"groups": rows.groups}
    else:
        n_folds = min(n_folds, rows.n_samples)
        splitter = KFold
        stratify = estimator._stratify_labels(rows.y)
        # Stratified where every class has a row in every fold.
        if (
            stratify is not None
            and np.unique(stratify, return_counts=True)[1].min() >= n_folds
        ):
            splitter = StratifiedKFold
            labels = {"y": stratify}
    if n_folds < 2:
        return []
    folds = splitter(n_folds, shuffle=True, random_state=seed).split(
        positions, **labels
    )
    return [np.sort(held) for _, held in folds]


@dataclass(frozen=True)
class TrainedNetwork:
    """What the network's training gives the estimator.

    Attributes
    ----------
    history : list of dict
        Per-epoch records (``history_``).
    n_iter : int
        Epochs run (``n_iter_``).
    gain, gain_se : float or None
        The validation deviance's gain over the global GLM and its standard
        error (``validation_gain_``, ``validation_gain_se_``).
    best_epoch : int or None
        The kept epoch (``best_epoch_``); None when no epoch beat the GLM.
    network : FittedNetwork or None
        The fitted network; None when no epoch beat the GLM.
    """

    history: list
    n_iter: int
    gain: float | None
    gain_se: float | None
    best_epoch: int | None = None
    network: FittedNetwork | None = None


def fit_network(
    estimator,
    rows: FitRows,
    terms: GLMTerms,
    split: tuple[np.ndarray, np.ndarray | None],
    eta_shift: np.ndarray | None,
    seed: int,
    neighbor_cache,
    times,
) -> TrainedNetwork:
    """Train the network of per-row deviations on the training rows of
    ``split``, early-stopped on its validation rows; ``eta_shift`` is the
    location effect's shift of the global GLM's linear predictor (None
    without)."""

    train_pos = split[0]
    train, val = split_data(estimator, rows, terms, split, eta_shift)
    trainer = make_trainer(estimator, terms, train.context.shape[1], train)
    result = _train(estimator, trainer, train, val, seed, neighbor_cache, times)
    n_iter = max(1, len([h for h in result.history if h["epoch"] > 0]))
    trained = TrainedNetwork(result.history, n_iter, result.gain, result.gain_se)
    if result.best is None:
        return trained
    _warn_if_still_improving(estimator, n_iter, result.best.epoch)
    network = _fitted_network(estimator, trainer, result, train, train_pos, val, times)
    return TrainedNetwork(
        result.history, n_iter, result.gain, result.gain_se, result.best.epoch, network
    )


def split_data(
    estimator,
    rows: FitRows,
    terms: GLMTerms,
    split: tuple[np.ndarray, np.ndarray | None],
    eta_shift: np.ndarray | None,
) -> tuple[RowData, RowData | None]:
    """The training rows and the validation rows (None: none) of ``split`` as
    the network reads them (:func:`row_data`)."""
    train_pos, val_pos = split
    data = row_data(estimator, rows, terms, train_pos, eta_shift)
    device = estimator.device_
    if rows.groups is not None:
        data.group = torch.as_tensor(rows.groups, device=device)
    train = data.subset(torch.as_tensor(train_pos, device=device))
    val = None
    if val_pos is not None and len(val_pos):
        val = data.subset(torch.as_tensor(val_pos, device=device))
    return train, val  # copies: the full set is freed before training


def _train(estimator, trainer, train, val, seed, neighbor_cache, times):
    """``trainer.fit`` in the fit's own random stream."""
    # The fit's own generator (seeded from the fit's seed) serves the
    # fused path; fork_rng keeps the caller's global generator as it was
    # for torch_geometric's layers, which draw from it.
    # On CUDA torch_geometric's layers draw from the device's generator.
    device = estimator.device_
    cuda = [device] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        return trainer.fit(
            train, val, neighbor_cache=neighbor_cache, seed=seed, times=times
        )


def _fitted_network(
    estimator, trainer, result, train, positions, val, times
) -> FittedNetwork:
    """The trained network with its training rows, graph and prediction
    index (calibrated on the validation rows where there are any)."""
    from ..network import FittedNetwork

    network = FittedNetwork(
        net=result.net,
        graph=trainer.graph,
        n_outputs=trainer.n_outputs,
        precision=result.precision,
        training=trainer.settings(),
        rows=train,
        states=result.states,
        positions=positions,
        index=result.index,
    )
    with times.phase("prediction_index"):
        network.fit_prediction_index(
            None if val is None else val.context, policy_of(estimator)
        )
    return network


def _warn_if_still_improving(estimator, n_iter: int, best_epoch: int) -> None:
    """ConvergenceWarning when max_epochs cut a still-improving training.

    Early stopping would have gone on: the kept epoch is among the last
    ``n_iter_no_change`` ones, as scikit-learn's iterative estimators warn
    when they reach ``max_iter``.
    """
    max_epochs = estimator.max_epochs
    if not estimator.early_stopping or n_iter < max_epochs:
        return
    if max_epochs - best_epoch < estimator.n_iter_no_change:
        warnings.warn(
            f"Training stopped at max_epochs={max_epochs} while the "
            f"validation deviance was still improving (best epoch "
            f"{best_epoch}); raise max_epochs for a better fit.",
            ConvergenceWarning,
            stacklevel=caller_stacklevel(),  # the user's fit
        )


def make_trainer(
    estimator,
    terms: GLMTerms,
    n_features: int,
    train: RowData,
) -> Trainer:
    """The :class:`~autoglm_graph.network.Trainer` of the estimator's
    parameters, for ``n_features`` context columns and the training rows."""
    from ..network import EarlyStopping, GraphConfig, NetConfig, Trainer

    est = estimator
    policy = policy_of(est)
    n_outputs = est._n_outputs
    target_channels = 0 if train.targets is None else train.targets.shape[1]
    net = NetConfig(
        n_features,
        (terms.n_network_terms + 1) * n_outputs,
        hidden_channels=est.hidden_channels,
        heads=est.heads,
        num_layers=est.num_layers,
        target_channels=target_channels,
        dropout=est.dropout,
        conv=est.conv,
        message_passing=est.message_passing,
        **_numeric_embedding(est, train),
    )
    callbacks = list(est.callbacks or [])
    if est.early_stopping:
        stopping = EarlyStopping(est.n_iter_no_change, est.tol, policy=policy)
        callbacks.insert(0, stopping)
    return Trainer(
        net=net,
        family=est.family_,
        n_outputs=n_outputs,
        graph=GraphConfig(
            est.graph_space,
            est.n_neighbors,
            est.threshold,
            est.graph_refresh,
            est.graph_backend,
        ),
        learning_rate=est.learning_rate,
        weight_decay=est.weight_decay,
        local_penalty=est.local_penalty,
        ema_decay=est.ema_decay,
        max_epochs=est.max_epochs,
        batch_size=est.batch_size,
        precision=resolve_precision(est.precision, est.device_),
        callbacks=callbacks,
        verbose=est.verbose,
        policy=policy,
        fit_intercept=terms.fit_intercept,
        coef_map=est._coefficient_map(),
        reduce=terms.reduce if terms.varied_bases else None,
    )


def row_data(
    estimator,
    rows: FitRows,
    terms: GLMTerms,
    train_pos: np.ndarray,
    eta_shift: np.ndarray | None = None,
) -> RowData:
    """The rows as the network reads them (float32 tensors on the device):
    context, the GLM's design, target, relative weights, the global GLM's
    linear predictor (plus ``eta_shift``) and the neighbours' outcome
    features (``use_neighbor_targets``)."""
    from ..network import RowData

    device = estimator.device_
    # np.require copies read-only input (a pandas Series' values): torch
    # warns on non-writable arrays.
    as_tensor = lambda a: torch.as_tensor(  # noqa: E731
        np.require(a, np.float32, ["C", "W"]), device=device
    )
    # The fitted global GLM's, which the network's deviations add to.
    eta_global = estimator.predictor().global_eta(rows.design, rows.offset)
    if eta_shift is not None:  # the location effect, leave-one-out on train
        eta_global = eta_global + eta_shift[:, None]
    targets = None
    if estimator.use_neighbor_targets:
        targets = outcome_features(
            estimator.family_, rows.y, eta_global, rows.sample_weight, train_pos
        )
    # The design is also the network's context: one tensor serves both
    # when the GLM reads every column as it is.
    matrix = as_tensor(terms.context(rows.design))
    glm_design = matrix
    if not terms.full or terms.add is not None:
        glm_design = as_tensor(terms.select(rows.design))
    sample_weight = rows.sample_weight
    return RowData(
        context=matrix,
        design=glm_design,
        y=as_tensor(rows.y),
        # Relative weights: the loss is a weighted mean, and weights near
        # 1e300 would be infinite in float32 (unit weights are unchanged).
        weight=as_tensor(sample_weight / np.mean(sample_weight)),
        eta_global=as_tensor(eta_global),
        targets=None if targets is None else as_tensor(targets),
    )


def outcome_features(
    family: Family,
    y: np.ndarray,
    eta_global: np.ndarray,
    sample_weight: np.ndarray,
    train_pos: np.ndarray,
) -> np.ndarray:
    """What a training row's messages say about its outcome, standardised.

    Two blocks: the family's ``outcome_transform`` of the target (the log,
    smoothed so that log(0) is finite, under the log link; one-hot classes for
    multinomial) and its ``residual`` under the global GLM (Pearson; y - mu for
    multinomial). Standardised with the training rows' weighted moments.
    """
    y2 = y.reshape(len(y), -1).astype(np.float64)
    eta = torch.as_tensor(eta_global if y2.shape[1] > 1 else eta_global[:, 0])
    mu = family.inverse_link(eta).numpy().reshape(len(y), -1)
    transformed = family.outcome_transform(y2, train_pos, sample_weight)
    features = np.concatenate([transformed, family.residual(y2, mu)], axis=1)
    weights = sample_weight[train_pos]
    mean = np.average(features[train_pos], axis=0, weights=weights)
    std = np.sqrt(
        np.average((features[train_pos] - mean) ** 2, axis=0, weights=weights)
    )
    return (features - mean) / np.where(std > 1e-12, std, 1.0)


def _numeric_embedding(est, train) -> dict:
    """The network's ``numeric_embedding`` and the context's numeric columns
    (an estimator loaded from before the parameter: ``"linear"``)."""
    kind = getattr(est, "numeric_embedding", "linear")
    if kind == "linear":
        return {}
    from ..network import numeric_columns, quantile_edges

    numeric = numeric_columns(train.context)
    spec = {"numeric_embedding": kind, "numeric_columns": numeric}
    if kind == "piecewise_linear":
        bins = policy_of(est).embedding_bins
        spec["numeric_edges"] = quantile_edges(train.context, numeric, bins)
    return spec
