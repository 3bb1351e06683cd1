"""The training loop's costs and decisions: searches, early stopping, threads."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from autoglm_graph import FitPolicy, GraphGLMRegressor, get_family
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.network import epochs, training
from autoglm_graph.network.modules import NetConfig
from autoglm_graph.network.stopping import EarlyStopping, paired_gain

SMALL = {"hidden_channels": 8, "heads": 2, "n_neighbors": 4}


@pytest.fixture(scope="module")
def poisson_rows():
    X, y, _ = make_varying_coefficients(400, 3, family="poisson", random_state=0)
    return X, y


def test_validation_rows_are_searched_at_graph_refreshes_only(
    poisson_rows, monkeypatch
):
    calls = []
    search = training.refresh_graphs

    def counting(base, queries=None, **kwargs):
        calls.append((base.shape[0], None if queries is None else queries.shape[0]))
        return search(base, queries, **kwargs)

    monkeypatch.setattr(training, "refresh_graphs", counting)
    X, y = poisson_rows
    model = GraphGLMRegressor(
        family="poisson",
        max_epochs=12,
        graph_refresh=5,
        n_iter_no_change=50,
        random_state=0,
        **SMALL,
    ).fit(X, y)
    assert model.n_iter_ == 12
    # Refreshes at epochs 1, 6 and 11: the training rows among themselves and
    # the validation rows among them, in one index, at each (not one
    # validation search per epoch); prediction does its own.
    n_val = round(0.1 * 400)
    assert calls == [(400 - n_val, n_val)] * 3


class _History:
    def __init__(self, baseline: float) -> None:
        self.history = [{"epoch": 0, "val_deviance": baseline}]


def test_the_network_starts_from_the_fitted_global_glm():
    """Epoch 0, the network's start (no deviation), is the global GLM fitted on
    all rows, the validation rows among them, scored on the validation rows."""
    X, y, _ = make_varying_coefficients(
        600, 4, 2, family="poisson", noise=0.5, random_state=3
    )
    model = GraphGLMRegressor(family="poisson", max_epochs=2, random_state=0)
    with pytest.warns(ConvergenceWarning):
        model.fit(X, y)
    val = np.asarray(model._validation_positions)
    glm = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    deviance = glm.family_.deviance(y[val], np.log(glm.predict(X[val])))
    start = model.history_[0]["val_deviance"]
    assert start == pytest.approx(float(deviance), rel=1e-4)


def test_early_stopping_counts_from_the_global_glm():
    trainer = _History(baseline=1.0)
    stopper = EarlyStopping(
        n_iter_no_change=3, tol=0.0, policy=FitPolicy(screening_epochs=3)
    )
    # Never better than the global GLM: given up after `n_iter_no_change` epochs.
    decisions = [
        stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in (1.2, 1.1, 1.05)
    ]
    assert decisions == [False, False, True]
    stopper = EarlyStopping(
        n_iter_no_change=3, tol=0.0, policy=FitPolicy(screening_epochs=3)
    )
    # Beating it resets the count.
    decisions = [
        stopper.on_epoch_end(trainer, {"val_deviance": v})
        for v in (1.2, 0.9, 0.95, 0.95, 0.95)
    ]
    assert decisions == [False, False, False, False, True]


def test_screening_until_the_glm_is_beaten():
    trainer = _History(baseline=1.0)
    stopper = EarlyStopping(
        n_iter_no_change=10, tol=0.0, policy=FitPolicy(screening_epochs=2)
    )
    # Worse than the GLM and not falling after 2 epochs: given up.
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in (1.1, 1.2)]
    assert decisions == [False, True]
    # Falling towards the GLM: screening waits, up to the full patience.
    stopper = EarlyStopping(
        n_iter_no_change=4, tol=0.0, policy=FitPolicy(screening_epochs=2)
    )
    values = (1.3, 1.2, 1.1, 1.05, 1.01)
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values]
    assert decisions == [False, False, False, True, True][: len(values)]
    # Once the GLM is beaten, only the patience applies.
    stopper = EarlyStopping(
        n_iter_no_change=4, tol=0.0, policy=FitPolicy(screening_epochs=2)
    )
    values = (1.1, 0.9, 0.95, 0.96, 0.97, 0.98)
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values]
    assert decisions == [False, False, False, False, False, True]


def test_patience_holds_while_a_network_recovers_steadily():
    trainer = _History(baseline=1.0)
    # Epoch 1 far below the GLM, an overshoot, then a steady recovery: five
    # falls in a row hold the patience's stop until the deviance rises again.
    values = (0.5, 4.6, 7.9, 3.4, 1.1, 0.68, 0.67, 0.65, 0.59, 0.53, 0.52, 0.55)
    stopper = EarlyStopping(
        n_iter_no_change=10, tol=0.0, policy=FitPolicy(screening_epochs=3)
    )
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values]
    assert decisions == [False] * 11 + [True]
    # Fewer falls in a row: stopped at the patience.
    values = (0.5, 4.6, 7.9, 3.4, 1.1, 0.68, 0.69, 0.65, 0.59, 0.53, 0.52)
    stopper = EarlyStopping(
        n_iter_no_change=10, tol=0.0, policy=FitPolicy(screening_epochs=3)
    )
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values]
    assert decisions == [False] * 10 + [True]
    # A resumed fit whose record predates the count starts it at zero.
    state = stopper.state_dict()
    del state["_falls"]
    fresh = EarlyStopping(
        n_iter_no_change=10, tol=0.0, policy=FitPolicy(screening_epochs=3)
    )
    fresh.load_state_dict(state)
    assert fresh.state_dict() == {**state, "_falls": 0}


class _Selector:
    def __init__(self, ahead: bool) -> None:
        self._ahead = ahead

    def ahead(self) -> bool:
        return self._ahead


def test_full_patience_only_when_ahead_by_one_standard_error():
    values = (0.99, 0.98, 0.985, 0.99, 0.995)  # below the GLM, then rising
    for ahead, expected in ((False, [False] * 4 + [True]), (True, [False] * 5)):
        trainer = _History(baseline=1.0)
        trainer.selector = _Selector(ahead)
        stopper = EarlyStopping(
            n_iter_no_change=10,
            tol=0.0,
            policy=FitPolicy(screening_epochs=3, screening_epochs_below_glm=3),
        )
        decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values]
        assert decisions == expected


def test_a_network_stalled_below_the_glm_gets_the_shorter_screening():
    trainer = _History(baseline=1.0)
    trainer.selector = _Selector(ahead=False)
    stopper = EarlyStopping(
        n_iter_no_change=10,
        tol=0.0,
        policy=FitPolicy(screening_epochs=5, screening_epochs_below_glm=2),
    )
    # Below the GLM (not by one standard error), then flat: 2 epochs.
    values = (0.99, 1.0, 1.0, 1.0)
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values]
    assert decisions == [False, False, True, True]
    # Still above the GLM: the full screening.
    stopper = EarlyStopping(
        n_iter_no_change=10,
        tol=0.0,
        policy=FitPolicy(screening_epochs=5, screening_epochs_below_glm=2),
    )
    values = (1.1, 1.2, 1.2, 1.2, 1.2)
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values]
    assert decisions == [False] * 4 + [True]
    # Ahead by one standard error: neither applies.
    trainer.selector = _Selector(ahead=True)
    stopper = EarlyStopping(
        n_iter_no_change=10,
        tol=0.0,
        policy=FitPolicy(screening_epochs=5, screening_epochs_below_glm=2),
    )
    decisions = [stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in values[:1]]
    decisions += [
        stopper.on_epoch_end(trainer, {"val_deviance": v}) for v in (0.9, 1.0, 1.0)
    ]
    assert decisions == [False] * 4


class _UnitSelector(_Selector):
    """A selector whose best epoch's per-row deviances the test sets."""

    def __init__(self, n_rows: int) -> None:
        super().__init__(ahead=True)
        self.weight = torch.ones(n_rows, dtype=torch.float64)
        self.best_unit = None


