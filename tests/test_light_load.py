"""A model that is the global GLM loads and predicts without torch.

The families' formulas are written once for torch tensors and numpy arrays
(the numpy path is what such a prediction runs), and a fresh process that
loads a GLM-only model and predicts imports neither torch nor
torch_geometric, nor skops.io. One with its network imports torch alone.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.glm.families import FAMILIES, get_family
from autoglm_graph.utils._lazy import LazyModule

# Every family, and every link of the Tweedie family.
FAMILY_CASES = [
    ("gaussian", {}),
    ("binomial", {}),
    ("multinomial", {}),
    ("poisson", {}),
    ("gamma", {}),
    ("tweedie", {"power": 0.0}),
    ("tweedie", {"power": 1.0}),
    ("tweedie", {"power": 1.5}),
    ("tweedie", {"power": 2.0}),
    ("tweedie", {"power": 3.0}),
    ("negative_binomial", {"theta": 0.7}),
]


def _family_data(family, rng):
    """y in the family's range and eta, for 40 rows (and 3 classes)."""
    n = 40
    if family.multi_output:
        eta = rng.normal(size=(n, 3)) * 3
        y = np.eye(3)[rng.integers(0, 3, n)]
        return y, eta
    eta = rng.normal(size=n) * 3
    eta[:3] = [-40.0, 0.0, 40.0]  # far tails: saturated probabilities, large means
    if family.name == "binomial":
        y = rng.integers(0, 2, n).astype(np.float64)
        y[-1] = 0.25  # a fractional proportion
    elif family.link_name == "identity":
        y = rng.normal(size=n)
    elif family.in_y_range(np.zeros(1))[0]:
        y = rng.poisson(2.0, n).astype(np.float64)  # zeros included
    else:
        y = rng.gamma(2.0, 1.0, n)
    return y, eta


@pytest.mark.parametrize(
    ("name", "params"),
    FAMILY_CASES,
    ids=[f"{n}-{p.get('power', p.get('theta', ''))}" for n, p in FAMILY_CASES],
)
def test_numpy_formulas_equal_torch(name, params):
    """link, inverse link, deviances, variance and probabilities of numpy
    arrays equal those of float64 tensors (one formula serves both)."""
    family = get_family(name, **params)
    y, eta = _family_data(family, np.random.default_rng(0))
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    t = torch.as_tensor

    def same(from_numpy, from_torch):
        # 1e-10: sums and transcendental functions round differently in
        # numpy and torch (the tweedie deviance: 1.2e-12 on some CPUs).
        assert isinstance(from_numpy, np.ndarray | np.generic)
        np.testing.assert_allclose(
            from_numpy, from_torch.numpy(), rtol=1e-10, atol=1e-300
        )

    mu = family.inverse_link(eta)
    same(mu, family.inverse_link(t(eta)))
    mu_inside = np.clip(mu, 1e-6, 1e6)  # link of finite, non-saturated means
    same(family.link(mu_inside), family.link(t(mu_inside)))
    same(family.unit_variance(mu), family.unit_variance(t(mu)))
    same(family.unit_deviance(y, eta), family.unit_deviance(t(y), t(eta)))
    same(family.deviance(y, eta), family.deviance(t(y), t(eta)))
    same(family.deviance(y, eta, w), family.deviance(t(y), t(eta), t(w)))
    if family.is_classification:
        eta2 = eta.reshape(len(eta), -1)
        same(family.predict_proba(eta2), family.predict_proba(t(eta2)))
        same(family.predict_log_proba(eta2), family.predict_log_proba(t(eta2)))


def test_every_family_is_covered():
    assert {name for name, _ in FAMILY_CASES} == set(FAMILIES)


