"""FitPolicy: the tuned rules of a fit, as one frozen estimator parameter."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone

from autoglm_graph import FitPolicy, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.network.stopping import EarlyStopping

SMALL = dict(hidden_channels=8, heads=2, n_neighbors=4)

#: The values of the module constants the fields replaced.
BEFORE = dict(
    cached_state_min_rows=30_000,
    cached_state_parts=(4, 8),
    cached_state_part_rows=15_000,
    distinct_rows=True,
    screening_epochs=5,
    screening_epochs_below_glm=2,
    recovery_epochs=5,
    refresh_jump_stop=0.005,
    refresh_gain_epochs=5,
    stall_standard_errors=1.0,
    progress_delay_s=10.0,
    auto_faiss_min_rows=150_000,
    auto_cuda_exact_max_rows=10_000_000,
    refresh_ivf_min_rows=5_000,
    refresh_distinct_max_share=0.5,
    faiss_exact_min_rows=5_000,
    faiss_exact_min_dim=64,
    checkpoint_min_rows=250_000,
    all_heads_max_src_rows=60_000,
    min_rows_for_network=10,
    predict_chunk=8192,
    # Fields added since, with their defaults (docs/decisions/prediction_index.md).
    predict_index_min_rows=50_000,
    predict_index_recall=0.99,
)


def test_defaults_are_the_former_constants():
    assert FitPolicy().to_dict() == {
        k: list(v) if isinstance(v, tuple) else v for k, v in BEFORE.items()
    }
    assert FitPolicy(**BEFORE) == FitPolicy()


def test_policy_is_frozen_hashable_picklable_with_a_short_repr():
    policy = FitPolicy(screening_epochs=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.screening_epochs = 4
    assert hash(policy) == hash(FitPolicy(screening_epochs=3))
    assert pickle.loads(pickle.dumps(policy)) == policy
    assert repr(policy) == "FitPolicy(screening_epochs=3)"
    assert repr(FitPolicy()) == "FitPolicy()"
    assert FitPolicy.from_dict(policy.to_dict()) == policy
    assert FitPolicy.from_dict({}) == FitPolicy()


def test_estimators_store_clone_and_pickle_the_policy():
    policy = FitPolicy(recovery_epochs=3)
    model = GraphGLMRegressor(fit_policy=policy)
    assert model.get_params()["fit_policy"] is policy
    assert GraphGLMRegressor().get_params()["fit_policy"] is None
    assert clone(model).get_params()["fit_policy"] == policy
    assert pickle.loads(pickle.dumps(model)).fit_policy == policy


@pytest.mark.parametrize(
    "field, value",
    [
        ("screening_epochs", 0),
        ("screening_epochs_below_glm", 1.5),
        ("recovery_epochs", -1),
        ("refresh_gain_epochs", True),
        ("cached_state_min_rows", 0),
        ("cached_state_part_rows", None),
        ("cached_state_parts", (8, 4)),
        ("cached_state_parts", [4, 8]),
        ("distinct_rows", 1),
        ("refresh_jump_stop", -0.1),
        ("stall_standard_errors", float("nan")),
        ("progress_delay_s", "10"),
        ("refresh_distinct_max_share", 1.5),
        ("auto_faiss_min_rows", -1),
        ("faiss_exact_min_dim", 6.0),
        ("checkpoint_min_rows", 0),
        ("all_heads_max_src_rows", -5),
        ("min_rows_for_network", 0),
        ("predict_chunk", 0),
    ],
)
def test_bad_fields_raise_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"FitPolicy field '{field}'"):
        FitPolicy(**{field: value})


def test_checkpoint_min_rows_none_never_checkpoints():
    assert FitPolicy(checkpoint_min_rows=None).checkpoint_min_rows is None


def test_fit_rejects_a_policy_that_is_not_one():
    X, y, _ = make_varying_coefficients(60, 2, family="poisson", random_state=0)
    with pytest.raises(ValueError, match="'fit_policy' parameter must be None or"):
        GraphGLMRegressor(fit_policy={"screening_epochs": 1}).fit(X, y)


@pytest.fixture(scope="module")
def glm_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    return X, rng.poisson(np.exp(0.3 * X[:, 0]))  # a plain GLM: nothing to learn


def test_screening_epochs_reach_early_stopping(glm_data):
    X, y = glm_data
    params = dict(family="poisson", random_state=0, **SMALL)
    default = GraphGLMRegressor(**params).fit(X, y)
    short = GraphGLMRegressor(**params, fit_policy=FitPolicy(screening_epochs=1))
    short.fit(X, y)
    assert default.is_global_only_ and short.is_global_only_
    assert default.n_iter_ == FitPolicy().screening_epochs
    # Epoch 1 counts as falling (there is no epoch before it): epoch 2 is
    # the first that can screen the network out.
    assert short.n_iter_ == 2


def test_early_stopping_takes_every_rule_of_the_policy():
    policy = FitPolicy(
        screening_epochs=4,
        screening_epochs_below_glm=3,
        recovery_epochs=7,
        refresh_jump_stop=0.01,
        refresh_gain_epochs=2,
        stall_standard_errors=0.5,
    )
    stopper = EarlyStopping.from_policy(policy, patience=6, tol=0.0)
    assert (stopper.patience, stopper.tol) == (6, 0.0)
    assert (stopper.screening, stopper.screening_below_glm) == (4, 3)
    assert stopper.recovery_epochs == 7 and stopper.refresh_gain_epochs == 2
    assert stopper.refresh_jump_stop == 0.01 and stopper.stall_standard_errors == 0.5
    default = EarlyStopping()
    assert (default.screening, default.screening_below_glm) == (5, 2)


class _Encoded:
    """Records the rows the encoder sees in training passes."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    def on_train_begin(self, trainer, train, val) -> None:
        def hook(module, inputs, output):
            if torch.is_grad_enabled():
                self.rows.append(inputs[0].shape[0])

        trainer.net.encoder.register_forward_hook(hook)

    def on_epoch_end(self, trainer, logs) -> bool:
        return False


