"""Traps a new user hit (issue #38): each fails with a message that names the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import GraphGLMRegressor

FAST = {"hidden_channels": 16, "heads": 2, "max_epochs": 3, "n_neighbors": 8}


def _exposure_data(n=200, seed=0):
    """Counts proportional to a number of policy holders (3 to 3000)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    holders = rng.integers(3, 3000, n).astype(float)
    y = rng.poisson(0.1 * holders * np.exp(0.2 * X[:, 0]))
    return X, y, holders


# ----------------------------------------------------------- 1. exposure
def test_exposure_as_offset_says_pass_log_exposure():
    X, y, holders = _exposure_data()
    with pytest.raises(ValueError, match=r"(?i)offset.*pass log\(exposure\)"):
        GraphGLMRegressor(family="poisson", **FAST).fit(X, y, offset=holders)


@pytest.mark.parametrize(
    "offset",
    [
        lambda holders: np.log(holders),  # log(Holders) in the thousands
        lambda holders: np.log(np.linspace(0.5, 1.0, len(holders))),
        lambda holders: np.full(len(holders), 7.0),  # one large constant
    ],
    ids=["log_holders", "log_half_to_one", "constant"],
)
def test_genuine_log_exposures_are_accepted(offset):
    X, y, holders = _exposure_data()
    model = GraphGLMRegressor(family="poisson", max_epochs=0).fit(
        X, y, offset=offset(holders)
    )
    assert np.isfinite(model.intercept_).all()


def test_offset_check_is_for_the_log_link_only():
    from autoglm_graph import get_family

    get_family("gaussian").check_offset(np.array([0.0, 1e6]))
    with pytest.raises(ValueError, match="log\\(exposure\\)"):
        get_family("gamma").check_offset(np.array([0.0, 1e6]))


# ------------------------------------------- 2. offset dropped by score
def _offset_pipeline(**routing):
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    model = GraphGLMRegressor(family="poisson", max_epochs=0)
    if routing:
        model = model.set_fit_request(offset=True).set_score_request(offset=True)
    return Pipeline([("scale", StandardScaler()), ("model", model)])


def test_cross_val_score_without_routing_raises_with_the_recipe():
    from sklearn.model_selection import cross_val_score

    X, y, holders = _exposure_data()
    with pytest.raises(ValueError, match=r"enable_metadata_routing=True"):
        cross_val_score(
            _offset_pipeline(),
            X,
            y,
            cv=3,
            params={"model__offset": np.log(holders)},
            error_score="raise",
        )


def test_cross_val_score_with_routing_scores_with_the_offset():
    import sklearn
    from sklearn.model_selection import cross_val_score

    X, y, holders = _exposure_data()
    with sklearn.config_context(enable_metadata_routing=True):
        scores = cross_val_score(
            _offset_pipeline(routing=True),
            X,
            y,
            cv=3,
            params={"offset": np.log(holders)},
        )
    assert np.all(scores > 0.9)


def test_score_without_offset_raises_and_predict_warns():
    X, y, holders = _exposure_data()
    model = GraphGLMRegressor(family="poisson", max_epochs=0)
    model.fit(X, y, offset=np.log(holders))
    with pytest.raises(ValueError, match=r"set_score_request\(offset=True\)"):
        model.score(X, y)
    assert model.score(X, y, offset=np.log(holders)) > 0.9
    with pytest.warns(UserWarning, match="offset"):
        model.predict(X)


# ----------------------------------------------- 3. unseen category level
def _grouped_frame(n=120, seed=0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "Group": rng.choice(["a", "b", "c"], n).astype(object),
            "Age": rng.choice(["young", "old"], n).astype(object),
            "x": rng.normal(size=n),
        }
    )
    y = rng.poisson(np.exp(0.5 + (X["Group"] == "b") + 0.2 * X["x"]))
    return X, y


def test_unseen_level_at_predict_warns_once_naming_column_and_values():
    import warnings

    from autoglm_graph.preprocessing import UnseenCategoryWarning

    X, y = _grouped_frame()
    model = GraphGLMRegressor(family="poisson", max_epochs=0).fit(X, y)
    new = X.iloc[:3].copy()
    new.loc[new.index[0], "Group"] = "zz"
    new.loc[new.index[1], "Age"] = "middle"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict(new)
    unseen = [w for w in caught if issubclass(w.category, UnseenCategoryWarning)]
    assert len(unseen) == 1
    message = str(unseen[0].message)
    assert "'Group'" in message and "'zz'" in message
    assert "'Age'" in message and "'middle'" in message
    assert issubclass(UnseenCategoryWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnseenCategoryWarning)
        model.predict(X.iloc[:5])  # known levels (and missing values) are silent
        missing = X.iloc[:2].copy()
        missing.loc[missing.index[0], "Group"] = None
        model.predict(missing)


