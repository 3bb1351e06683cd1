"""The formula interface: the global GLM's terms from a formulaic formula."""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor, load
from autoglm_graph.preprocessing import UnseenCategoryWarning

sm = pytest.importorskip("statsmodels.api")
smf = pytest.importorskip("statsmodels.formula.api")

FULL_RANK = "y ~ C(region) + bs(age, df=4) + age:density + np.log(density)"
ISSUE = "y ~ age + C(region) + bs(age, df=4) + age:density"


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame(
        {
            "age": rng.uniform(20, 60, n),
            "region": rng.choice(list("abc"), n),
            "density": rng.uniform(0.05, 1, n),
        }
    )
    eta = -1 + 0.02 * df.age + 0.3 * (df.region == "b") + 0.5 * df.density
    df["y"] = rng.poisson(np.exp(eta))
    return df


def _patsy_name(name: str) -> str:
    """statsmodels (patsy) numbers spline columns from 0, formulaic from 1."""
    if not name.startswith("bs("):
        return name
    return re.sub(r"\[(\d+)\]$", lambda m: f"[{int(m.group(1)) + 1}]", name)


def test_global_glm_equals_statsmodels(frame):
    model = GraphGLMRegressor(
        family="poisson", formula=FULL_RANK, alpha=0, local_penalty=np.inf
    ).fit(frame)
    ref = smf.glm(FULL_RANK, frame, family=sm.families.Poisson()).fit()
    params = {_patsy_name(k): v for k, v in ref.params.items()}
    bse = {_patsy_name(k): v for k, v in ref.bse.items()}
    assert set(model.feature_names_out_) == set(params) - {"Intercept"}
    coef = dict(zip(model.feature_names_out_, model.coef_, strict=True))
    for name, value in coef.items():
        assert value == pytest.approx(params[name], abs=1e-6)
    assert model.intercept_ == pytest.approx(params["Intercept"], abs=1e-6)
    table = model.coef_table(frame, frame.y)
    for name in model.feature_names_out_:
        assert table.loc[name, "std_err"] == pytest.approx(bse[name], abs=1e-6)
    np.testing.assert_allclose(model.predict(frame), ref.fittedvalues, rtol=1e-6)


def test_issue_example_fits_statsmodels_predictions(frame):
    """The issue's formula is rank-deficient (age lies in the span of the
    intercept and the spline): the fitted means are still statsmodels'."""
    model = GraphGLMRegressor(
        family="poisson", formula=ISSUE, alpha=0, local_penalty=np.inf
    ).fit(frame)
    ref = smf.glm(ISSUE, frame, family=sm.families.Poisson()).fit()
    np.testing.assert_allclose(model.predict(frame), ref.fittedvalues, rtol=1e-5)
    assert list(model.local_coef(frame.head(2)).columns) == [
        "intercept",
        *model.feature_names_out_,
    ]


def test_penalty_matches_glum(frame):
    """A factor's penalty is on its levels' spread, not on the contrasts with
    the base: glum's ridge on every level (``drop_first=False``, the
    intercept free) is the same GLM."""
    glum = pytest.importorskip("glum")
    formula = "y ~ C(region) + age + np.log(density)"
    alpha = 1e-2
    model = GraphGLMRegressor(
        family="poisson", formula=formula, alpha=alpha, local_penalty=np.inf
    ).fit(frame)
    ref = glum.GeneralizedLinearRegressor(
        family="poisson",
        formula=formula,
        alpha=alpha,
        drop_first=False,
        gradient_tol=1e-10,
    ).fit(frame)
    # glum standardises only with scale_predictors=True: its penalty is in
    # the user's units, as ours.
    np.testing.assert_allclose(model.predict(frame), ref.predict(frame), rtol=1e-6)
    glum_coef = dict(zip(ref.feature_names_, ref.coef_, strict=True))
    levels = {n: c for n, c in glum_coef.items() if n.startswith("C(region)[")}
    base = next(
        n for n in levels if n.replace("[", "[T.") not in model.feature_names_out_
    )
    for name, value in zip(model.feature_names_out_, model.coef_, strict=True):
        if name.startswith("C(region)[T."):
            expected = levels[name.replace("[T.", "[")] - levels[base]
        else:
            expected = glum_coef[name]
        assert value == pytest.approx(expected, abs=1e-5)


def test_one_sided_formula_with_y(frame):
    X, y = frame.drop(columns="y"), frame.y
    model = GraphGLMRegressor(
        family="poisson", formula="C(region) + age", local_penalty=np.inf
    ).fit(X, y)
    same = GraphGLMRegressor(
        family="poisson", formula="y ~ C(region) + age", local_penalty=np.inf
    ).fit(frame)
    np.testing.assert_array_equal(model.coef_, same.coef_)
    assert list(model.feature_names_in_) == ["age", "region", "density"]


def test_no_intercept(frame):
    formula = "y ~ 0 + C(region) + age"
    model = GraphGLMRegressor(
        family="poisson",
        formula=formula,
        fit_intercept=False,
        alpha=0,
        local_penalty=np.inf,
    ).fit(frame)
    ref = smf.glm(formula, frame, family=sm.families.Poisson()).fit()
    np.testing.assert_allclose(model.coef_, ref.params.to_numpy(), atol=1e-6)
    assert "intercept" not in model.local_coef(frame.head(2)).columns


def test_network_predicts_new_rows(frame):
    model = GraphGLMRegressor(
        family="poisson",
        formula=ISSUE,
        max_epochs=3,
        early_stopping=False,
        random_state=0,
    ).fit(frame)
    assert not model.is_global_only_
    new = frame.drop(columns="y").sample(20, random_state=1)
    assert model.predict(new).shape == (20,)
    local = model.local_coef(new)
    assert local.shape == (20, 1 + len(model.feature_names_out_))
    # The target's column may be present or not.
    np.testing.assert_array_equal(
        model.predict(new), model.predict(frame.loc[new.index])
    )


