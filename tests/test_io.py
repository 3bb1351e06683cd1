"""Safe persistence: safetensors + JSON (+ skops), round trips and tampered files."""

from __future__ import annotations

import json
import pickle
import zipfile

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from sklearn.exceptions import NotFittedError

import autoglm_graph
from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.io import ModelFileError, load_model, save_model

SMALL = dict(hidden_channels=16, heads=2, device="cpu", random_state=0)


def _varying(n, family, seed=0):
    X, y, _ = make_varying_coefficients(
        n, 3, n_groups=3, family=family, random_state=seed
    )
    return X, y


@pytest.fixture(scope="module")
def poisson_model():
    X, y = _varying(600, "poisson")
    offset = np.random.default_rng(0).normal(0.0, 0.1, size=len(y))
    model = GraphGLMRegressor(family="poisson", max_epochs=10, **SMALL)
    model.fit(X, y, offset=offset)
    assert not model.is_global_only_, model.global_only_reason_
    return model, X, offset


@pytest.fixture(scope="module")
def gaussian_glm():
    X, y = _varying(200, "gaussian")
    return GraphGLMRegressor(local_penalty=np.inf, **SMALL).fit(X, y), X, None


@pytest.fixture(scope="module")
def binomial_model():
    X, y = _varying(600, "binomial", seed=3)  # a seed whose network is kept
    model = GraphGLMClassifier(max_epochs=10, learning_rate=1e-2, **SMALL)
    return model.fit(X, y), X, None


@pytest.fixture(scope="module")
def multinomial_model():
    X, y = _varying(400, "gaussian", seed=1)
    labels = np.array(["low", "mid", "high"])[
        np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    ]
    # A DataFrame with string row labels: explain names neighbours by them.
    X = pd.DataFrame(X, columns=["a", "b", "c"], index=[f"r{i}" for i in range(400)])
    model = GraphGLMClassifier(max_epochs=10, learning_rate=1e-2, **SMALL)
    return model.fit(X, labels), X, None


@pytest.fixture(scope="module")
def frame_model():
    # conftest's mixed_frame/mixed_target are function-scoped; build them once.
    from conftest import mixed_frame, mixed_target

    X = mixed_frame.__wrapped__()
    y = mixed_target.__wrapped__(X)
    X.index = [f"r{i}" for i in range(len(X))]  # string row labels for explain
    model = GraphGLMRegressor(family="gamma", max_epochs=4, **SMALL).fit(X, y)
    return model, X, None


MODELS = [
    "poisson_model",
    "gaussian_glm",
    "binomial_model",
    "multinomial_model",
    "frame_model",
]


