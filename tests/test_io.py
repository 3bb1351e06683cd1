"""Safe persistence: safetensors + JSON (+ skops), round trips and tampered files."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import zipfile

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
import torch
from _removed_fields import REMOVED_FIT_RULES, REMOVED_POLICY_FIELDS
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from sklearn.exceptions import NotFittedError

import autoglm_graph
from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.persistence._io import ModelFileError, load_model, save_model

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

    # torch._dynamo's classes subclass pickle's Unpickler, and torch's
    # optimisers import it when the first is built (a fixture's fit, run after
    # this one): imported before pickle is refused. Loading does not import it.
    import torch._dynamo

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
        assert model._fitted.rows.group is not None
    _assert_same(model, load(model.save(tmp_path / "m.zip")), X, None)


def test_family_instance_parameter(tmp_path):
    from autoglm_graph.glm.families import TweedieFamily

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


def _reseal(path):
    """Rewrite the checksums after an edit: the tampering tests below check what
    loading refuses beyond a damaged byte (a file edited and re-hashed)."""
    members = ("model.json", "tensors.safetensors", "preprocessor.skops")
    lines = [
        f"{hashlib.sha256((path / m).read_bytes()).hexdigest()}  {m}\n" for m in members
    ]
    (path / "checksums.sha256").write_text("".join(lines))


def _edit_json(path, edit):
    config = json.loads((path / "model.json").read_text())
    edit(config)
    (path / "model.json").write_text(json.dumps(config))
    _reseal(path)


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


@pytest.mark.parametrize("version", [0, 1, 3, "2", True, None])
def test_wrong_format_version(saved, version):
    _edit_json(saved, lambda c: c.update(format_version=version))
    with pytest.raises(ModelFileError, match="format version"):
        load(saved)


def test_not_a_model_file(saved):
    _edit_json(saved, lambda c: c.update(format="something.else"))
    with pytest.raises(ModelFileError, match=r"not an autoglm_graph\.model file"):
        load(saved)
    (saved / "model.json").write_text("{not json")
    _reseal(saved)
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load(saved)


def test_truncated_tensor_file(saved):
    data = (saved / "tensors.safetensors").read_bytes()
    (saved / "tensors.safetensors").write_bytes(data[: len(data) // 2])
    _reseal(saved)
    with pytest.raises(ModelFileError, match="truncated"):
        load(saved)


def _edit_tensors(path, edit):
    tensors = dict(st_load((path / "tensors.safetensors").read_bytes()))
    edit(tensors)
    (path / "tensors.safetensors").write_bytes(st_save(tensors))
    _reseal(path)


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
    def edit(config):
        config["params"]["hidden_channels"] = 32
        config["fitted"]["network"]["net"]["hidden_channels"] = 32

    _edit_json(saved, edit)
    with pytest.raises(ModelFileError, match="shape"):
        load(saved)
    # The network's configuration alone edited: not the estimator's.
    _edit_json(saved, lambda c: c["params"].update(hidden_channels=16))
    with pytest.raises(ModelFileError, match="not the estimator's"):
        load(saved)


def test_preprocessor_with_untrusted_types(saved, no_pickle):
    from sklearn.preprocessing import FunctionTransformer

    (saved / "preprocessor.skops").write_bytes(
        sio.dumps(FunctionTransformer(save_model))
    )
    _reseal(saved)
    with pytest.raises(ModelFileError, match="outside the allow-list"):
        load(saved)


def test_preprocessor_of_another_type(saved):
    from sklearn.preprocessing import StandardScaler

    (saved / "preprocessor.skops").write_bytes(sio.dumps(StandardScaler()))
    _reseal(saved)
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


# ------------------------------------------------------------------ checksums
def test_checksums_are_sha256sum_lines(saved):
    lines = (saved / "checksums.sha256").read_text().splitlines()
    assert len(lines) == 3
    for line in lines:
        digest, name = line.split("  ")
        assert hashlib.sha256((saved / name).read_bytes()).hexdigest() == digest


@pytest.mark.parametrize(
    "member", ["model.json", "tensors.safetensors", "preprocessor.skops"]
)
def test_random_byte_flips_are_refused(saved, member):
    """Any flipped byte of a member (data region or header) is refused."""
    path = saved / member
    original = path.read_bytes()
    rng = np.random.default_rng(17)
    n_flips, refused = 50, 0
    # Half of the flips in the last half of the file: safetensors' data region.
    offsets = np.concatenate(
        [
            rng.integers(0, len(original), n_flips // 2),
            rng.integers(len(original) // 2, len(original), n_flips - n_flips // 2),
        ]
    )
    for offset in offsets:
        damaged = bytearray(original)
        damaged[offset] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(damaged))
        with pytest.raises(ModelFileError, match=r"sha256|checksums"):
            load(saved)
        refused += 1
    path.write_bytes(original)
    load(saved)  # intact again
    print(f"{member}: {refused} of {n_flips} byte flips refused")
    assert refused == n_flips


def test_byte_flips_in_a_zip(tmp_path, poisson_model):
    """A flipped byte of a zip is refused with ModelFileError (whichever layer
    notices: zip structure, deflate stream, CRC or checksum), or it changed
    nothing the model is made of (a timestamp) and the model loads equal."""
    model, X, offset = poisson_model
    path = model.save(tmp_path / "m.zip")
    original = path.read_bytes()
    expected = model.predict(X, offset=offset)
    rng = np.random.default_rng(5)
    outcomes = {"refused": 0, "loaded equal": 0}
    for _ in range(60):
        damaged = bytearray(original)
        damaged[int(rng.integers(len(original)))] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(damaged))
        try:
            loaded = load(path)
        except ModelFileError:
            outcomes["refused"] += 1
            continue
        np.testing.assert_array_equal(loaded.predict(X, offset=offset), expected)
        outcomes["loaded equal"] += 1
    print(f"60 byte flips in a zip: {outcomes}")
    assert outcomes["refused"] >= 50
    for length in rng.integers(0, len(original), 20):  # truncated copies
        path.write_bytes(original[:length])
        with pytest.raises(ModelFileError):
            load(path)


def test_bad_checksum_file(saved):
    (saved / "checksums.sha256").write_text("not a checksum\n")
    with pytest.raises(ModelFileError, match="bad line"):
        load(saved)
    _reseal(saved)
    lines = (saved / "checksums.sha256").read_text().splitlines()
    (saved / "checksums.sha256").write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(ModelFileError, match="must list"):
        load(saved)


# ------------------------------------------------------------------ symlinks
def test_save_refuses_a_symlinked_zip(tmp_path, gaussian_glm):
    model = gaussian_glm[0]
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "m.zip").symlink_to(victim)
    with pytest.raises(ValueError, match="symbolic link"):
        model.save(tmp_path / "m.zip")
    assert victim.read_text() == "keep me"


def test_save_refuses_a_symlinked_directory_or_member(tmp_path, gaussian_glm):
    model = gaussian_glm[0]
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="symbolic link"):
        model.save(tmp_path / "link")
    assert not any(outside.iterdir())
    path = model.save(tmp_path / "m")
    victim = tmp_path / "victim.json"
    victim.write_text("keep me")
    (path / "model.json").unlink()
    (path / "model.json").symlink_to(victim)
    with pytest.raises(ValueError, match="symbolic link"):
        model.save(path)
    assert victim.read_text() == "keep me"


def test_save_does_not_replace_a_foreign_directory(tmp_path, gaussian_glm):
    model = gaussian_glm[0]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not part of a saved model"):
        model.save(tmp_path / "d")
    assert (tmp_path / "d" / "notes.txt").read_text() == "mine"
    (tmp_path / "f").write_text("a file")
    with pytest.raises(ValueError, match="not a directory"):
        model.save(tmp_path / "f")
    empty = tmp_path / "empty"
    empty.mkdir()
    model.save(empty)  # an empty directory is fine
    load(empty)


def test_save_over_a_model_leaves_no_temporary_files(tmp_path, gaussian_glm):
    model = gaussian_glm[0]
    for name in ("m", "m.zip"):
        model.save(tmp_path / name)
        model.save(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "m.zip"]
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "checksums.sha256",
        "model.json",
        "preprocessor.skops",
        "tensors.safetensors",
    ]


# ------------------------------------------------------------ resource limits
def _zip_of(path, out, members=None, compression=zipfile.ZIP_DEFLATED):
    members = members or {
        m: (path / m).read_bytes()
        for m in (
            "model.json",
            "tensors.safetensors",
            "preprocessor.skops",
            "checksums.sha256",
        )
    }
    with zipfile.ZipFile(out, "w", compression=compression) as zf:
        for name, data in members.items() if isinstance(members, dict) else members:
            zf.writestr(name, data)
    return out


def test_zip_bomb_is_refused_before_inflating(saved, tmp_path):
    # Valid JSON padded with 8 MiB of spaces: deflates ~1000 times.
    config = json.loads((saved / "model.json").read_text())
    (saved / "model.json").write_text(json.dumps(config) + " " * 8 * 2**20)
    _reseal(saved)
    bomb = _zip_of(saved, tmp_path / "bomb.zip")
    with zipfile.ZipFile(bomb) as zf:
        assert zf.getinfo("model.json").compress_size < 20_000
    with pytest.raises(ModelFileError, match="zip bomb"):
        load(bomb)


def test_members_larger_than_the_limit(saved, tmp_path, monkeypatch):
    from autoglm_graph.persistence import _io as model_io

    zipped = _zip_of(saved, tmp_path / "m.zip")
    monkeypatch.setitem(model_io.MAX_MEMBER_BYTES, "model.json", 100)
    with pytest.raises(ModelFileError, match="claims"):
        load(zipped)
    with pytest.raises(ModelFileError, match="at most 100"):
        load(saved)


def test_duplicate_zip_members_are_refused(saved, tmp_path):
    members = [
        (m, (saved / m).read_bytes())
        for m in (
            "model.json",
            "tensors.safetensors",
            "preprocessor.skops",
            "checksums.sha256",
        )
    ]
    members.append(("model.json", (saved / "model.json").read_bytes()))
    with pytest.warns(UserWarning, match="Duplicate name"):
        dup = _zip_of(saved, tmp_path / "dup.zip", members)
    with pytest.raises(ModelFileError, match="duplicate"):
        load(dup)


@pytest.mark.parametrize("compression", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_unsupported_zip_compression(saved, tmp_path, compression):
    with pytest.raises(ModelFileError, match="compression method"):
        load(_zip_of(saved, tmp_path / "m.zip", compression=compression))


def test_damaged_deflate_stream(saved, tmp_path):
    zipped = _zip_of(saved, tmp_path / "m.zip")
    with zipfile.ZipFile(zipped) as zf:
        info = zf.getinfo("tensors.safetensors")
    data = bytearray(zipped.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start : start + 64] = b"\xff" * 64  # garbage deflate data: zlib.error
    zipped.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="damaged zip"):
        load(zipped)


def _deep(depth):
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [40, 100_000])
def test_deeply_nested_json(saved, depth):
    text = (saved / "model.json").read_text()
    text = text.replace('"history_": [', f'"history_": [{_deep(depth)}, ', 1)
    (saved / "model.json").write_text(text)
    _reseal(saved)
    with pytest.raises(ModelFileError, match=r"nested|not valid JSON"):
        load(saved)


def test_huge_integer_in_json(saved):
    text = (saved / "model.json").read_text()
    (saved / "model.json").write_text(
        text.replace('"n_iter_": ', '"n_iter_": ' + "9" * 5000 + ', "x": ', 1)
    )
    _reseal(saved)
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load(saved)


def test_huge_network_is_refused_quickly(saved):
    import time

    def edit(config):
        config["params"]["num_layers"] = 20000
        config["fitted"]["network"]["net"]["num_layers"] = 20000

    _edit_json(saved, edit)
    start = time.perf_counter()
    with pytest.raises(ModelFileError, match="num_layers"):
        load(saved)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda c: c["fitted"]["network"]["trainer"]["graph"].update(threshold="x"),
            "graph.threshold",
        ),
        (
            lambda c: c["fitted"]["network"]["trainer"]["graph"].update(threshold=0.5),
            "graph.threshold",
        ),
        (
            lambda c: c["fitted"]["network"]["trainer"].update(learning_rate=1.0),
            "trainer.learning_rate",
        ),
        (
            lambda c: c["fitted"]["network"]["trainer"].update(n_outputs=3),
            "trainer.n_outputs",
        ),
        (
            lambda c: c["fitted"]["network"]["trainer"].update(precision="fp64"),
            "trainer.precision",
        ),
        (lambda c: c["params"].update(threshold=5.0), "threshold"),
        (lambda c: c["fitted"].update(n_features_in_=-1), "n_features_in_"),
        (lambda c: c["fitted"].update(n_features_in_=7), "n_features_in_"),
        (lambda c: c["fitted"].update(offset_used_="yes"), "offset_used_"),
        (lambda c: c["fitted"].update(history_=[1, 2]), "history_"),
        (lambda c: c["fitted"].update(best_epoch_=-3), "best_epoch_"),
        (lambda c: c["fitted"]["network"]["net"].update(heads=0), "heads"),
        (lambda c: c.update(fitted=[]), "fitted"),
        (lambda c: c["params"].update(n_jobs=10**9), "n_jobs"),
        (lambda c: c["fitted"].update(is_global_only_="no"), "is_global_only_"),
        (lambda c: c["fitted"]["global_glm"].update(converged=1), "converged"),
        (lambda c: c["fitted"].update(global_only_reason_=[1]), "reason"),
    ],
    ids=[
        "threshold-str",
        "threshold-changed",
        "learning-rate",
        "n-outputs",
        "precision",
        "param-threshold",
        "n-features-negative",
        "n-features-other",
        "offset-used",
        "history",
        "best-epoch",
        "heads",
        "fitted",
        "n-jobs",
        "is-global-only",
        "converged",
        "reason",
    ],
)
def test_fields_are_validated_as_fit_would(saved, edit, match):
    _edit_json(saved, edit)
    with pytest.raises(ModelFileError, match=match):
        load(saved)


# --------------------------------------------------------------------- offset
def test_offset_used_is_saved_and_predict_warns_without_it(tmp_path, poisson_model):
    model, X, offset = poisson_model
    assert model.offset_used_ is True
    loaded = load(model.save(tmp_path / "m.zip"))
    assert loaded.offset_used_ is True
    with pytest.warns(UserWarning, match="fitted with an offset"):
        loaded.predict(X)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded.predict(X, offset=offset)
        loaded.local_coef(X)  # coefficients do not depend on the offset


def test_no_offset_no_warning(tmp_path, gaussian_glm):
    import warnings

    model, X, _ = gaussian_glm
    loaded = load(model.save(tmp_path / "m"))
    assert loaded.offset_used_ is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded.predict(X)


def test_wide_network_is_refused_before_it_is_built(saved):
    """A file asking for a network far larger than the weights it stores."""
    import time

    p = 200_000

    def edit(config):
        config["fitted"]["feature_names_out_"] = [f"f{i}" for i in range(p)]
        net = config["fitted"]["network"]["net"]
        net.update(in_channels=p, out_channels=p + 1)

    _edit_json(saved, edit)
    start = time.perf_counter()
    with pytest.raises(ModelFileError, match="implies at least"):
        load(saved)
    assert time.perf_counter() - start < 5


def test_format_version_1_directory(saved):
    (saved / "checksums.sha256").unlink()
    with pytest.raises(ModelFileError, match="format version 1"):
        load(saved)


def test_cli_refuses_an_unsafe_out_before_fitting(tmp_path, capsys, monkeypatch):
    from autoglm_graph import cli

    X, y = _varying(60, "gaussian")
    data = tmp_path / "d.csv"
    pd.DataFrame(X, columns=["a", "b", "c"]).assign(t=y).to_csv(data, index=False)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("mine")
    (tmp_path / "link.zip").symlink_to(tmp_path / "elsewhere.zip")

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the --out check")

    monkeypatch.setattr(GraphGLMRegressor, "fit", no_fit)
    for out, message in [("notes", "not part of a saved model"), ("link.zip", "link")]:
        args = ["fit", str(data), "--target", "t", "--family", "gaussian"]
        args += ["--out", str(tmp_path / out)]
        assert cli.main(args) == 1
        assert message in capsys.readouterr().err
    assert (tmp_path / "notes" / "mine.txt").read_text() == "mine"


def _leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list) and value and path[-1] != "history_":
        for i, item in enumerate(value[:3]):
            yield from _leaves(item, (*path, i))
    else:
        yield path


def test_mutated_fields_load_correctly_or_raise_model_file_error(saved, poisson_model):
    """Every field of model.json replaced by values of other types and ranges
    (and the file re-hashed): loading raises ModelFileError, or the model
    loads and predicts finite values. No other exception escapes."""
    _, X, offset = poisson_model
    original = json.loads((saved / "model.json").read_text())
    leaves = [p for p in _leaves(original) if p[0] not in ("versions",)]
    rng = np.random.default_rng(3)
    replacements = [None, "x", -1, 0, 10**9, 1e308, -0.5, True, [], {}, [[[]]]]
    outcomes = {"refused": 0, "loaded": 0}
    for path in leaves:
        config = json.loads(json.dumps(original))
        target = config
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = replacements[rng.integers(len(replacements))]
        (saved / "model.json").write_text(json.dumps(config))
        _reseal(saved)
        try:
            model = load(saved)
        except ModelFileError:
            outcomes["refused"] += 1
            continue
        assert np.isfinite(model.predict(X, offset=offset)).all(), path
        outcomes["loaded"] += 1
    print(f"{len(leaves)} mutated fields: {outcomes}")
    assert outcomes["refused"] > outcomes["loaded"]


def test_fit_policy_round_trip(tmp_path):
    policy_module = pytest.importorskip("autoglm_graph.policy")
    if "fit_policy" not in GraphGLMRegressor().get_params():
        pytest.skip("the estimators have no fit_policy parameter yet")
    policy = policy_module.FitPolicy()
    X = np.random.default_rng(0).normal(size=(60, 2))
    model = GraphGLMRegressor(fit_policy=policy, local_penalty=np.inf)
    model.fit(X, X[:, 0])
    config = json.loads((model.save(tmp_path / "m") / "model.json").read_text())
    saved = config["params"]["fit_policy"]
    assert saved["__dataclass__"] == "FitPolicy"
    assert set(saved["fields"]) == {f.name for f in dataclasses.fields(policy)}
    assert load(tmp_path / "m").get_params()["fit_policy"] == policy


@pytest.mark.parametrize("field", sorted(REMOVED_POLICY_FIELDS))
def test_file_with_a_removed_policy_field(saved, poisson_model, field):
    """A file whose policy holds a removed field loads where it holds its former
    default (and predicts as saved), and is refused naming it otherwise."""
    from autoglm_graph import FitPolicy

    model, X, offset = poisson_model
    default, other = REMOVED_POLICY_FIELDS[field]

    def policy_with(value):
        def edit(config):
            fields = {**FitPolicy().to_dict(), field: value}
            config["params"]["fit_policy"] = {
                "__dataclass__": "FitPolicy",
                "fields": fields,
            }

        return edit

    _edit_json(saved, policy_with(default))
    loaded = load(saved)
    assert loaded.fit_policy == FitPolicy()
    np.testing.assert_array_equal(
        loaded.predict(X, offset=offset), model.predict(X, offset=offset)
    )
    _edit_json(saved, policy_with(other))
    with pytest.raises(ModelFileError, match=f"'{field}' was removed in this version"):
        load(saved)


@pytest.mark.parametrize("field", sorted(REMOVED_FIT_RULES))
def test_file_with_a_removed_rule_of_the_fit_loads_at_any_value(
    saved, poisson_model, field
):
    """A removed rule of the fit alone (which network it kept) left nothing in
    the fitted model: a file loads whatever value its policy holds, and
    predicts as saved."""
    from autoglm_graph import FitPolicy

    model, X, offset = poisson_model
    for value in REMOVED_FIT_RULES[field]:

        def edit(config, value=value):
            fields = {**FitPolicy().to_dict(), field: value}
            config["params"]["fit_policy"] = {
                "__dataclass__": "FitPolicy",
                "fields": fields,
            }

        _edit_json(saved, edit)
        loaded = load(saved)
        assert loaded.fit_policy == FitPolicy()
        np.testing.assert_array_equal(
            loaded.predict(X, offset=offset), model.predict(X, offset=offset)
        )


@pytest.mark.parametrize("where", ["params", "network"])
def test_file_fitted_with_periodic_embeddings_is_refused_naming_them(saved, where):
    """``numeric_embedding="periodic"`` was removed (issue #59): a file that
    asks for it, in the estimator's parameters or its network's, is refused."""

    def periodic(config):
        if where == "params":
            config["params"]["numeric_embedding"] = "periodic"
        else:
            config["fitted"]["network"]["net"]["numeric_embedding"] = "periodic"

    _edit_json(saved, periodic)
    with pytest.raises(ModelFileError, match=r"'periodic'.*removed in this version"):
        load(saved)


@pytest.mark.parametrize("phase", ["refit", "keep_check"])
def test_file_with_a_removed_phase_loads(saved, poisson_model, phase):
    """A file written while ``fit_times_`` had a ``refit`` or a ``keep_check``
    phase (removed with ``FitPolicy.refit_all_rows`` and
    ``FitPolicy.keep_check_folds``, issue #59) loads with its times as saved."""
    model, X, offset = poisson_model

    def add_phase(config):
        config["fitted"]["fit_times_"][phase] = 1.25

    _edit_json(saved, add_phase)
    loaded = load(saved)
    assert loaded.fit_times_[phase] == 1.25
    assert loaded.fit_times_["total"] == pytest.approx(model.fit_times_["total"])
    np.testing.assert_array_equal(
        loaded.predict(X, offset=offset), model.predict(X, offset=offset)
    )


def test_estimators_are_registered_for_loading():
    from autoglm_graph.persistence._saving import ESTIMATORS

    assert ESTIMATORS == {
        "GraphGLMRegressor": GraphGLMRegressor,
        "GraphGLMClassifier": GraphGLMClassifier,
    }


def test_file_from_before_min_frequency_reads_its_grouping(saved):
    """A file saved before ``min_frequency`` existed grouped levels under 1 %
    and capped 50 per column: its loaded parameters say so."""

    def forget(config):
        for key in ("min_frequency", "max_categories", "handle_missing"):
            config["params"].pop(key)

    _edit_json(saved, forget)
    params = load(saved).get_params()
    assert (params["min_frequency"], params["max_categories"]) == (0.01, 50)
    assert params["handle_missing"] == "impute"


def test_file_from_before_numeric_embedding_reads_its_linear_encoder(
    tmp_path, poisson_model
):
    """A file saved before ``numeric_embedding`` existed read the numeric
    columns linearly: its loaded parameter says so, and it predicts as saved."""
    _, X, offset = poisson_model
    X_fit, y = _varying(600, "poisson")
    model = GraphGLMRegressor(
        family="poisson", numeric_embedding="linear", max_epochs=10, **SMALL
    ).fit(X_fit, y, offset=offset)
    path = model.save(tmp_path / "m")

    def forget(config):
        config["params"].pop("numeric_embedding")
        net = config["fitted"]["network"]["net"]
        for key in ("numeric_embedding", "numeric_columns", "numeric_edges"):
            net.pop(key)

    _edit_json(path, forget)
    loaded = load(path)
    assert loaded.get_params()["numeric_embedding"] == "linear"
    assert GraphGLMRegressor().get_params()["numeric_embedding"] == "piecewise_linear"
    np.testing.assert_array_equal(
        loaded.predict(X, offset=offset), model.predict(X, offset=offset)
    )


def test_a_gam_keeps_its_penalty_choice(tmp_path):
    X, y = _varying(300, "poisson")
    model = GraphGLMRegressor(family="poisson", splines=True, local_penalty=np.inf)
    model.fit(X, y)
    loaded = load(model.save(tmp_path / "gam.zip"))
    assert loaded.splines_penalty_ == model.splines_penalty_
    assert loaded.splines_scores_ == model.splines_scores_
    _assert_same(model, loaded, X, None)