def test_unseen_level_warns(frame):
    model = GraphGLMRegressor(
        family="poisson", formula="y ~ C(region) + age", local_penalty=np.inf
    ).fit(frame)
    new = frame.head(3).copy()
    new.loc[new.index[0], "region"] = "z"
    with pytest.warns(UnseenCategoryWarning, match="formula's terms.*'z'"):
        pred = model.predict(new)
    base = new.copy()
    base.loc[base.index[0], "region"] = "a"  # the base level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnseenCategoryWarning)
        assert pred[0] == pytest.approx(model.predict(base)[0])


def test_save_load_pickle_clone(frame, tmp_path):
    model = GraphGLMRegressor(
        family="poisson",
        formula=ISSUE,
        max_epochs=3,
        early_stopping=False,
        random_state=0,
    ).fit(frame)
    loaded = load(model.save(tmp_path / "model.zip"))
    np.testing.assert_array_equal(loaded.predict(frame), model.predict(frame))
    np.testing.assert_array_equal(
        loaded.local_coef(frame).to_numpy(), model.local_coef(frame).to_numpy()
    )
    assert list(loaded.feature_names_out_) == list(model.feature_names_out_)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(frame), model.predict(frame))
    copy = clone(model)
    assert copy.get_params()["formula"] == ISSUE
    assert not hasattr(copy, "global_glm_")


def test_saved_formula_may_not_run_code(frame):
    """A model file's formula is evaluated as Python by formulaic: loading
    allows column names, formulaic's transforms and numpy's ufuncs only."""
    from autoglm_graph.glm._formula import FormulaDesign

    model = GraphGLMRegressor(
        family="poisson", formula="y ~ np.log(density)", local_penalty=np.inf
    ).fit(frame)
    state = model.predictor().glm_terms.formula.state()
    columns = list(frame.columns)
    FormulaDesign.from_state(state, columns)  # the saved one loads
    for bad in ("1 + {__import__('os').getcwd()}", "1 + np.load(age)", "1 + open(age)"):
        with pytest.raises(ValueError, match="may not call"):
            FormulaDesign.from_state({**state, "formula": bad}, columns)


def test_classifier_formula(frame):
    data = frame.assign(high=(frame.y > 1).astype(int))
    formula = "high ~ C(region) + age"
    model = GraphGLMClassifier(formula=formula, alpha=0, local_penalty=np.inf).fit(
        data.drop(columns="y")
    )
    ref = smf.glm(formula, data, family=sm.families.Binomial()).fit()
    np.testing.assert_allclose(model.coef_[0], ref.params.to_numpy()[1:], atol=1e-6)


def test_terms_constraints_and_tables(frame):
    model = GraphGLMRegressor(
        family="poisson",
        formula="y ~ C(region) + bs(age, df=3) + age",
        global_terms=["C(region)"],
        max_epochs=3,
        early_stopping=False,
        random_state=0,
    ).fit(frame)
    local = model.local_coef(frame)
    assert local[["C(region)[T.b]", "C(region)[T.c]"]].std().max() < 1e-12
    wald = model.wald_test_terms(frame, frame.y)
    assert wald.loc["C(region)", "df"] == 2
    assert wald.loc["bs(age, df=3)", "df"] == 3
    table = model.factor_table(frame, frame.y)
    region = table[table.column == "C(region)"]
    assert list(region.level) == ["a", "b", "c"]
    assert region.iloc[0]["coef"] == 0.0 and region.rows.sum() == len(frame)


@pytest.mark.parametrize(
    "params, fit_y, match",
    [
        ({"formula": 3}, None, "'formula' parameter must be None or a formula"),
        ({"formula": "y ~ C(nowhere) + age"}, None, r"names column\(s\) \['nowhere'\]"),
        ({"formula": "y ~ age"}, "y", "left side, and y was given"),
        ({"formula": "y ~ 1 + age", "fit_intercept": False}, None, "contradicts"),
        ({"formula": "y ~ age - 1"}, None, "contradicts fit_intercept=True"),
        (
            {"formula": "y ~ C(region)", "base_levels": {"region": "b"}},
            None,
            "base_levels",
        ),
        ({"formula": "y ~ ("}, None, "could not be parsed"),
    ],
)
def test_bad_input(frame, params, fit_y, match):
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf, **params)
    y = frame.y if fit_y else None
    with pytest.raises(ValueError, match=match):
        model.fit(frame, y)


def test_formula_needs_a_frame(frame):
    model = GraphGLMRegressor(formula="age", local_penalty=np.inf)
    with pytest.raises(ValueError, match="DataFrame"):
        model.fit(frame[["age", "density"]].to_numpy(), frame.y)


def test_labels_on_the_left_side_stay_labels(frame):
    """A column of class labels named on the left side is the target as it is
    (not formulaic's indicator of its first level)."""
    data = frame.assign(size=np.where(frame.y > 1, "big", "small"))
    data["size"] = data["size"].where(frame.y > 0, "none")
    model = GraphGLMClassifier(
        formula="size ~ C(region) + age", local_penalty=np.inf
    ).fit(data.drop(columns="y"))
    assert list(model.classes_) == ["big", "none", "small"]
    assert set(model.predict(data.drop(columns="y"))) <= {"big", "none", "small"}
    with pytest.raises(ValueError, match="must be one column"):
        GraphGLMClassifier(formula="C(size) ~ age").fit(data.drop(columns="y"))