# ------------------------------------- 4. convergence warnings one can act on
def _one_hot_design(seed=0):
    """An all-categorical design coded with every level (two columns, 4 levels)."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 4, 80), rng.integers(0, 4, 80)
    X = np.column_stack([np.eye(4)[a], np.eye(4)[b]])
    y = rng.poisson(np.exp(1.0 + 0.3 * a)).astype(float)
    y[a == 3] = 0.0  # a level whose rows are all 0
    return X, y


def test_convergence_warning_on_categorical_design_names_its_causes():
    from sklearn.exceptions import ConvergenceWarning

    from autoglm_graph.glm._solver import fit_global_glm
    from autoglm_graph.glm.families import PoissonFamily

    X, y = _one_hot_design()
    with pytest.warns(ConvergenceWarning) as record:
        fit_global_glm(X, y, PoissonFamily(), max_iter=20)
    message = str(record[0].message)
    assert "numeric" not in message and "Rescale" not in message
    assert "categorical" in message and "alpha=1e-6" in message
    assert "y = 0" in message


def test_convergence_warning_names_large_columns():
    from sklearn.exceptions import ConvergenceWarning

    from autoglm_graph.glm._solver import fit_global_glm
    from autoglm_graph.glm.families import PoissonFamily

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2)) * [1.0, 1e5]
    y = rng.poisson(np.exp(0.5 + 0.3 * X[:, 0])).astype(float)
    with pytest.warns(ConvergenceWarning, match=r"\|x\| > 10000: standardise"):
        fit_global_glm(X, y, PoissonFamily(), max_iter=1)


# ------------------------------------------------------------- 5. the CLI
@pytest.fixture
def insurance_csv(tmp_path):
    """Claims by district (an integer code 1-4), group and holders."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 80
    data = pd.DataFrame(
        {
            "policy_id": np.arange(n),
            "District": rng.integers(1, 5, n),
            "Group": rng.choice(["a", "b", "c"], n),
            "Holders": rng.integers(10, 500, n),
        }
    )
    data["Claims"] = rng.poisson(0.1 * data["Holders"] * data["District"])
    data["log_holders"] = np.log(data["Holders"])
    path = tmp_path / "claims.csv"
    data.to_csv(path, index=False)
    return path


def _cli_fit(path, out, *extra):
    from autoglm_graph.cli import main

    base = ["fit", str(path), "--target", "Claims", "--family", "poisson"]
    fast = ["--set", "local_penalty=inf", "--out", str(out)]
    return main([*base, "--offset", "log_holders", *extra, *fast])


def test_cli_fit_drops_columns_and_reads_codes_as_levels(insurance_csv, tmp_path):
    from autoglm_graph import load

    out = tmp_path / "model"
    code = _cli_fit(
        insurance_csv,
        out,
        "--drop",
        "policy_id",
        "Holders",
        "--categorical",
        "District",
    )
    assert code == 0
    model = load(out)
    assert list(model.feature_names_in_) == ["District", "Group"]
    assert "District" in model.preprocessor_.categorical_features_
    assert {"District_1", "District_4"} <= set(model.feature_names_out_)


def test_cli_predict_without_offset_says_offset_option(insurance_csv, tmp_path, capsys):
    import pandas as pd

    from autoglm_graph.cli import main

    out = tmp_path / "model"
    _cli_fit(insurance_csv, out, "--drop", "policy_id", "Holders")
    capsys.readouterr()
    pred = tmp_path / "pred.csv"
    assert main(["predict", str(out), str(insurance_csv), "--out", str(pred)]) == 0
    err = capsys.readouterr().err
    assert "--offset" in err and "offset=" not in err
    assert "warnings.warn" not in err and ".py:" not in err
    assert (
        main(
            [
                "predict",
                str(out),
                str(insurance_csv),
                "--offset",
                "log_holders",
                "--local-coef",
                "--out",
                str(pred),
            ]
        )
        == 0
    )
    written = pd.read_csv(pred)
    assert {"prediction", "coef_intercept", "coef_Group_a"} <= set(written.columns)
    assert len(written) == 80


def test_cli_prints_a_status_line_before_the_work(insurance_csv, tmp_path, capsys):
    out = tmp_path / "model"
    _cli_fit(insurance_csv, out, "--drop", "policy_id", "Holders")
    err = capsys.readouterr().err
    assert err.startswith("autoglm-graph: importing")
    assert "fitting on 80 rows" in err


# ------------------------------------------------------- 7. smaller traps
def test_a_series_is_one_row():
    X, y = _grouped_frame()
    model = GraphGLMRegressor(family="poisson", max_epochs=0).fit(X, y)
    np.testing.assert_allclose(model.predict(X.iloc[3]), model.predict(X.iloc[[3]]))
    # Its per-row coefficients are one row too, labelled by the Series' name.
    pd.testing.assert_frame_equal(
        model.local_coef(X.iloc[3]), model.local_coef(X.iloc[[3]])
    )


def test_heterogeneity_of_a_global_glm_says_there_is_no_network():
    from autoglm_graph import heterogeneity_test

    X, y = _grouped_frame()
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    with pytest.warns(UserWarning, match="no network to test"):
        table = heterogeneity_test(model, X, y)
    assert not np.isinf(table["z"]).any()
    assert (table["p_value"] == 1.0).all()


def test_plots_of_a_global_glm_say_so(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from autoglm_graph.explain.plotting import plot_local_coef, plot_neighborhood

    X, y = _grouped_frame()
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    ax = plot_neighborhood(model, X.iloc[[0]])
    assert "global GLM" in ax.texts[0].get_text()
    ax = plot_local_coef(model, X)
    assert "no network" in ax.get_title()


def test_plot_local_coef_standardises_numeric_slopes():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from autoglm_graph.explain.plotting import plot_local_coef

    X, y = _grouped_frame()
    X = X.assign(x=X["x"] * 1000.0)  # a slope per unit of 1/1000
    model = GraphGLMRegressor(family="poisson", local_penalty=np.inf).fit(X, y)
    ax = plot_local_coef(model, X, features=["x"])
    shown = ax.collections[0].get_offsets()[0, 0]  # the global GLM's diamond
    sd = model.preprocessor_.design_scaling()[1][
        list(model.feature_names_out_).index("x")
    ]
    assert shown == pytest.approx(
        model.coef_[list(model.feature_names_out_).index("x")] * sd
    )
    assert "standard deviation" in ax.get_xlabel()