def _stall_decisions(units, values, n_rows=400, n_iter_no_change=4):
    """The stopper's decisions when after epoch ``i`` the best epoch's per-row
    validation deviances are ``units[i]`` and its mean is ``values[i]``."""
    trainer = _History(baseline=1.0)
    trainer.selector = _UnitSelector(n_rows)
    stopper = EarlyStopping(
        n_iter_no_change=n_iter_no_change, tol=0.0, policy=FitPolicy(screening_epochs=3)
    )
    decisions = []
    for unit, value in zip(units, values, strict=True):
        trainer.selector.best_unit = unit
        decisions.append(stopper.on_epoch_end(trainer, {"val_deviance": value}))
    return decisions


def _best_rows(values, rows):
    """Each epoch's best epoch's rows: ``rows[j]`` of the last new best ``j``."""
    best_epochs = [int(np.argmin(values[: i + 1])) for i in range(len(values))]
    return [rows[j] for j in best_epochs]


def test_a_best_value_that_creeps_down_within_its_noise_stops_the_fit():
    rng = np.random.default_rng(0)
    # A new best every other epoch, each 0.002 lower on average.
    values = (0.8, 0.81, 0.798, 0.81, 0.796, 0.81, 0.794, 0.81)
    noise = torch.from_numpy(rng.normal(0.0, 0.2, (len(values), 400)))
    noise -= noise.mean(dim=1, keepdim=True)  # each epoch's mean is its value
    # Each best epoch's rows move independently: a gain of 0.004 over the
    # window of patience + 1 epochs against a standard error of about 0.014.
    moving = _best_rows(values, [v + noise[i] for i, v in enumerate(values)])
    gain, gain_se = paired_gain(moving[0], moving[4], torch.ones(400))
    assert 0 < gain <= FitPolicy().stall_standard_errors * gain_se
    assert _stall_decisions(moving, values) == [False] * 4 + [True] * 4
    # The same means with every row lower by the same amount: a real gain.
    steady = _best_rows(values, [v + noise[0] for v in values])
    assert _stall_decisions(steady, values) == [False] * 8