def test_numpy_formulas_are_silent_as_torch():
    """log(0) and overflow give infinities without a RuntimeWarning, as torch."""
    import warnings

    family = get_family("tweedie", power=1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(family.inverse_link(np.array([1000.0]))).all()
        assert np.isfinite(family.unit_deviance(np.zeros(2), np.zeros(2))).all()


def test_lazy_module_imports_at_first_attribute():
    lazy = LazyModule("json")
    assert "not imported yet" in repr(lazy)
    assert lazy.dumps([1]) == "[1]"
    assert "imported" in repr(lazy) and "not" not in repr(lazy)


# ------------------------------------------------- a fresh process, no torch
def _data(n=200, seed=0):
    """Counts with a log-exposure offset and a categorical column; 0/1 labels."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.uniform(20, 70, n),
            "density": rng.normal(size=n),
            "region": rng.choice(["north", "south", "east"], n),
        }
    )
    offset = np.log(rng.uniform(0.5, 2.0, n))
    eta = -1.0 + 0.02 * X["age"] + 0.4 * (X["region"] == "south") + offset
    counts = rng.poisson(np.exp(eta))
    labels = (rng.uniform(size=n) < 1 / (1 + np.exp(-X["density"]))).astype(int)
    return X, offset, counts, labels


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """GLM-only models saved, their data on disk, and the in-process answers."""
    folder = tmp_path_factory.mktemp("light")
    X, offset, counts, labels = _data()
    data = X.assign(log_exposure=offset, claims=counts, label=labels)
    data.to_csv(folder / "data.csv", index=False)
    # The file reads back as the same frame: the fresh process gets the same X.
    pd.testing.assert_frame_equal(pd.read_csv(folder / "data.csv"), data)
    regressor = GraphGLMRegressor(family="poisson", local_penalty=np.inf)
    regressor.fit(X, counts, offset=offset)
    classifier = GraphGLMClassifier(local_penalty=np.inf).fit(X, labels)
    assert regressor.is_global_only_ and classifier.is_global_only_
    regressor.save(folder / "regressor")
    classifier.save(folder / "classifier.zip")
    expected = {
        "predict": regressor.predict(X, offset=offset),
        "predict_linear": regressor.predict_linear(X, offset=offset),
        "score": regressor.score(X, counts, offset=offset),
        "proba": classifier.predict_proba(X),
        "log_proba": classifier.predict_log_proba(X),
        "labels": classifier.predict(X),
        "accuracy": classifier.score(X, labels),
    }
    return folder, expected


FRESH = """
import json, sys
import pandas as pd
import autoglm_graph

HEAVY = ("torch", "torch_geometric", "skops.io", "formulaic")

folder = sys.argv[1]
data = pd.read_csv(f"{folder}/data.csv")
X, offset = data[["age", "density", "region"]], data["log_exposure"].to_numpy()
regressor = autoglm_graph.load(f"{folder}/regressor")
classifier = autoglm_graph.load(f"{folder}/classifier.zip")
out = {
    "predict": regressor.predict(X, offset=offset).tolist(),
    "predict_linear": regressor.predict_linear(X, offset=offset).tolist(),
    "score": regressor.score(X, data["claims"], offset=offset),
    "proba": classifier.predict_proba(X).tolist(),
    "log_proba": classifier.predict_log_proba(X).tolist(),
    "labels": classifier.predict(X).tolist(),
    "accuracy": classifier.score(X, data["label"]),
    "imported": sorted(m for m in HEAVY if m in sys.modules),
    "device": regressor.device_,  # no torch.device: the arithmetic is numpy's
}
# The files the preprocessor's reader leaves to skops.io: imported without torch.
from autoglm_graph.persistence._skops import _skops_io
out["trusted"] = _skops_io()._trusted_types.SKLEARN_ESTIMATOR_TYPE_NAMES
out["imported_with_skops"] = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps(out))
"""


#: skops' scikit-learn allow-list in a fresh process that imports it as usual
#: (torch and all): this process's list depends on what other tests imported
#: first (scikit-learn's experimental estimators, under pytest-xdist).
PLAIN_SKOPS = """
import json
from skops.io import _trusted_types
print(json.dumps(_trusted_types.SKLEARN_ESTIMATOR_TYPE_NAMES))
"""


def test_fresh_process_loads_and_predicts_without_torch(saved):
    """Nor skops.io: the preprocessor's file is read without it
    (:mod:`autoglm_graph.persistence._skops`). Also: skops.io, imported
    there for other files without torch, trusts the scikit-learn types it
    trusts when imported as usual."""
    plain = subprocess.run(
        [sys.executable, "-c", PLAIN_SKOPS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    folder, expected = saved
    result = subprocess.run(
        [sys.executable, "-c", FRESH, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got.pop("imported") == []
    assert got.pop("imported_with_skops") == ["skops.io"]
    assert got.pop("device") == "cpu"
    assert got.pop("trusted") == json.loads(plain.stdout)
    np.testing.assert_array_equal(got.pop("labels"), expected["labels"])
    for key, value in got.items():
        np.testing.assert_allclose(
            value, expected[key], rtol=1e-12, atol=0, err_msg=key
        )


def _imported(stderr: str) -> set[str]:
    """The top-level modules that ``-X importtime`` reports as imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:"):
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.parametrize("model", ["regressor", "classifier.zip"])
def test_command_line_predict_without_torch(saved, model):
    folder, expected = saved
    out = folder / f"predictions_{model}.csv"
    command = [sys.executable, "-X", "importtime", "-m", "autoglm_graph", "predict"]
    command += [str(folder / model), str(folder / "data.csv"), "--out", str(out)]
    if model == "regressor":
        command += ["--offset", "log_exposure"]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    imported = _imported(result.stderr)
    assert "sklearn" in imported  # the report is read
    assert not imported & {"torch", "torch_geometric", "skops"}
    predictions = pd.read_csv(out)
    if model == "regressor":
        np.testing.assert_allclose(
            predictions["prediction"], expected["predict"], rtol=1e-12, atol=0
        )
    else:
        np.testing.assert_array_equal(predictions["prediction"], expected["labels"])
        np.testing.assert_allclose(
            predictions[["proba_0", "proba_1"]], expected["proba"], rtol=1e-12
        )


def test_model_with_network_predicts_without_torch_geometric(tmp_path):
    """A network on the fused path loads and predicts with torch alone: its
    layers are :class:`~autoglm_graph.network.fused.FixedDegreeGATConv`, not
    torch_geometric's (whose import took 2.3 s of a 6 s load and predict),
    and its preprocessor is read without skops.io."""
    X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
    model = GraphGLMRegressor(
        family="poisson",
        numeric_embedding="linear",  # kept after 5 epochs on 300 rows
        max_epochs=5,
        hidden_channels=8,
        heads=2,
        random_state=0,
    )
    with pytest.warns(ConvergenceWarning):  # 5 epochs: still improving
        model.fit(X, y)
    assert not model.is_global_only_, model.global_only_reason_
    path = model.save(tmp_path / "network")
    np.save(tmp_path / "X.npy", X[:50])
    code = (
        "import json, sys, numpy as np, autoglm_graph\n"
        "m = autoglm_graph.load(sys.argv[1])\n"
        "p = m.predict(np.load(sys.argv[2]))\n"
        "names = ('torch', 'torch_geometric', 'skops.io')\n"
        "print(json.dumps({'predict': p.tolist(), 'network': m.network_ is not None,"
        " 'imported': [n for n in names if n in sys.modules]}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "X.npy")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["network"]
    assert got["imported"] == ["torch"]
    np.testing.assert_allclose(got["predict"], model.predict(X[:50]), rtol=1e-6)
