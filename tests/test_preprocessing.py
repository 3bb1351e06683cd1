"""Tests for autoglm_graph.preprocessing.TabularPreprocessor."""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from autoglm_graph.preprocessing import (
    DroppedColumnsWarning,
    NewMissingValuesWarning,
    TabularPreprocessor,
)

NUMERIC = ["age", "income", "visits"]


def _cols(pre: TabularPreprocessor, prefix: str) -> list[int]:
    names = pre.get_feature_names_out()
    return [i for i, name in enumerate(names) if name.startswith(prefix)]


# ----------------------------------------------------------------------- names


def test_feature_names_match_output_columns(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    Xt = pre.transform(mixed_frame)
    names = pre.get_feature_names_out()
    assert names.dtype == object
    assert all(isinstance(name, str) for name in names)
    assert len(names) == Xt.shape[1] == pre.n_features_out_
    assert len(set(names)) == len(names)
    assert names[:3].tolist() == NUMERIC
    assert pre.numeric_features_ == [*NUMERIC, "const"]
    assert pre.categorical_features_ == ["region", "plan", "member"]
    assert pre.n_features_in_ == mixed_frame.shape[1]
    assert pre.feature_names_in_.tolist() == mixed_frame.columns.tolist()


def test_get_feature_names_out_checks_input_features(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    same = pre.get_feature_names_out(mixed_frame.columns.tolist())
    assert same.tolist() == pre.get_feature_names_out().tolist()
    with pytest.raises(ValueError, match="input_features is not equal"):
        pre.get_feature_names_out([f"c{i}" for i in range(mixed_frame.shape[1])])


def test_name_collision_falls_back_to_prefixed_names():
    X = pd.DataFrame({"a_b": [1.0, 2.0, 3.0, 4.0], "a": ["b", "c", "b", "c"]})
    pre = TabularPreprocessor(min_frequency=None).fit(X)
    names = pre.get_feature_names_out().tolist()
    assert len(set(names)) == len(names) == pre.transform(X).shape[1]
    assert "numeric__a_b" in names and "categorical__a_b" in names


def test_set_output_pandas(mixed_frame):
    pre = TabularPreprocessor().set_output(transform="pandas").fit(mixed_frame)
    out = pre.transform(mixed_frame)
    assert isinstance(out, pd.DataFrame)
    assert out.columns.tolist() == pre.get_feature_names_out().tolist()


# ------------------------------------------------------------- numeric columns


def test_missing_indicator_only_for_columns_with_nan_in_fit(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    names = pre.get_feature_names_out().tolist()
    indicators = [name for name in names if name.startswith("missingindicator_")]
    assert indicators == ["missingindicator_income"]
    Xt = pre.transform(mixed_frame)
    col = Xt[:, names.index("missingindicator_income")]
    np.testing.assert_array_equal(col, mixed_frame["income"].isna().to_numpy())
    assert np.isfinite(Xt).all()

    # NaN at transform time in a column that had none in fit: imputed, no new column
    X_new = mixed_frame.head(5).copy()
    X_new.loc[0, "age"] = np.nan
    with pytest.warns(NewMissingValuesWarning, match="'age' \\(1 rows\\)"):
        out = pre.transform(X_new)
    assert out.shape == (5, len(names))
    assert np.isfinite(out).all()

    no_ind = TabularPreprocessor(add_missing_indicator=False).fit(mixed_frame)
    assert not any("missingindicator" in n for n in no_ind.get_feature_names_out())


def test_numeric_columns_standardised(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    Xt = pre.transform(mixed_frame).astype(np.float64)
    np.testing.assert_allclose(Xt[:, :3].mean(axis=0), 0.0, atol=1e-6)
    np.testing.assert_allclose(Xt[:, :3].std(axis=0), 1.0, atol=1e-5)
    # indicators and one-hot columns stay 0/1
    assert set(np.unique(Xt[:, 3:])) <= {0.0, 1.0}

    raw = TabularPreprocessor(scale_numeric=False).fit_transform(mixed_frame)
    np.testing.assert_allclose(raw[:, 0], mixed_frame["age"], rtol=1e-6)
    median = mixed_frame["income"].median()
    expected = mixed_frame["income"].fillna(median).to_numpy()
    np.testing.assert_allclose(raw[:, 1], expected, rtol=1e-6)


def test_all_nan_numeric_column_is_dropped_without_warning(mixed_frame):
    X = mixed_frame.assign(empty=np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pre = TabularPreprocessor().fit(X)
        Xt = pre.transform(X)
    assert not any("empty" in name for name in pre.get_feature_names_out())
    assert Xt.shape[1] == TabularPreprocessor().fit(mixed_frame).n_features_out_


def test_nullable_pandas_dtypes():
    X = pd.DataFrame(
        {
            "n": pd.array([1, None, 3, 4, 2], dtype="Int64"),
            "f": pd.array([0.5, 1.5, None, 2.0, 1.0], dtype="Float64"),
            "b": pd.array([True, None, False, True, False], dtype="boolean"),
            "o": pd.Series(["x", None, "y", pd.NA, "x"], dtype=object),
        }
    )
    pre = TabularPreprocessor(min_frequency=None).fit(X)
    assert pre.numeric_features_ == ["n", "f"]
    assert pre.categorical_features_ == ["b", "o"]
    names = pre.get_feature_names_out().tolist()
    assert {"missingindicator_n", "b_missing", "o_missing", "o_x"} <= set(names)
    assert "o_None" not in names
    assert np.isfinite(pre.transform(X)).all()


# --------------------------------------------------------- categorical columns


def test_every_level_kept_by_default(mixed_frame):
    """As statsmodels, glum and R: the rare level "island" (one row) is a level
    of its own, nothing is grouped."""
    pre = TabularPreprocessor().fit(mixed_frame)
    names = pre.get_feature_names_out().tolist()
    assert "region_island" in names
    assert not any("infrequent" in name for name in names)
    assert pre.infrequent_levels() == {}
    Xt = pre.transform(mixed_frame)
    is_island = (mixed_frame["region"] == "island").to_numpy()
    np.testing.assert_array_equal(Xt[:, names.index("region_island")], is_island)


def test_one_hot_and_rare_grouping(mixed_frame):
    pre = TabularPreprocessor(min_frequency=0.01).fit(mixed_frame)
    assert pre.infrequent_levels() == {"region": ["island"]}
    names = pre.get_feature_names_out().tolist()
    region = [n for n in names if n.startswith("region_")]
    assert set(region) == {
        "region_east",
        "region_north",
        "region_south",
        "region_west",
        "region_missing",
        "region_infrequent_sklearn",
    }
    Xt = pre.transform(mixed_frame)
    block = Xt[:, _cols(pre, "region_")]
    np.testing.assert_array_equal(block.sum(axis=1), 1.0)
    is_island = (mixed_frame["region"] == "island").to_numpy()
    infrequent = Xt[:, names.index("region_infrequent_sklearn")]
    np.testing.assert_array_equal(infrequent, is_island)
    np.testing.assert_array_equal(
        Xt[:, names.index("region_north")], (mixed_frame["region"] == "north")
    )

    every_level = TabularPreprocessor(min_frequency=None).fit(mixed_frame)
    assert "region_island" in every_level.get_feature_names_out()
    capped = TabularPreprocessor(min_frequency=None, max_categories=2)
    capped_names = capped.fit(mixed_frame).get_feature_names_out()
    assert sum(n.startswith("region_") for n in capped_names) == 2


def test_unseen_categories_and_nan_at_transform(mixed_frame):
    pre = TabularPreprocessor(min_frequency=0.01).fit(mixed_frame)
    names = pre.get_feature_names_out().tolist()
    X_new = mixed_frame.head(3).copy()
    X_new["region"] = ["atlantis", np.nan, "north"]
    X_new["plan"] = pd.Categorical(["gold", None, "pro"])
    X_new.loc[1, ["age", "income", "visits"]] = np.nan
    with pytest.warns(NewMissingValuesWarning, match=r"'age' \(1 rows\), 'visits'"):
        Xt = pre.transform(X_new)
    assert Xt.shape == (3, len(names))
    assert np.isfinite(Xt).all()
    # unseen region goes to the infrequent column; NaN to the "missing" level
    assert Xt[0, names.index("region_infrequent_sklearn")] == 1.0
    assert Xt[1, names.index("region_missing")] == 1.0
    # "plan" has no infrequent column: unseen level encodes as all zeros
    np.testing.assert_array_equal(Xt[0, _cols(pre, "plan_")], 0.0)
    assert Xt[1, names.index("plan_missing")] == 1.0


def test_constant_columns_dropped(mixed_frame):
    X = mixed_frame.assign(same="a", zero=0)
    pre = TabularPreprocessor().fit(X)
    names = pre.get_feature_names_out().tolist()
    assert "const" in pre.numeric_features_ and "same" in pre.categorical_features_
    assert not any(n.startswith(("const", "same", "zero")) for n in names)
    Xt = pre.transform(X)
    assert Xt.shape[1] == len(names)
    assert (Xt.std(axis=0) > 0).all()


def test_all_constant_input_gives_no_feature():
    # The design of the intercept-only GLM (issue #37).
    X = pd.DataFrame({"a": [1.0, 1.0, 1.0], "b": ["x", "x", "x"]})
    pre = TabularPreprocessor().fit(X)
    assert pre.n_features_out_ == 0
    assert pre.transform(X).shape == (3, 0)


@pytest.mark.parametrize(
    "dtype", ["default", object, "str", "string", "category", bool]
)
def test_categorical_dtypes_are_one_hot(dtype):
    values = ["a", "b", "a", "c", "b", "a"] if dtype is not bool else [True, False] * 3
    if dtype == "default":
        column = pd.Series(values)  # pandas >= 3 infers the "str" dtype here
        if int(pd.__version__.split(".")[0]) >= 3:
            assert column.dtype == "str"
    else:
        column = pd.Series(values, dtype=dtype)
    X = pd.DataFrame({"num": np.arange(6, dtype=float), "c": column})
    pre = TabularPreprocessor(min_frequency=None).fit(X)
    assert pre.categorical_features_ == ["c"]
    levels = sorted(str(v) for v in set(values))
    assert pre.get_feature_names_out().tolist() == ["num", *[f"c_{v}" for v in levels]]
    Xt = pre.transform(X)
    np.testing.assert_array_equal(Xt[:, 1:].sum(axis=1), 1.0)
    np.testing.assert_array_equal(Xt[:, 1 + levels.index(str(values[0]))][0], 1.0)


def test_string_dtype_with_missing_values():
    X = pd.DataFrame({"c": pd.Series(["a", None, "b", "a"], dtype="str")})
    pre = TabularPreprocessor(min_frequency=None).fit(X)
    assert pre.get_feature_names_out().tolist() == ["c_a", "c_b", "c_missing"]
    Xt = pre.transform(pd.DataFrame({"c": pd.Series([None, "z"], dtype="str")}))
    np.testing.assert_array_equal(Xt, [[0, 0, 1], [0, 0, 0]])


def test_unsupported_dtype_raises():
    X = pd.DataFrame({"when": pd.date_range("2024-01-01", periods=4), "x": range(4)})
    with pytest.raises(ValueError, match=r"unsupported column.*'when'"):
        TabularPreprocessor().fit(X)


def test_input_frame_not_modified(mixed_frame):
    before = mixed_frame.copy()
    TabularPreprocessor().fit(mixed_frame).transform(mixed_frame)
    pd.testing.assert_frame_equal(mixed_frame, before)


# ----------------------------------------------------------------------- arrays


def test_numpy_input(mixed_frame):
    values = mixed_frame[NUMERIC].to_numpy()
    pre = TabularPreprocessor().fit(values)
    assert pre.get_feature_names_out().tolist() == [
        "x0",
        "x1",
        "x2",
        "missingindicator_x1",
    ]
    assert pre.numeric_features_ == ["x0", "x1", "x2"]
    assert pre.categorical_features_ == []
    assert not hasattr(pre, "feature_names_in_")
    from_frame = TabularPreprocessor().fit_transform(mixed_frame[NUMERIC])
    np.testing.assert_array_equal(pre.transform(values), from_frame)
    np.testing.assert_array_equal(pre.transform(values.tolist()), from_frame)


def test_non_numeric_array_raises():
    with pytest.raises(ValueError, match="only numeric arrays"):
        TabularPreprocessor().fit(np.array([["a", 1.0], ["b", 2.0]], dtype=object))


def test_array_at_transform_after_frame_fit(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        Xt = pre.transform(mixed_frame.to_numpy())
    np.testing.assert_array_equal(Xt, pre.transform(mixed_frame))


# ------------------------------------------------------------------ bad inputs


def test_wrong_column_count_raises(mixed_frame):
    values = np.random.default_rng(0).normal(size=(10, 4))
    pre = TabularPreprocessor().fit(values)
    msg = "X has 3 features, but TabularPreprocessor is expecting 4 features as input."
    with pytest.raises(ValueError, match=re.escape(msg)):
        pre.transform(values[:, :3])

    frame_pre = TabularPreprocessor().fit(mixed_frame)
    with (
        pytest.warns(UserWarning, match="valid feature names"),
        pytest.raises(ValueError, match="expecting 7 features"),
    ):
        frame_pre.transform(mixed_frame.iloc[:, :6].to_numpy())


def test_missing_column_names_raise(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    with pytest.raises(
        ValueError, match=r"(?s)seen at fit time, yet now missing.*income"
    ):
        pre.transform(mixed_frame.drop(columns="income"))
    with pytest.raises(ValueError, match="feature names should match"):
        pre.transform(mixed_frame.rename(columns={"age": "AGE"}))


@pytest.mark.parametrize("as_frame", [True, False])
def test_empty_input_raises(mixed_frame, as_frame):
    X = mixed_frame if as_frame else mixed_frame[NUMERIC].to_numpy()
    empty = X.iloc[:0] if as_frame else X[:0]
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        TabularPreprocessor().fit(empty)
    pre = TabularPreprocessor().fit(X)
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        pre.transform(empty)


def test_no_columns_give_no_feature():
    pre = TabularPreprocessor().fit(pd.DataFrame(index=range(3)))
    assert pre.transform(np.empty((2, 0))).shape == (2, 0)
    with pytest.raises(ValueError, match="expecting 0 features"):
        pre.transform(np.ones((2, 1)))


@pytest.mark.parametrize("as_frame", [True, False])
def test_inf_raises(mixed_frame, as_frame):
    X = mixed_frame if as_frame else mixed_frame[NUMERIC].to_numpy()
    bad = X.copy()
    if as_frame:
        bad.loc[3, "income"] = np.inf
    else:
        bad[3, 1] = -np.inf
    with pytest.raises(ValueError, match="infinity"):
        TabularPreprocessor().fit(bad)
    pre = TabularPreprocessor().fit(X)
    with pytest.raises(ValueError, match="infinity"):
        pre.transform(bad)


def test_inf_error_names_the_column(mixed_frame):
    bad = mixed_frame.assign(income=mixed_frame["income"].fillna(np.inf))
    with pytest.raises(ValueError, match="'income'"):
        TabularPreprocessor().fit(bad)


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"min_frequency": -1}, "min_frequency"),
        ({"min_frequency": 1.5}, "min_frequency"),
        ({"max_categories": 0}, "max_categories"),
        ({"scale_numeric": "yes"}, "scale_numeric"),
    ],
)
def test_invalid_params_raise(mixed_frame, params, name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter"):
        TabularPreprocessor(**params).fit(mixed_frame)


def test_transform_before_fit_raises(mixed_frame):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        TabularPreprocessor().transform(mixed_frame)


# ---------------------------------------------------------- estimator protocol


def test_clone_and_get_params(mixed_frame):
    pre = TabularPreprocessor(min_frequency=5, max_categories=None, scale_numeric=False)
    params = pre.get_params()
    assert params == {
        "add_missing_indicator": True,
        "handle_missing": "impute",
        "max_categories": None,
        "min_frequency": 5,
        "scale_numeric": False,
    }
    pre.fit(mixed_frame)
    twin = clone(pre)
    assert twin.get_params() == params
    assert not hasattr(twin, "column_transformer_")
    twin.set_params(scale_numeric=True)
    assert twin.scale_numeric is True and pre.scale_numeric is False


def test_pickle_round_trip(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    restored = pickle.loads(pickle.dumps(pre))
    np.testing.assert_array_equal(
        restored.transform(mixed_frame), pre.transform(mixed_frame)
    )
    assert (
        restored.get_feature_names_out().tolist()
        == pre.get_feature_names_out().tolist()
    )


def test_output_float32_c_contiguous(mixed_frame):
    pre = TabularPreprocessor()
    Xt_fit = pre.fit_transform(mixed_frame)
    Xt = pre.transform(mixed_frame)
    for out in (Xt_fit, Xt):
        assert isinstance(out, np.ndarray)
        assert out.dtype == np.float32
        assert out.ndim == 2
        assert out.flags.c_contiguous
        assert np.isfinite(out).all()
    np.testing.assert_array_equal(Xt_fit, Xt)


@parametrize_with_checks(
    [TabularPreprocessor()],
    expected_failed_checks=lambda est: {
        "check_estimators_empty_data_messages": (
            "X without columns gives the design of the intercept-only GLM "
            "(issue #37); 0 samples still raise"
        )
    },
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------- dropped columns (#16)
def _with_uninformative_columns(mixed_frame):
    rng = np.random.default_rng(2)
    n = len(mixed_frame)
    return mixed_frame.assign(
        price=rng.normal(10.0, 2.0, n).round(6).astype(str),  # numbers as text
        user_id=[f"u{i:04d}" for i in range(n)],  # an identifier
        same="a",
        empty=np.nan,
    )


def test_dropped_columns_have_reasons(mixed_frame):
    X = _with_uninformative_columns(mixed_frame)
    with pytest.warns(DroppedColumnsWarning) as record:
        pre = TabularPreprocessor().fit(X)
    assert list(pre.dropped_columns_) == ["const", "price", "user_id", "same", "empty"]
    reasons = pre.dropped_columns_
    assert reasons["const"] == "constant (1.0)"
    assert reasons["same"] == "constant ('a')"
    assert reasons["empty"] == "all values missing"
    assert reasons["price"].startswith("numbers stored as text")
    assert "pandas.to_numeric" in reasons["price"]
    assert re.search(
        r"an identifier: 200 of its 200 rows hold a level", reasons["user_id"]
    )
    names = pre.get_feature_names_out()
    assert not any(n.startswith(tuple(reasons)) for n in names)
    # One warning, naming the columns that held information, pointing here.
    assert len(record) == 1
    message = str(record[0].message)
    assert "'price'" in message and "'user_id'" in message
    assert "'const'" not in message and "'empty'" not in message
    assert record[0].filename == __file__


def test_nothing_dropped_no_warning(mixed_frame):
    X = mixed_frame.drop(columns="const")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pre = TabularPreprocessor().fit(X)
    assert pre.dropped_columns_ == {}
    numbers = X[["age", "visits"]].to_numpy(dtype=float)
    assert TabularPreprocessor().fit(numbers).dropped_columns_ == {}


def test_dropped_columns_of_arrays_and_partial_columns():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=50), np.ones(50)])
    assert TabularPreprocessor().fit(X).dropped_columns_ == {"x1": "constant (1.0)"}
    # Constant apart from missing values: its missing indicator is a feature.
    X[::5, 1] = np.nan
    assert TabularPreprocessor().fit(X).dropped_columns_ == {}
    pre = TabularPreprocessor(add_missing_indicator=False).fit(X)
    assert pre.dropped_columns_ == {"x1": "constant (1.0) where not missing"}
    # Rare levels beside frequent ones: the column stays (infrequent grouped).
    levels = ["x"] * 30 + list("abcdefghijklmnopqrst")
    frame = pd.DataFrame({"a": rng.normal(size=50), "b": levels})
    assert TabularPreprocessor(min_frequency=5).fit(frame).dropped_columns_ == {}


def test_estimator_warns_about_dropped_columns(mixed_frame, mixed_target):
    from autoglm_graph import GraphGLMRegressor

    X = _with_uninformative_columns(mixed_frame)
    model = GraphGLMRegressor(family="gamma", local_penalty=np.inf, device="cpu")
    with pytest.warns(DroppedColumnsWarning, match="'user_id'") as record:
        model.fit(X, mixed_target)
    assert record[0].filename == __file__
    assert "user_id" in model.preprocessor_.dropped_columns_


def _mixed_frame(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "code": pd.Series(rng.integers(1, 4, n)).astype("category"),
            "flag": rng.random(n) > 0.5,
            "obj": rng.choice([1, 2, 3], n).astype(object),
        }
    )


@pytest.mark.parametrize(
    "change",
    [
        lambda X: X.assign(code=X["code"].astype(int).astype(float)),
        lambda X: X.assign(flag=X["flag"].astype(float)),
        lambda X: X.assign(obj=X["obj"].astype(float)),
        lambda X: X.assign(flag=X["flag"].astype(int)),
    ],
    ids=[
        "category-codes-as-float",
        "bool-as-float",
        "object-ints-as-float",
        "bool-as-int",
    ],
)
def test_categorical_dtype_changed_at_transform_is_matched_and_said(change):
    """Category codes as floats or bools as 0/1 map to the fitted levels (they
    were unseen levels: every such row encoded as zeros), with a warning."""
    from sklearn.exceptions import DataConversionWarning

    X = _mixed_frame()
    pre = TabularPreprocessor().fit(X)
    with pytest.warns(DataConversionWarning, match="matched to the fitted levels"):
        out = pre.transform(change(X))
    np.testing.assert_array_equal(out, pre.transform(X))


def test_numeric_frame_through_to_numpy_keeps_bool_levels():
    X = _mixed_frame()[["a", "flag"]]
    pre = TabularPreprocessor().fit(X)
    values = X.to_numpy(dtype=float)  # the bools become 0.0 / 1.0
    with pytest.warns(UserWarning):
        out = pre.transform(values)
    np.testing.assert_array_equal(out, pre.transform(X))


def test_unmatched_values_of_another_dtype_stay_unseen_and_are_named():
    """Another dtype and no fitted level (labels passed as codes, the wrong
    column): encoded as unseen levels, as before, but no longer silently."""
    from sklearn.exceptions import DataConversionWarning

    X = _mixed_frame()
    pre = TabularPreprocessor().fit(X)
    X2 = X.assign(obj=X["obj"].astype(float) + 0.5)  # 1.5 is no fitted level
    with pytest.warns(DataConversionWarning, match=r"'obj' \(object in fit, float64"):
        out = pre.transform(X2)
    obj = [i for i, n in enumerate(pre.get_feature_names_out()) if n.startswith("obj")]
    assert (out[:, obj] == 0).all()


def test_same_dtype_unseen_levels_warn_once():
    import warnings

    from autoglm_graph.preprocessing import UnseenCategoryWarning

    X = _mixed_frame()
    pre = TabularPreprocessor().fit(X)
    X2 = X.assign(obj=np.array([7] * len(X), dtype=object))  # a new level, same dtype
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pre.transform(X2)
    assert [w.category for w in caught] == [UnseenCategoryWarning]
    assert "'obj': 7" in str(caught[0].message)


def test_non_numbers_in_a_numeric_column_are_named():
    X = _mixed_frame()
    pre = TabularPreprocessor().fit(X)
    with pytest.raises(ValueError, match=r"'a' \(object, e.g. 'x'\) were numeric"):
        pre.transform(X.assign(a=np.array(["x"] + [1.0] * (len(X) - 1), dtype=object)))
    with pytest.raises(ValueError, match=r"'a' \(datetime64.*\) were numeric"):
        pre.transform(X.assign(a=pd.Timestamp("2020-01-01")))


def test_estimator_fitted_on_a_frame_predicts_its_to_numpy():
    from autoglm_graph import GraphGLMRegressor

    X = _mixed_frame()
    y = np.random.default_rng(0).poisson(1.0, len(X))
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    with pytest.warns(UserWarning, match="feature names"):
        from_array = model.predict(X.to_numpy())  # strings and all, as objects
    np.testing.assert_allclose(from_array, model.predict(X))


def test_integer_column_labels_reordered_are_refused():
    X = _mixed_frame()
    X.columns = [0, 1, 2, 3]
    pre = TabularPreprocessor().fit(X)
    with pytest.raises(ValueError, match="in another order"):
        pre.transform(X[[1, 0, 2, 3]])
    with pytest.raises(ValueError, match=r"missing \[3\], unexpected \[7\]"):
        pre.transform(X.rename(columns={3: 7}))


@pytest.mark.parametrize("as_frame", [True, False])
def test_column_too_large_to_standardise_is_named(as_frame):
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=50), rng.normal(size=50) * 1e200])
    if as_frame:
        X = pd.DataFrame(X, columns=["a", "huge"])
    with pytest.raises(ValueError, match=r"'(huge|x1)' \(values up to .*e\+200\)"):
        TabularPreprocessor().fit(X)
    with pytest.raises(ValueError, match="too large for float32"):
        TabularPreprocessor(scale_numeric=False).fit(X)  # not standardised