def test_the_stall_rule_waits_while_a_network_recovers():
    rng = np.random.default_rng(1)
    # A new best every epoch (five falls in a row by epoch 5), each by less
    # than the rows' noise: the recovery holds the stall's stop.
    values = tuple(0.9 - 0.001 * i for i in range(8))
    noise = torch.from_numpy(rng.normal(0.0, 0.2, (len(values), 400)))
    noise -= noise.mean(dim=1, keepdim=True)
    moving = [v + noise[i] for i, v in enumerate(values)]
    assert _stall_decisions(moving, values) == [False] * 8
    # The same rows with a rise every third epoch: stopped once the window is full.
    bumpy = tuple(v + 0.01 * (i % 3 == 2) for i, v in enumerate(values))
    assert _stall_decisions(_best_rows(bumpy, moving), bumpy)[4:] == [True] * 4
    # No best epoch before the window: nothing to compare.
    assert _stall_decisions([None] * 6, (0.9,) * 6, n_iter_no_change=10) == [False] * 6


def test_network_that_cannot_beat_the_glm_stops_early():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = rng.poisson(np.exp(0.3 * X[:, 0]))  # a plain GLM: nothing to learn
    model = GraphGLMRegressor(family="poisson", random_state=0, **SMALL).fit(X, y)
    assert model.is_global_only_
    baseline = model.history_[0]["val_deviance"]
    assert all(h["val_deviance"] > baseline for h in model.history_[1:])
    # The screening patience, counted from the global GLM (epoch 0).
    assert model.n_iter_ == FitPolicy().screening_epochs


class _ThreadProbe:
    def __init__(self) -> None:
        self.seen: set[int] = set()

    def on_epoch_end(self, trainer, logs) -> bool:
        self.seen.add(torch.get_num_threads())
        return False


@pytest.mark.parametrize("n_jobs", [None, 1, 2])
def test_n_jobs_sets_the_threads_of_fit_and_restores_them(poisson_rows, n_jobs):
    X, y = poisson_rows
    probe = _ThreadProbe()
    before = torch.get_num_threads()
    model = GraphGLMRegressor(
        family="poisson",
        max_epochs=2,
        n_jobs=n_jobs,
        callbacks=[probe],
        random_state=0,
        **SMALL,
    ).fit(X, y)
    assert probe.seen == {1 if n_jobs is None else n_jobs}
    assert torch.get_num_threads() == before
    model.predict(X[:5])
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("n_jobs", [0, 1.5, "2", True])
def test_bad_n_jobs_raises(poisson_rows, n_jobs):
    X, y = poisson_rows
    with pytest.raises(ValueError, match="'n_jobs' parameter"):
        GraphGLMRegressor(n_jobs=n_jobs, max_epochs=1).fit(X, y)


