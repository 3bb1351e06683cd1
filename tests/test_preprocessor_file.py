"""The preprocessor's member of a model file, read without skops.io
(:mod:`autoglm_graph.persistence._skops`): the object skops.io builds, for every
kind of fitted preprocessor; anything else left to skops.io and its allow-list."""

from __future__ import annotations

import io
import json
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.preprocessing import RobustScaler

from autoglm_graph.persistence import TRUSTED_PREPROCESSOR_TYPES, ModelFileError, _skops
from autoglm_graph.persistence._skops import (
    UnsupportedNode,
    load_preprocessor,
    read_preprocessor,
)
from autoglm_graph.preprocessing import TabularPreprocessor


def _frame(n=200, seed=0) -> pd.DataFrame:
    """Every column kind: floats with NaN, ints, object and category levels
    with NaN and a rare one, bool, a constant, nullable ints, strings, an
    identifier."""
    rng = np.random.default_rng(seed)
    income = rng.lognormal(10, 0.5, n)
    income[rng.random(n) < 0.1] = np.nan
    region = rng.choice(["north", "south", "east", "west"], n).astype(object)
    region[rng.random(n) < 0.1] = np.nan
    region[7] = "island"
    plan = pd.Categorical(rng.choice(["basic", "plus", "pro"], n))
    plan[rng.random(n) < 0.05] = np.nan
    counts = np.where(rng.random(n) < 0.1, None, rng.integers(0, 5, n))
    return pd.DataFrame(
        {
            "age": rng.normal(45, 12, n),
            "income": income,
            "visits": rng.poisson(3.0, n),
            "region": pd.Series(region, dtype=object),
            "plan": plan,
            "member": rng.random(n) < 0.4,
            "const": np.ones(n),
            "nullable": pd.array(counts, dtype="Int64"),
            "text": pd.array(rng.choice(["a", "b", None], n), dtype="string"),
            "ident": [f"id{i}" for i in range(n)],
        }
    )


def _cases():
    X = _frame()
    complete = X.drop(columns=["income", "plan", "nullable", "text"]).dropna()
    array = np.random.default_rng(1).normal(size=(100, 4))
    array[3, 1] = np.nan
    return {
        "every_kind": (TabularPreprocessor(), X),
        "min_frequency": (TabularPreprocessor(min_frequency=5), X),
        "max_categories": (
            TabularPreprocessor(max_categories=2, scale_numeric=False),
            X,
        ),
        "no_indicator": (
            TabularPreprocessor(add_missing_indicator=False, min_frequency=0.05),
            X,
        ),
        "handle_missing_error": (
            TabularPreprocessor(handle_missing="error"),
            complete,
        ),
        "array": (TabularPreprocessor(), array),
        "numeric_only": (TabularPreprocessor(), X[["age", "visits"]]),
        "categorical_only": (TabularPreprocessor(), X[["region", "plan"]]),
        "integer_labels": (
            TabularPreprocessor(),
            pd.DataFrame({0: X["age"], 1: X["region"]}),
        ),
        "all_constant": (
            TabularPreprocessor(),
            pd.DataFrame({"c": np.ones(10), "d": ["x"] * 10}),
        ),
        "no_columns": (TabularPreprocessor(), np.empty((10, 0))),
        "name_collision": (
            TabularPreprocessor(),
            pd.DataFrame({"a_b": X["age"], "a": np.where(X["age"] > 45, "b", "c")}),
        ),
    }


CASES = _cases()


def _fitted(name):
    pre, X = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropped columns, said by fit
        return pre.fit(X), X


def _assert_same(a, b, path="preprocessor"):
    """Equal types and values, recursively through the estimators' state."""
    assert type(a) is type(b), path
    if isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), path
        if a.dtype != object:
            np.testing.assert_array_equal(a, b, err_msg=path)
            return
        a, b = a.ravel().tolist(), b.ravel().tolist()
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            _assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{path}[{i}]")
    elif type(a).__module__.startswith(("sklearn", "autoglm_graph")):
        _assert_same(vars(a), vars(b), path)  # an estimator: its state
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), path
    else:  # a number, a string, a class, a function
        assert a == b, path


