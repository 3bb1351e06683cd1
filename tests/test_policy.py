"""FitPolicy: the tuned rules of a fit, as one frozen estimator parameter."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import torch
from _removed_fields import REMOVED_FIT_RULES, REMOVED_POLICY_FIELDS
from sklearn.base import clone

from autoglm_graph import FitPolicy, GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.network.stopping import EarlyStopping
from autoglm_graph.policy import _ANY_VALUE, IndexSettings, TileSettings

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
#: The values of the module settings ``_faiss.INDEX`` and ``_topk.TILES`` that
#: the fields ``index`` and ``tiles`` replaced.
BEFORE_INDEX = dict(
    m=32,
    ef_construction=80,
    target_recall=0.95,
    calibration_rows=1000,
    ivf_calibration_rows=250,
    ef_ladder=(1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32),
    max_ef_search=1024,
    nprobe_ladder=(8, 12, 16, 24, 32, 48, 64),
    max_nprobe_fraction=0.25,
    prediction_m=32,
    prediction_ef_construction=40,
)
BEFORE_TILES = dict(
    n_slabs=8,
    min_row_factor=8,
    cpu_tile_bytes=32 * 2**20,
    other_tile_bytes=64 * 2**20,
    cuda_free_share=4,
    cuda_max_tile_bytes=8 * 2**30,
    faiss_tie_margin=8,
    product_rows=8192,
)


def _plain(values: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


#: Fields added since the constants moved into the policy, with their defaults.
ADDED = {
    "embedding_bins": 16,
    "keep_standard_errors": 1.0,
    "fallback": "gam",
    "fallback_folds": 5,
    "fallback_standard_errors": 2.0,
}


def test_defaults_are_the_former_constants():
    assert FitPolicy().to_dict() == {
        **_plain(BEFORE),
        **ADDED,
        "index": _plain(BEFORE_INDEX),
        "tiles": _plain(BEFORE_TILES),
    }
    assert FitPolicy(**BEFORE) == FitPolicy()
    assert FitPolicy().index == IndexSettings(**BEFORE_INDEX)
    assert FitPolicy().tiles == TileSettings(**BEFORE_TILES)


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


def test_index_and_tile_settings_are_fields_of_the_policy():
    policy = FitPolicy(index=IndexSettings(m=16), tiles=TileSettings(n_slabs=4))
    assert repr(policy) == (
        "FitPolicy(index=IndexSettings(m=16), tiles=TileSettings(n_slabs=4))"
    )
    assert hash(policy) == hash(FitPolicy.from_dict(policy.to_dict()))
    assert FitPolicy.from_dict(policy.to_dict()) == policy
    assert pickle.loads(pickle.dumps(policy)) == policy
    assert FitPolicy.from_dict({"index": {"m": 16}}).index == IndexSettings(m=16)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.index.m = 8


@pytest.mark.parametrize(
    "values, message",
    [
        ({"index": 5}, "FitPolicy field 'index' must be of type IndexSettings"),
        ({"tiles": {"n_slabs": 1}}, "TileSettings field 'n_slabs' must be an int >= 2"),
        ({"tiles": {"faiss_tie_margin": -1}}, "TileSettings field 'faiss_tie_margin'"),
        ({"index": {"m": 0}}, "IndexSettings field 'm'"),
        ({"index": {"target_recall": 1.5}}, "IndexSettings field 'target_recall'"),
        ({"index": {"ef_ladder": []}}, "IndexSettings field 'ef_ladder'"),
        ({"index": {"nprobe_ladder": [8, 1.5]}}, "IndexSettings field 'nprobe_ladder'"),
        ({"index": {"ef_ladder": "123"}}, "IndexSettings field 'ef_ladder'"),
        ({"index": {"slabs": 3}}, "Unknown field.*of IndexSettings: slabs"),
        ({"depth": 3}, "Unknown field.*of FitPolicy: depth"),
    ],
)
def test_bad_settings_raise_naming_the_field(values, message):
    with pytest.raises(ValueError, match=message):
        FitPolicy.from_dict(values)


def test_removed_fields_are_gone_and_read_at_their_former_default():
    assert set(FitPolicy._REMOVED) == set(REMOVED_POLICY_FIELDS) | set(
        REMOVED_FIT_RULES
    )
    gone = set(FitPolicy._REMOVED)
    assert not gone & {f.name for f in dataclasses.fields(FitPolicy)}
    for name, (default, _) in REMOVED_POLICY_FIELDS.items():
        assert FitPolicy._REMOVED[name] == default
        assert FitPolicy.from_dict({name: default}) == FitPolicy()
        with pytest.raises(TypeError, match=name):
            FitPolicy(**{name: default})


@pytest.mark.parametrize("name", sorted(REMOVED_FIT_RULES))
def test_a_removed_rule_of_the_fit_is_read_at_any_value(name):
    assert FitPolicy._REMOVED[name] is _ANY_VALUE
    for value in REMOVED_FIT_RULES[name]:
        values = {**FitPolicy().to_dict(), name: value}
        assert FitPolicy.from_dict(values) == FitPolicy()
    with pytest.raises(TypeError, match=name):
        FitPolicy(**{name: REMOVED_FIT_RULES[name][0]})


@pytest.mark.parametrize("name", sorted(REMOVED_POLICY_FIELDS))
def test_a_removed_field_at_another_value_is_refused_naming_it(name):
    value = REMOVED_POLICY_FIELDS[name][1]
    with pytest.raises(ValueError, match=f"field '{name}' was removed in this version"):
        FitPolicy.from_dict({**FitPolicy().to_dict(), name: value})


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
        ("cached_state_min_rows", 0),
        ("cached_state_part_rows", None),
        ("cached_state_parts", (8, 4)),
        ("cached_state_parts", [4, 8]),
        ("distinct_rows", 1),
        ("stall_standard_errors", float("nan")),
        ("progress_delay_s", "10"),
        ("refresh_distinct_max_share", 1.5),
        ("auto_faiss_min_rows", -1),
        ("faiss_exact_min_dim", 6.0),
        ("checkpoint_min_rows", 0),
        ("all_heads_max_src_rows", -5),
        ("min_rows_for_network", 0),
        ("predict_chunk", 0),
        ("fallback", "splines"),
        ("keep_standard_errors", -1.0),
        ("fallback_folds", 1),
        ("fallback_standard_errors", -0.5),
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
        stall_standard_errors=0.5,
    )
    stopper = EarlyStopping(n_iter_no_change=6, tol=0.0, policy=policy)
    assert (stopper.n_iter_no_change, stopper.tol) == (6, 0.0)
    assert (stopper.screening_epochs, stopper.screening_epochs_below_glm) == (4, 3)
    assert stopper.recovery_epochs == 7 and stopper.stall_standard_errors == 0.5
    same = EarlyStopping.from_policy(policy, 6, 0.0)
    assert vars(same) == vars(stopper)
    default = EarlyStopping()
    assert (default.screening_epochs, default.screening_epochs_below_glm) == (5, 2)
    assert default.n_iter_no_change == GraphGLMRegressor().n_iter_no_change


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


@pytest.mark.parametrize(
    ("checkpoint_min_rows", "n_rows", "expected"),
    [
        (250_000, 300_000, 8),  # the most parts
        (250_000, 4_000_000, 16),  # below checkpoint_min_rows each
        (100_000, 60_000, 4),  # the fewest parts
        (None, 4_000_000, 8),  # the most parts, never checkpointed
        (1, 300_000, 8),  # checkpointed within parts of the usual size
        (1, 4_000_000, 8),
        (15_000, 300_000, 20),  # below checkpoint_min_rows each
    ],
)
def test_cached_state_parts_and_the_checkpoint_size(
    checkpoint_min_rows, n_rows, expected
):
    from autoglm_graph.network.epochs import CachedStateEpochs

    policy = FitPolicy(checkpoint_min_rows=checkpoint_min_rows)
    assert CachedStateEpochs(policy).n_parts(n_rows) == expected


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
        assert model.network_.policy.checkpoint_min_rows is None
        assert model.network_.policy.all_heads_max_src_rows == 7


def test_a_loaded_or_unpickled_network_reads_the_fit_s_policy(tmp_path):
    """The network is built with the fit's policy, and so is the network of
    a loaded (or unpickled) model: not the defaults."""
    X, y, _ = make_varying_coefficients(400, 3, family="poisson", random_state=0)
    policy = FitPolicy(
        checkpoint_min_rows=123,
        all_heads_max_src_rows=7,
        tiles=TileSettings(n_slabs=4),
        index=IndexSettings(m=16),
    )
    model = GraphGLMRegressor(
        family="poisson",
        numeric_embedding="linear",
        max_epochs=5,
        random_state=0,
        fit_policy=policy,
        **SMALL,
    ).fit(X, y)
    assert not model.is_global_only_
    assert model.network_.policy == policy
    loaded = load(model.save(tmp_path / "model"))
    assert loaded.fit_policy == policy
    assert loaded.network_.policy == policy
    assert loaded.network_.policy.all_heads_max_src_rows == 7
    assert loaded.predictor().network.policy == policy  # prediction's search too
    unpickled = pickle.loads(pickle.dumps(model))
    assert unpickled.network_.policy == policy
    np.testing.assert_allclose(loaded.predict(X), model.predict(X), rtol=1e-6)


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