def test_convergence_warning_when_max_epochs_cuts_an_improving_fit():
    X, y, _ = make_varying_coefficients(3000, 3, family="poisson", random_state=1)
    params = dict(family="poisson", learning_rate=0.03, random_state=0, **SMALL)
    with pytest.warns(ConvergenceWarning, match="max_epochs=4"):
        model = GraphGLMRegressor(max_epochs=4, **params).fit(X, y)
    assert not model.is_global_only_ and model.best_epoch_ == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        GraphGLMRegressor(max_epochs=4, early_stopping=False, **params).fit(X, y)


def test_quiet_fits_show_progress_only_late_and_on_a_terminal(monkeypatch):
    assert training.progress_options(1) == {"disable": False}

    class Stream:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delitem(__import__("sys").modules, "ipykernel", raising=False)
    monkeypatch.setattr("sys.stderr", Stream(False))
    assert training.progress_options(0)["disable"] is True
    monkeypatch.setattr("sys.stderr", Stream(True))
    options = training.progress_options(0)
    assert options["disable"] is False
    assert options["delay"] == FitPolicy().progress_delay_s and not options["leave"]
    assert training.progress_options(0, progress_delay_s=2.5)["delay"] == 2.5


def test_n_jobs_is_capped_at_the_cores():
    from autoglm_graph.utils._threads import n_threads

    assert n_threads(10**9) == (__import__("os").cpu_count() or 1)
    assert n_threads(-1) == n_threads(10**9)
    assert n_threads(None) == 1


def test_convergence_warning_points_at_the_callers_fit():
    X, y, _ = make_varying_coefficients(3000, 3, family="poisson", random_state=1)
    model = GraphGLMRegressor(
        family="poisson", learning_rate=0.03, max_epochs=4, random_state=0, **SMALL
    )
    with pytest.warns(ConvergenceWarning) as record:
        model.fit(X, y)
    assert record[0].filename == __file__


def test_scalar_offset_is_the_same_offset_for_every_row(poisson_rows):
    X, y = poisson_rows
    # device="cpu": two fits equal to the bit (CUDA's atomic sums may differ).
    params = dict(family="poisson", max_epochs=2, random_state=0, device="cpu")
    params.update(SMALL)
    scalar = GraphGLMRegressor(**params).fit(X, y, offset=0.5)
    full = GraphGLMRegressor(**params).fit(X, y, offset=np.full(len(y), 0.5))
    np.testing.assert_array_equal(scalar.coef_, full.coef_)
    np.testing.assert_array_equal(
        scalar.predict(X[:5], offset=0.5), full.predict(X[:5], offset=np.full(5, 0.5))
    )


def test_weight_average_is_the_bias_corrected_average_of_the_steps():
    d = 0.8
    config = training.Trainer(
        net=NetConfig(3, 4, hidden_channels=8, heads=2),
        family=get_family("poisson"),
        n_outputs=1,
        graph=training.GraphConfig("embedding", 4, None, 10),
        learning_rate=1e-3,
        weight_decay=0.0,
        local_penalty=1.0,
        max_epochs=3,
        ema_decay=d,
    )
    net = config.net.build(seed=0)
    average = training.WeightAverage(net, d)
    params = dict(net.named_parameters())
    generator = torch.Generator().manual_seed(1)
    steps = []
    for _ in range(3):  # the weights after each of three steps
        with torch.no_grad():
            for p in params.values():
                p.copy_(torch.randn(p.shape, generator=generator))
        steps.append({k: p.detach().clone() for k, p in params.items()})
        average.update()
    raw = {k: p.detach().clone() for k, p in params.items()}
    with average.applied():
        for key, p in params.items():
            average = sum(
                (1 - d) * d ** (len(steps) - 1 - i) * w[key]
                for i, w in enumerate(steps)
            ) / (1 - d ** len(steps))
            torch.testing.assert_close(p.detach(), average)
    for key, p in params.items():  # the raw weights are back after the block
        assert torch.equal(p.detach(), raw[key])


class AveragedWeights:
    """Records the averaged weights at the end of each epoch."""

    def __init__(self):
        self.seen = []

    def on_epoch_end(self, trainer, logs) -> bool:
        with trainer.weight_average.applied():
            state = trainer.net.state_dict()
            self.seen.append({k: v.detach().clone() for k, v in state.items()})
        return False