def test_sparse_columns_are_used_dense():
    """A pandas sparse column failed in scikit-learn ("fill value must be 0
    when converting to COO matrix")."""
    X = _mixed_frame()
    values = np.where(np.arange(len(X)) % 3 == 0, 1.5, 0.0)
    sparse = X.assign(s=pd.arrays.SparseArray(values))
    dense = X.assign(s=values)
    out = TabularPreprocessor().fit(sparse).transform(sparse)
    np.testing.assert_array_equal(
        out, TabularPreprocessor().fit(dense).transform(dense)
    )


def test_non_scalar_cells_are_named():
    X = _mixed_frame().assign(pair=[(i % 3, 1) for i in range(120)])
    with pytest.raises(ValueError, match=r"Column 'pair' holds tuple values"):
        TabularPreprocessor().fit(X)


def test_categorical_blocks_name_each_columns_levels():
    X = pd.DataFrame(
        {
            "a": [1.0, 2, 3, 4, 5, 6],
            "c": ["x", "y", "z", "x", "y", "x"],
            "b": [0.1, 0.2, 0.3, 0.1, 0.5, 0.2],
            "d": ["p", "q", "p", "q", "p", "q"],
            "e": ["k"] * 6,  # one level: a constant column, dropped
        }
    )
    pre = TabularPreprocessor().fit(X)
    names = pre.get_feature_names_out()
    blocks = pre.categorical_blocks()
    assert [list(names[b]) for b in blocks] == [
        ["c_x", "c_y", "c_z"],
        ["d_p", "d_q"],
        [],
    ]
    out = pre.transform(X)
    for block in blocks[:2]:
        assert (out[:, block].sum(axis=1) == 1).all()  # one level per row
    assert TabularPreprocessor().fit(X[["a", "b"]]).categorical_blocks() == []