@pytest.mark.parametrize("share", [True, False])
def test_distinct_rows_decides_whether_copies_are_encoded_once(share):
    X, y, _ = make_varying_coefficients(800, 3, family="poisson", random_state=0)
    X = np.round(X)  # many copies of each distinct row
    probe = _Encoded()
    GraphGLMRegressor(
        family="poisson",
        max_epochs=3,
        dropout=0.1,
        random_state=0,
        callbacks=[probe],
        fit_policy=FitPolicy(distinct_rows=share),
        **SMALL,
    ).fit(X, y)
    n_train = 800 - round(0.1 * 800)
    assert len(probe.rows) == 3
    if share:
        assert all(n < n_train / 2 for n in probe.rows)
    else:
        assert probe.rows == [n_train] * 3


def test_cached_state_min_rows_and_parts_reach_the_epochs(monkeypatch):
    from autoglm_graph.network import epochs

    parts = []
    run = epochs.CachedStateEpochs.run

    def counting(self, state, optimizer, train, graph):
        out = run(self, state, optimizer, train, graph)
        parts.append(len(self.cache.parts))
        return out

    monkeypatch.setattr(epochs.CachedStateEpochs, "run", counting)
    X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
    policy = FitPolicy(
        cached_state_min_rows=100, cached_state_parts=(2, 3), cached_state_part_rows=90
    )
    GraphGLMRegressor(
        family="poisson", max_epochs=2, random_state=0, fit_policy=policy, **SMALL
    ).fit(X, y)
    assert parts == [3, 3]  # 270 rows / 90, within (2, 3)


def test_checkpoint_and_attention_thresholds_reach_the_network():
    X, y, _ = make_varying_coefficients(200, 3, family="poisson", random_state=0)
    policy = FitPolicy(checkpoint_min_rows=None, all_heads_max_src_rows=7)
    model = GraphGLMRegressor(
        family="poisson",
        max_epochs=3,
        random_state=0,
        local_penalty=0.0,
        fit_policy=policy,
        **SMALL,
    ).fit(X, y)
    if model.network_ is not None:
        assert model.network_.checkpoint_rows is None
        assert model.network_.all_heads_max_src_rows == 7


def test_min_rows_for_network_and_predict_chunk():
    X, y, _ = make_varying_coefficients(200, 3, family="poisson", random_state=0)
    params = dict(family="poisson", max_epochs=3, random_state=0, **SMALL)
    few = GraphGLMRegressor(**params, fit_policy=FitPolicy(min_rows_for_network=500))
    assert few.fit(X, y).is_global_only_
    chunked = GraphGLMRegressor(**params, fit_policy=FitPolicy(predict_chunk=7))
    whole = GraphGLMRegressor(**params)
    np.testing.assert_allclose(
        chunked.fit(X, y).predict(X), whole.fit(X, y).predict(X), rtol=1e-5
    )