def test_without_validation_rows_the_last_averaged_weights_are_kept(poisson_rows):
    # ema_decay's averaged weights are what prediction uses; with no
    # validation rows to choose an epoch, the last epoch's average is kept
    # (not the raw weights of its step).
    X, y = poisson_rows
    recorder = AveragedWeights()
    model = GraphGLMRegressor(
        family="poisson",
        early_stopping=False,
        max_epochs=4,
        callbacks=[recorder],
        random_state=0,
        **SMALL,
    ).fit(X, y)
    kept = model.network_.state_dict()
    assert len(recorder.seen) == 4
    for key, value in recorder.seen[-1].items():
        torch.testing.assert_close(kept[key], value, rtol=0, atol=0)
    assert any(
        not torch.equal(recorder.seen[-1][k], recorder.seen[-2][k]) for k in kept
    )


def test_cached_state_steps_with_one_part_are_the_full_batch_steps(poisson_rows):
    # One part holds every row: its sources are all fresh, so the cached-state
    # step is the full-batch step (the pool summed back, rounding aside).
    X, y = poisson_rows
    params = dict(family="poisson", max_epochs=4, dropout=0.0, random_state=0)
    full = GraphGLMRegressor(**params, **SMALL).fit(X, y)
    policy = FitPolicy(cached_state_parts=(1, 1), cached_state_min_rows=1)
    cached = GraphGLMRegressor(**params, **SMALL, fit_policy=policy).fit(X, y)
    losses = [h["train_loss"] for h in full.history_[1:]]
    np.testing.assert_allclose(
        [h["train_loss"] for h in cached.history_[1:]], losses, rtol=1e-5
    )
    np.testing.assert_allclose(cached.predict(X), full.predict(X), rtol=1e-4)


def test_cached_state_steps_run_from_their_threshold_and_learn(monkeypatch):
    X, y, _ = make_varying_coefficients(800, 3, family="poisson", random_state=0)
    X, X_test, y, y_test = X[:400], X[400:], y[:400], y[400:]
    steps = []
    epoch = epochs.CachedStateEpochs.run

    def counting(self, state, optimizer, train, graph):
        steps.append(train.y.shape[0])
        return epoch(self, state, optimizer, train, graph)

    monkeypatch.setattr(epochs.CachedStateEpochs, "run", counting)
    params = dict(family="poisson", max_epochs=30, random_state=0, **SMALL)
    n_train = 400 - round(0.1 * 400)
    above = FitPolicy(cached_state_min_rows=n_train + 1)
    GraphGLMRegressor(**params, fit_policy=above).fit(X, y)
    assert steps == []  # below the threshold: full-batch steps
    at = FitPolicy(cached_state_min_rows=n_train)
    model = GraphGLMRegressor(**params, fit_policy=at).fit(X, y)
    assert steps and set(steps) == {n_train}
    glm = GraphGLMRegressor(**{**params, "local_penalty": np.inf}).fit(X, y)
    assert not model.is_global_only_
    assert model.score(X_test, y_test) > glm.score(X_test, y_test) + 0.05


def _copies(n: int, seed: int = 0):
    """Poisson rows whose features are rounded to a grid: many copies of
    each distinct row, the outcomes still those of the varying model."""
    X, y, _ = make_varying_coefficients(n, 3, family="poisson", random_state=seed)
    return np.round(X), y