def test_levels_without_grouping_are_one_block_each():
    # Without min_frequency and max_categories the encoder groups no level
    # (and has no infrequent_categories_ to read).
    X = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "c": list("xyxz")})
    pre = TabularPreprocessor(min_frequency=None, max_categories=None).fit(X)
    blocks = pre.categorical_blocks()
    assert len(blocks) == 1 and list(blocks[0]) == [1, 2, 3]


# ------------------------------------------- text, identifiers, missing values


def test_text_in_a_numeric_column_is_named_with_its_values(mixed_frame):
    X = mixed_frame.assign(price=mixed_frame["age"].round(1).astype(str))
    X.loc[[3, 8], "price"] = "n/a"
    X.loc[5, "price"] = "?"
    with pytest.raises(ValueError, match=r"'price' .* holds numbers and text") as info:
        TabularPreprocessor().fit(X)
    message = str(info.value)
    assert "3 of its 200 non-missing values are not numbers" in message
    assert "'n/a' (2 rows), '?' (1 rows)" in message
    assert "pandas.to_numeric" in message and "astype('category')" in message
    # Declared a factor, or mostly text (a label column): encoded as levels.
    TabularPreprocessor().fit(X.assign(price=X["price"].astype("category")))
    codes = pd.Series(["1", "2", "other", "other"] * 50, dtype=object)
    pre = TabularPreprocessor().fit(mixed_frame.assign(code=codes))
    assert "code_other" in pre.get_feature_names_out()