def _shared(root) -> list[tuple[str, str]]:
    """Where an object is met again (its path, and that of its first meeting)."""
    seen, again = {}, []

    def walk(value, path):
        if isinstance(value, int | float | str | type) or value is None:
            return
        if callable(value) and not hasattr(value, "get_params"):
            return
        if id(value) in seen:
            again.append((path, seen[id(value)]))
            return
        seen[id(value)] = path
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")
        elif hasattr(value, "__dict__"):
            walk(vars(value), path)

    walk(root, "preprocessor")
    return again


@pytest.mark.parametrize("name", list(CASES))
def test_reads_what_skops_reads(name, monkeypatch):
    """The object skops.io builds, its shared parts shared as there, the same
    transform; and load_preprocessor takes no other path for it."""
    pre, X = _fitted(name)
    data = sio.dumps(pre)
    ours = read_preprocessor(data)
    theirs = sio.loads(data, trusted=list(TRUSTED_PREPROCESSOR_TYPES))
    _assert_same(ours, theirs)
    assert _shared(ours) == _shared(theirs) == _shared(pre)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unseen levels (none), as in fit
        np.testing.assert_array_equal(ours.transform(X), pre.transform(X))

    def no_skops(data):
        raise AssertionError("skops.io read the file")

    monkeypatch.setattr(_skops, "_load_with_skops", no_skops)
    assert type(load_preprocessor(data)) is TabularPreprocessor


def _schema_edited(data: bytes, edit) -> bytes:
    """``data`` with ``edit(schema)`` applied to its schema.json."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            content = source.read(info.filename)
            if info.filename == "schema.json":
                schema = json.loads(content)
                edit(schema)
                content = json.dumps(schema).encode()
            target.writestr(info.filename, content)
    return out.getvalue()


def _nodes(state, loader):
    """The nodes of ``loader`` kind in a schema, depth first."""
    if isinstance(state, dict):
        if state.get("__loader__") == loader:
            yield state
        for value in state.values():
            yield from _nodes(value, loader)
    elif isinstance(state, list):
        for value in state:
            yield from _nodes(value, loader)


def test_other_types_are_left_to_skops():
    """A type of skops' allow-list that a fitted preprocessor does not hold:
    the reader refuses it, skops.io reads the file as before."""
    pre, _ = _fitted("numeric_only")
    pre.extra_ = RobustScaler().fit(np.arange(6.0).reshape(3, 2))
    data = sio.dumps(pre)
    with pytest.raises(UnsupportedNode, match="RobustScaler"):
        read_preprocessor(data)
    loaded = load_preprocessor(data)
    np.testing.assert_array_equal(loaded.extra_.center_, pre.extra_.center_)


@pytest.mark.parametrize(
    "edit, match",
    [
        # A function, a class outside the allow-list: neither is imported.
        (
            lambda s: next(_nodes(s, "FunctionNode")).update(
                __module__="os", __class__="system"
            ),
            "os.system",
        ),
        (
            lambda s: next(_nodes(s, "ObjectNode")).update(
                __module__="subprocess", __class__="Popen"
            ),
            "subprocess.Popen",
        ),
        (lambda s: s.update(protocol=99), "protocol"),
        (lambda s: next(_nodes(s, "ListNode")).update(__loader__="Pickle"), "Pickle"),
    ],
    ids=["function", "class", "protocol", "loader"],
)
def test_tampered_schema_is_refused(edit, match):
    """The reader refuses the node (it names the reason); skops.io, which
    then reads the file, refuses it too: a ModelFileError."""
    pre, _ = _fitted("every_kind")
    data = _schema_edited(sio.dumps(pre), edit)
    with pytest.raises(UnsupportedNode, match=match):
        read_preprocessor(data)
    with pytest.raises(ModelFileError):
        load_preprocessor(data)