def test_copies_are_computed_once_in_the_feature_layers_with_the_same_result():
    from autoglm_graph.neighbors.refresh import distinct_rows, refresh_graphs
    from autoglm_graph.network.modules import DistinctRows, GraphGLMNet

    torch.manual_seed(0)
    X, _ = _copies(600)
    context = torch.as_tensor(X, dtype=torch.float32)
    targets = torch.randn(600, 2)
    net = GraphGLMNet(3, 4, hidden_channels=16, heads=2, target_channels=2)
    torch.nn.init.normal_(net.head[-1].weight)  # a delta that is not zero
    with torch.no_grad():
        graph, _ = refresh_graphs(net.encode(context), None, n_neighbors=8)
    first, inverse = distinct_rows(context)
    assert first.numel() < 300 and torch.equal(context[first][inverse], context)
    assert graph.shared_by_duplicates(first, inverse)
    every_row = net.adjacency(graph, 600)
    shared = net.adjacency(graph, 600)
    shared.distinct = DistinctRows(
        first, inverse, net.adjacency(graph.query_rows(first), 600)
    )
    encoded = []
    net.encoder.register_forward_hook(lambda m, i, out: encoded.append(len(out)))
    results = []
    for adjacency in (every_row, shared):
        net.zero_grad()
        delta, states = net(context, targets, adjacency)
        (delta**2).sum().backward()
        grads = [p.grad.clone() for p in net.parameters()]
        results.append((delta.detach(), states, grads))
    assert encoded == [600, first.numel()]
    (delta, states, grads), (delta_s, states_s, grads_s) = results
    torch.testing.assert_close(delta_s, delta)
    for a, b in zip(states_s.layers, states.layers, strict=True):
        torch.testing.assert_close(a, b)
    # Summed in another order: rounding, on the scale of the largest gradient
    # (the destinations' attention scores cancel in the softmax when all of a
    # row's neighbours are copies of one row, so theirs is rounding alone).
    scale = max(float(g.abs().max()) for g in grads)
    for a, b in zip(grads_s, grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6 * scale)


def test_copies_with_other_neighbours_are_not_shared():
    from autoglm_graph.neighbors._graph import NeighborGraph
    from autoglm_graph.neighbors.refresh import distinct_rows

    context = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    first, inverse = distinct_rows(context)
    indices = torch.tensor([[1, 2], [0, 3], [3, 0], [2, 1]])
    sims = torch.tensor([[1.0, 0.5], [1.0, 0.5], [1.0, 0.5], [1.0, 0.5]])
    mask = torch.ones(4, 2, dtype=torch.bool)
    assert NeighborGraph(indices, sims, mask).shared_by_duplicates(first, inverse)
    # Row 1's second neighbour masked (another group's rule): its list differs.
    masked = mask.clone()
    masked[1, 1] = False
    graph = NeighborGraph(indices, sims, masked)
    assert not graph.shared_by_duplicates(first, inverse)
    # Or a copy's neighbour at another similarity.
    other = sims.clone()
    other[1, 1] = 0.4
    assert not NeighborGraph(indices, other, mask).shared_by_duplicates(first, inverse)
    assert distinct_rows(torch.eye(4)) is None  # all distinct: nothing to share


def test_a_fit_on_copies_shares_their_states_and_learns(monkeypatch):
    X, y = _copies(2000)
    X, X_test, y, y_test = X[:1200], X[1200:], y[:1200], y[1200:]
    shared = []
    prepare = training.TrainingState.adjacency

    def recording(self, graph, context):
        adjacency = prepare(self, graph, context)
        shared.append(adjacency.distinct is not None)
        return adjacency

    monkeypatch.setattr(training.TrainingState, "adjacency", recording)
    params = dict(family="poisson", max_epochs=30, random_state=0, **SMALL)
    model = GraphGLMRegressor(**params).fit(X, y)
    assert shared and all(shared)
    glm = GraphGLMRegressor(**{**params, "local_penalty": np.inf}).fit(X, y)
    assert not model.is_global_only_
    assert model.score(X_test, y_test) > glm.score(X_test, y_test) + 0.05
    shared.clear()
    GraphGLMRegressor(**params, fit_policy=FitPolicy(distinct_rows=False)).fit(X, y)
    assert shared and not any(shared)


@pytest.mark.parametrize("standard_errors", [0.0, 0.5, 1.0, 2.0])
def test_the_network_is_kept_beyond_keep_standard_errors(standard_errors):
    from autoglm_graph.network.stopping import EpochSelector

    rng = np.random.default_rng(0)
    baseline = torch.from_numpy(rng.gamma(2.0, 0.5, 400))
    # Every row better by 0.011 on average, with noise: about 0.75 se.
    noise = torch.from_numpy(rng.normal(0.0, 0.3, 400))
    candidate = baseline - 0.011 + noise - noise.mean()
    weight = torch.ones(400)
    gain, gain_se = paired_gain(baseline, candidate, weight)
    assert 0.5 * gain_se < gain < gain_se
    selector = EpochSelector(baseline, weight, standard_errors)
    selector.update(candidate, lambda: "best epoch")
    kept = gain > standard_errors * gain_se
    assert selector.ahead() is kept
    assert selector.select() == ("best epoch" if kept else None)