def test_identifier_column_dropped_with_warning(mixed_frame):
    ids = pd.Series([f"id{i}" for i in range(200)], dtype=object)
    ids[:40] = "shared"  # 160 of 200 rows hold a level of their own
    with pytest.warns(DroppedColumnsWarning, match="'user': an identifier: 160"):
        pre = TabularPreprocessor().fit(mixed_frame.assign(user=ids))
    assert "user" in pre.dropped_columns_ and "user" not in pre.categorical_features_
    assert not any(n.startswith("user_") for n in pre.get_feature_names_out())
    # Half the rows or fewer alone at their level: a factor, every level kept.
    ids[:100] = "shared"
    pre = TabularPreprocessor().fit(mixed_frame.assign(user=ids))
    assert "user_id150" in pre.get_feature_names_out()


@pytest.mark.parametrize("as_array", [False, True], ids=["frame", "array"])
def test_handle_missing_error(mixed_frame, as_array):
    X = (
        mixed_frame[["age", "income"]]
        if not as_array
        else mixed_frame[["age", "income"]].to_numpy()
    )
    name = "x1" if as_array else "income"
    n_missing = int(mixed_frame["income"].isna().sum())
    pre = TabularPreprocessor(handle_missing="error")
    with pytest.raises(ValueError, match=rf"'{name}' \({n_missing} rows\)"):
        pre.fit(X)
    complete = mixed_frame[["age", "visits"]]
    pre.fit(complete.to_numpy() if as_array else complete)
    new = complete.head(4).astype(float)
    new.iloc[2, 1] = np.nan
    with pytest.raises(ValueError, match="handle_missing='error'"):
        pre.transform(new.to_numpy() if as_array else new)
    with pytest.raises(ValueError, match="handle_missing"):
        TabularPreprocessor(handle_missing="drop").fit(complete)


def test_missing_at_transform_warned_once_per_call(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    assert pre.missing_features_ == ["income", "region", "plan"]
    new = mixed_frame.head(6).copy()
    new.loc[[0, 2], "age"] = np.nan
    new["member"] = new["member"].astype(object)
    new.loc[1, "member"] = None
    new.loc[3, "income"] = np.nan  # had missing values in fit: no warning
    with pytest.warns(NewMissingValuesWarning) as record:
        pre.transform(new)
    assert len(record) == 1
    message = str(record[0].message)
    assert "'age' (2 rows), 'member' (1 rows)" in message and "income" not in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pre.transform(mixed_frame.head(6))


def test_preprocessor_pickled_before_handle_missing_loads(mixed_frame):
    pre = TabularPreprocessor().fit(mixed_frame)
    state = pre.__getstate__()
    del state["handle_missing"], state["missing_features_"]
    old = TabularPreprocessor.__new__(TabularPreprocessor)
    old.__setstate__(state)
    assert old.get_params()["handle_missing"] == "impute"
    np.testing.assert_array_equal(
        old.transform(mixed_frame), pre.transform(mixed_frame)
    )
