"""``FitPolicy.keep_check_folds``: a network kept on a small fit's validation
split is trained again on folds of all rows and kept only where it beats the
GLM on the rows held out from it (estimators and network areas)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autoglm_graph import FitPolicy, GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import load_dataset, make_varying_coefficients
from autoglm_graph.estimators._network_fit import (
    TrainedNetwork,
    make_trainer,
    needs_keep_check,
)
from autoglm_graph.estimators._rows import FitRows
from autoglm_graph.network.stopping import EarlyStopping, EpochSelector

CHECK_ALL = dict(keep_check_folds=3, keep_check_standard_errors=float("inf"))


def test_with_last_the_last_epoch_stands_for_the_best():
    baseline = torch.tensor([1.0, 1.0, 1.0, 1.0])
    weight = torch.ones(4)
    best, last = (EpochSelector(baseline, weight, 1.0, last=b) for b in (False, True))
    for epoch, unit in enumerate(([0.5, 0.5, 0.6, 0.4], [0.9, 1.1, 1.0, 1.2])):
        for selector in (best, last):
            selector.update(torch.tensor(unit), lambda e=epoch: e)
    assert best.best == 0 and best.select() == 0
    assert last.best == 1 and last.select() is None  # worse than the GLM
    np.testing.assert_allclose(
        last.row_gains().numpy(), [0.1, -0.1, 0.0, -0.2], atol=1e-6
    )


@pytest.fixture(scope="module")
def varying():
    X, y, _ = make_varying_coefficients(1500, 3, family="poisson", random_state=0)
    return X, y


class Quiet:
    def on_epoch_end(self, trainer, logs) -> bool:
        return False


def test_a_fixed_count_trainer_reads_nothing_of_its_validation_rows(varying):
    X, y = varying
    model = GraphGLMRegressor(
        family="poisson",
        callbacks=[Quiet()],
        max_epochs=2,
    ).fit(X, y)
    rows = model._fitted.rows
    usual = make_trainer(model, model._terms, rows.context.shape[1], rows)
    fixed = make_trainer(
        model, model._terms, rows.context.shape[1], rows, max_epochs=7, selection="last"
    )
    assert any(isinstance(cb, EarlyStopping) for cb in usual.callbacks)
    assert len(usual.callbacks) == 2  # stopping, the user's
    assert (usual.max_epochs, usual.selection) == (2, "best")
    assert fixed.callbacks == []
    assert (fixed.max_epochs, fixed.selection) == (7, "last")


def test_a_network_that_loses_on_held_out_folds_is_dropped():
    # diabetes at this seed: a network 1.9 standard errors ahead on the 33
    # validation rows, 14 % worse than the GLM on the test rows.
    ds = load_dataset("diabetes", random_state=0)
    params = dict(family="gaussian", random_state=2)
    off = FitPolicy(keep_check_folds=0)
    unchecked = GraphGLMRegressor(**params, fit_policy=off)
    unchecked.fit(ds.X_train, ds.y_train)
    assert not unchecked.is_global_only_
    policy = FitPolicy(keep_check_folds=5, fallback="glm")
    checked = GraphGLMRegressor(**params, fit_policy=policy)
    checked.fit(ds.X_train, ds.y_train)
    assert checked.is_global_only_ and checked.network_ is None
    assert "on all but one of 5 folds gained -" in checked.global_only_reason_
    assert checked.n_iter_ == unchecked.n_iter_  # the same network was trained
    glm = GraphGLMRegressor(**params, local_penalty=np.inf).fit(ds.X_train, ds.y_train)
    np.testing.assert_allclose(checked.predict(ds.X_test), glm.predict(ds.X_test))


def test_a_network_that_wins_on_held_out_folds_is_kept_unchanged(varying):
    X, y = varying
    params = dict(family="poisson", hidden_channels=16, heads=2, random_state=0)
    off = FitPolicy(keep_check_folds=0)
    unchecked = GraphGLMRegressor(**params, fit_policy=off).fit(X, y)
    checked = GraphGLMRegressor(**params, fit_policy=FitPolicy(**CHECK_ALL))
    checked.fit(X, y)
    assert not checked.is_global_only_
    assert checked.best_epoch_ == unchecked.best_epoch_
    np.testing.assert_array_equal(checked.predict(X), unchecked.predict(X))


@pytest.mark.parametrize(
    ("changes", "checked"),
    [
        ({}, True),
        ({"keep_check_max_rows": 399}, False),
        ({"keep_check_standard_errors": 2.0}, False),
        ({"keep_check_folds": 0}, False),
    ],
    ids=["small_marginal", "rows", "standard_errors", "off"],
)
def test_only_small_fits_kept_by_few_standard_errors_are_checked(changes, checked):
    policy = dict(keep_check_folds=3, keep_check_standard_errors=3.0) | changes
    model = GraphGLMRegressor(fit_policy=FitPolicy(**policy))
    rows = FitRows(np.zeros((400, 2)), np.zeros(400), np.ones(400), None, None)
    trained = TrainedNetwork([], 5, gain=2.5, gain_se=1.0, best_epoch=3, network="net")
    assert needs_keep_check(model, rows, trained) is checked
    dropped = TrainedNetwork([], 5, gain=0.5, gain_se=1.0)
    assert needs_keep_check(model, rows, dropped) is False


@pytest.mark.parametrize(
    ("family", "extras"),
    [("binomial", False), ("multinomial", False), ("poisson", True)],
    ids=["binomial", "multinomial", "poisson_weights_offset_groups"],
)
def test_the_check_scores_every_row_once(family, extras, monkeypatch):
    """Classifiers (folds stratified by class), and weights, offsets and
    groups (whole groups held out): the pooled gains cover every row."""
    import autoglm_graph.network as network

    X, y, _ = make_varying_coefficients(600, 3, family=family, random_state=0)
    rng = np.random.default_rng(0)
    fit_kwargs = {}
    if extras:
        fit_kwargs = dict(
            sample_weight=rng.uniform(0.5, 2.0, len(y)),
            offset=rng.normal(0.0, 0.1, len(y)),
            groups=rng.integers(0, 40, len(y)),
        )
    pooled = []
    paired_gain = network.paired_gain

    def spy(baseline, candidate, weight):
        pooled.append(len(baseline))
        return paired_gain(baseline, candidate, weight)

    monkeypatch.setattr(network, "paired_gain", spy)
    policy = FitPolicy(keep_standard_errors=0.0, **CHECK_ALL)
    common = dict(hidden_channels=8, heads=2, max_epochs=15, random_state=0)
    if family == "poisson":
        model = GraphGLMRegressor(family=family, **common, fit_policy=policy)
    else:
        model = GraphGLMClassifier(**common, fit_policy=policy)
    model.fit(X, y, **fit_kwargs)
    # The keep check's pooled gains (the GAM fallback's, if any, come after).
    assert pooled and pooled[0] == len(y)