@pytest.fixture
def no_pickle(monkeypatch):
    """Loading must not touch pickle: any use of it fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(torch, "load", refuse)


def _assert_same(model, loaded, X, offset):
    assert type(loaded) is type(model)
    assert loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(
        loaded.predict(X, offset=offset), model.predict(X, offset=offset)
    )
    if hasattr(model, "predict_proba"):
        np.testing.assert_array_equal(
            loaded.predict_proba(X, offset=offset),
            model.predict_proba(X, offset=offset),
        )
        assert loaded.classes_.dtype == model.classes_.dtype
        np.testing.assert_array_equal(loaded.classes_, model.classes_)
    pd.testing.assert_frame_equal(loaded.local_coef(X), model.local_coef(X))
    pd.testing.assert_frame_equal(loaded.explain(X[:5]), model.explain(X[:5]))
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    np.testing.assert_array_equal(loaded.intercept_, model.intercept_)
    np.testing.assert_array_equal(loaded.feature_names_out_, model.feature_names_out_)
    for key in ("n_features_in_", "is_global_only_", "global_only_reason_", "n_iter_"):
        assert getattr(loaded, key) == getattr(model, key)
    assert loaded.history_ == model.history_
    assert loaded.family_.name == model.family_.name
    assert loaded.family_._params() == model.family_._params()
    assert hasattr(loaded, "feature_names_in_") == hasattr(model, "feature_names_in_")
    assert set(loaded.__dict__) == set(model.__dict__)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("suffix", ["", ".zip"])
def test_round_trip_identical(request, tmp_path, no_pickle, name, suffix):
    model, X, offset = request.getfixturevalue(name)
    path = model.save(tmp_path / f"model{suffix}")
    assert path.is_dir() == (suffix == "")
    _assert_same(model, load(path), X, offset)


def test_module_functions_and_pickle_still_work(tmp_path, poisson_model):
    model, X, offset = poisson_model
    save_model(model, tmp_path / "m")
    _assert_same(model, load_model(tmp_path / "m"), X, offset)
    assert autoglm_graph.load is load_model
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X, offset), model.predict(X, offset))


def test_round_trip_with_groups(tmp_path):
    X, y = _varying(300, "gaussian")
    groups = np.arange(len(y)) % 60
    model = GraphGLMRegressor(max_epochs=5, learning_rate=1e-2, **SMALL)
    model.fit(X, y, groups=groups)
    if model.network_ is not None:
        assert model._train_rows.group is not None
    _assert_same(model, load(model.save(tmp_path / "m.zip")), X, None)


def test_family_instance_parameter(tmp_path):
    from autoglm_graph.families import TweedieFamily

    X, y = _varying(100, "poisson")
    model = GraphGLMRegressor(family=TweedieFamily(power=1.3), local_penalty=np.inf)
    model.fit(X, y)
    loaded = load(model.save(tmp_path / "m"))
    assert isinstance(loaded.family, TweedieFamily) and loaded.family.power == 1.3
    assert loaded.family_.power == 1.3
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_loading_keeps_the_torch_rng(tmp_path, poisson_model):
    poisson_model[0].save(tmp_path / "m")
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    load(tmp_path / "m")
    assert torch.equal(torch.rand(3), expected)


def test_unfitted_model_cannot_be_saved(tmp_path):
    with pytest.raises(NotFittedError):
        GraphGLMRegressor().save(tmp_path / "m")


def test_callbacks_are_dropped_with_a_warning(tmp_path):
    class Noop:
        def on_epoch_end(self, trainer, logs):
            return False

    X, y = _varying(60, "gaussian")
    model = GraphGLMRegressor(callbacks=[Noop()], max_epochs=2, **SMALL).fit(X, y)
    with pytest.warns(UserWarning, match="callbacks cannot be saved"):
        model.save(tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded.callbacks is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


# ------------------------------------------------------------ tampered files
@pytest.fixture
def saved(tmp_path, poisson_model):
    return poisson_model[0].save(tmp_path / "m")


def _edit_json(path, edit):
    config = json.loads((path / "model.json").read_text())
    edit(config)
    (path / "model.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c.update(estimator="builtins.eval"),
        lambda c: c.update(estimator="sklearn.linear_model.PoissonRegressor"),
        lambda c: c["family"].update(name="builtins.eval"),
        lambda c: c["family"].update(params={"power": "__import__('os')"}),
        lambda c: c["params"].update(family="os.system"),
        lambda c: c["params"].update(family={"name": "builtins.exec", "params": {}}),
        lambda c: c["params"].update(alpha={"__class__": "builtins.eval"}),
        lambda c: c["params"].update(callbacks=["builtins.print"]),
        lambda c: c["params"].update(evil="builtins.eval"),
        lambda c: c["fitted"]["network"]["net"].update(conv="builtins.exec"),
        lambda c: c["fitted"]["network"]["trainer"].update(net="builtins.eval"),
        lambda c: c["fitted"]["train_index"].update(dtype="builtins.eval"),
    ],
    ids=[
        "estimator",
        "estimator-sklearn",
        "family",
        "family-param",
        "param-family",
        "param-family-dict",
        "param-object",
        "param-callbacks",
        "param-unknown",
        "conv",
        "trainer-field",
        "dtype",
    ],
)
def test_json_naming_a_callable_is_refused(saved, no_pickle, edit):
    _edit_json(saved, edit)
    with pytest.raises(ModelFileError):
        load(saved)


@pytest.mark.parametrize("version", [0, 2, "1", True, None])
def test_wrong_format_version(saved, version):
    _edit_json(saved, lambda c: c.update(format_version=version))
    with pytest.raises(ModelFileError, match="format version"):
        load(saved)


def test_not_a_model_file(saved):
    _edit_json(saved, lambda c: c.update(format="something.else"))
    with pytest.raises(ModelFileError, match=r"not an autoglm_graph\.model file"):
        load(saved)
    (saved / "model.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load(saved)


def test_truncated_tensor_file(saved):
    data = (saved / "tensors.safetensors").read_bytes()
    (saved / "tensors.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="truncated"):
        load(saved)


def _edit_tensors(path, edit):
    tensors = dict(st_load((path / "tensors.safetensors").read_bytes()))
    edit(tensors)
    (path / "tensors.safetensors").write_bytes(st_save(tensors))


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda t: t.pop("network.head.2.weight"), "missing"),
        (lambda t: t.pop("global_glm.coef"), "missing"),
        (lambda t: t.update(extra=torch.zeros(2)), "unexpected"),
        (
            lambda t: t.update(
                {"global_glm.coef": torch.zeros(1, 2, dtype=torch.float64)}
            ),
            "shape",
        ),
        (lambda t: t.update({"source_states.pooled": torch.zeros(3)}), "shape"),
        (
            lambda t: t.update(
                {"train_rows.y": torch.cat([t["train_rows.y"], t["train_rows.y"]])}
            ),
            "shape",
        ),
        (
            lambda t: t.update({"train_positions": t["train_positions"] + 10**6}),
            "train_positions",
        ),
    ],
    ids=["state-dict", "glm", "extra", "glm-shape", "pooled", "rows", "positions"],
)
def test_tensors_that_do_not_fit(saved, edit, match):
    _edit_tensors(saved, edit)
    with pytest.raises(ModelFileError, match=match):
        load(saved)


def test_json_shape_mismatch(saved):
    _edit_json(
        saved, lambda c: c["fitted"]["network"]["net"].update(hidden_channels=32)
    )
    with pytest.raises(ModelFileError, match="shape"):
        load(saved)


def test_preprocessor_with_untrusted_types(saved, no_pickle):
    from sklearn.preprocessing import FunctionTransformer

    (saved / "preprocessor.skops").write_bytes(
        sio.dumps(FunctionTransformer(save_model))
    )
    with pytest.raises(ModelFileError, match="outside the allow-list"):
        load(saved)


def test_preprocessor_of_another_type(saved):
    from sklearn.preprocessing import StandardScaler

    (saved / "preprocessor.skops").write_bytes(sio.dumps(StandardScaler()))
    with pytest.raises(ModelFileError, match="not a TabularPreprocessor"):
        load(saved)


def test_missing_member_and_bad_zip(saved, tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nothing")
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match="neither"):
        load(tmp_path / "junk.zip")
    with zipfile.ZipFile(tmp_path / "extra.zip", "w") as zf:
        for member in ("model.json", "tensors.safetensors", "preprocessor.skops"):
            zf.write(saved / member, member)
        zf.writestr("payload.pkl", b"")
    with pytest.raises(ModelFileError, match="exactly"):
        load(tmp_path / "extra.zip")
    (saved / "tensors.safetensors").unlink()
    with pytest.raises(ModelFileError, match=r"lacks tensors\.safetensors"):
        load(saved)
