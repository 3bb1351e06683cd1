"""The autoglm-graph command line (autoglm_graph.cli), run in-process via main()."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import __version__
from autoglm_graph.cli import main
from autoglm_graph.datasets import make_varying_coefficients

FAST = ["--max-epochs", "5", "--set", "hidden_channels=16", "--set", "heads=2"]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """Counts with an exposure, a categorical column and a target column."""
    X, y, _ = make_varying_coefficients(
        240, 3, family="poisson", random_state=0, return_frame=True
    )
    rng = np.random.default_rng(0)
    exposure = rng.uniform(0.5, 2.0, len(X))
    data = X.assign(
        region=np.where(X["x0"] > 0, "north", "south"),
        log_exposure=np.log(exposure),
        claims=rng.poisson(exposure * np.maximum(y, 0.1)),
        label=np.where(y > np.median(y), "high", "low"),
        person=np.arange(len(X)) % 60,
        weight=rng.uniform(0.5, 1.5, len(X)),
    )
    return data


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    # Status lines ("autoglm-graph: reading ...") may come first.
    lines = [line for line in err.strip().splitlines() if " error: " in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("autoglm-graph: error: ")
    assert err.strip().splitlines()[-1] == lines[0], err
    return lines[0]


def test_fit_predict_round_trip_csv(table, tmp_path, capsys):
    data = tmp_path / "claims.csv"
    table.drop(columns=["label", "person", "weight"]).to_csv(data, index=False)
    model_dir = tmp_path / "model"
    args = ["fit", str(data), "--target", "claims", "--family", "poisson"]
    args += ["--offset", "log_exposure", *FAST, "--out", str(model_dir)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "rows: 240, features: 4" in out
    assert "family: poisson" in out
    assert model_dir.is_dir()

    predictions = tmp_path / "pred.csv"
    args = ["predict", str(model_dir), str(data), "--out", str(predictions)]
    assert main([*args, "--offset", "log_exposure"]) == 0
    with_offset = pd.read_csv(predictions)
    assert list(with_offset.columns) == ["prediction"]
    assert len(with_offset) == 240
    assert (with_offset["prediction"] > 0).all()
    # Without the offset the predictions are rates per unit of exposure.
    assert main(args) == 0
    rate = pd.read_csv(predictions)["prediction"].to_numpy()
    np.testing.assert_allclose(
        with_offset["prediction"].to_numpy(),
        rate * np.exp(table["log_exposure"].to_numpy()),
        rtol=1e-4,
    )


def test_classifier_parquet_with_probabilities(table, tmp_path, capsys):
    data = tmp_path / "claims.parquet"
    table.drop(columns=["claims", "log_exposure"]).to_parquet(data)
    model_dir = tmp_path / "model"
    args = ["fit", str(data), "--target", "label", "--family", "binomial"]
    args += ["--groups", "person", "--weight", "weight"]
    assert main([*args, *FAST, "--out", str(model_dir)]) == 0
    assert "rows: 240, features: 4" in capsys.readouterr().out
    predictions = tmp_path / "pred.parquet"
    assert main(["predict", str(model_dir), str(data), "--out", str(predictions)]) == 0
    out = pd.read_parquet(predictions)
    assert list(out.columns) == ["prediction", "proba_high", "proba_low"]
    assert set(out["prediction"]) <= {"high", "low"}
    np.testing.assert_allclose(out[["proba_high", "proba_low"]].sum(axis=1), 1.0)


def test_search_saves_the_best_estimator(table, tmp_path, capsys):
    pytest.importorskip("autoglm_graph.search")
    data = tmp_path / "claims.csv"
    table.drop(columns=["label", "person", "weight"]).to_csv(data, index=False)
    args = ["search", str(data), "--target", "claims", "--family", "poisson"]
    args += ["--offset", "log_exposure", "--trials", "2", *FAST]
    args += ["--storage", f"sqlite:///{tmp_path / 'study.db'}", "--study-name", "t"]
    assert main([*args, "--out", str(tmp_path / "best")]) == 0
    out = capsys.readouterr().out
    assert "study 't'" in out
    assert "best parameters" in out
    predictions = tmp_path / "pred.csv"
    args = ["predict", str(tmp_path / "best"), str(data), "--out", str(predictions)]
    assert main([*args, "--offset", "log_exposure"]) == 0
    assert len(pd.read_csv(predictions)) == len(table)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--target": "nope"}, "--target column 'nope' is not in"),
        ({"--family": "poison"}, "Unknown family 'poison'"),
        ({"--offset": "missing_col"}, "--offset column 'missing_col'"),
        ({"data": "absent.csv"}, "No such file"),
        ({"data": "claims.txt"}, "Cannot tell the format"),
        ({"--target": "region"}, "must be finite numbers"),
        ({"--target": "x0"}, "The poisson family requires y >= 0"),
        ({"--family": "binomial", "--target": "x0"}, "holds continuous numbers"),
        ({"--set": "no_such_param=1"}, "Invalid parameter 'no_such_param'"),
        ({"--set": "max_epochs"}, "--set expects NAME=VALUE"),
        ({"--weight": "claims"}, "One column has two roles"),
    ],
)
def test_user_errors_print_one_line(table, tmp_path, capsys, change, message):
    table.to_csv(tmp_path / "claims.csv", index=False)
    (tmp_path / "claims.txt").write_text("a,b\n1,2\n")
    options = {
        "data": "claims.csv",
        "--target": "claims",
        "--family": "poisson",
        "--set": "max_epochs=2",
    }
    options.update(change)
    args = ["fit", str(tmp_path / options.pop("data"))]
    for key, value in options.items():
        args += [key, value]
    assert main([*args, "--out", str(tmp_path / "model")]) == 1
    assert message in _error_line(capsys)


def test_binomial_with_many_classes_is_a_user_error(tmp_path, capsys):
    data = tmp_path / "three.csv"
    pd.DataFrame({"x": np.arange(30.0), "y": np.arange(30) % 3}).to_csv(data)
    args = ["fit", str(data), "--target", "y", "--family", "binomial"]
    assert main([*args, "--out", str(tmp_path / "m")]) == 1
    assert "--family multinomial" in _error_line(capsys)


def test_predict_errors(table, tmp_path, capsys):
    data = tmp_path / "claims.csv"
    table[["x0", "x1"]].to_csv(data, index=False)
    assert main(["predict", str(tmp_path / "none"), str(data), "--out", "p.csv"]) == 1
    assert "No saved model" in _error_line(capsys)


def test_debug_shows_the_exception(tmp_path):
    with pytest.raises(FileNotFoundError):
        main(["fit", str(tmp_path / "absent.csv"), "--target", "y", "--family",
              "gaussian", "--out", str(tmp_path / "m"), "--debug"])  # fmt: skip


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["fit"])
    assert excinfo.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_datasets_lists_names(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    for name in ("diabetes", "synthetic_poisson", "rwm5yr"):
        assert name in out
    assert main(["datasets", "--suite", "synthetic"]) == 0
    assert "diabetes" not in capsys.readouterr().out


def test_python_m_version():
    result = subprocess.run(
        [sys.executable, "-m", "autoglm_graph", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"autoglm-graph {__version__}"


def test_set_parses_values():
    from autoglm_graph.cli import _parse_params

    parsed = _parse_params(
        ["local_penalty=inf", "conv=gatv2", "early_stopping=false", "heads=2",
         "batch_size=None", "tol=1e-3"]
    )  # fmt: skip
    assert parsed == {
        "local_penalty": np.inf,
        "conv": "gatv2",
        "early_stopping": False,
        "heads": 2,
        "batch_size": None,
        "tol": 1e-3,
    }


# ------------------------------------------------------------------ #16
def test_help_does_not_import_torch():
    # Every command's --help answers without loading torch (seconds) or the
    # estimators; measured in a fresh interpreter, where nothing is imported yet.
    code = (
        "import sys\n"
        "from autoglm_graph.cli import main\n"
        "for command in ([], ['fit'], ['predict'], ['search'], ['datasets']):\n"
        "    try:\n"
        "        main([*command, '--help'])\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code == 0, exit.code\n"
        "heavy = [m for m in ('torch', 'torch_geometric', 'sklearn', 'pandas',\n"
        "         'autoglm_graph.estimators') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


def test_package_names_load_lazily():
    import autoglm_graph

    assert set(autoglm_graph.__all__) == {"__version__", *autoglm_graph._EXPORTS}
    for name in autoglm_graph.__all__:
        assert getattr(autoglm_graph, name) is not None
    assert autoglm_graph.load.__name__ == "load_model"
    assert autoglm_graph.datasets.list_datasets is not None  # a submodule
    assert "GraphGLMRegressor" in dir(autoglm_graph)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        autoglm_graph.nope  # noqa: B018


@pytest.mark.parametrize("out", ["m1.txt", "model.csv"])
def test_model_out_with_a_file_extension_is_refused(table, tmp_path, capsys, out):
    data = tmp_path / "claims.csv"
    table[["x0", "x1", "claims"]].to_csv(data, index=False)
    args = ["fit", str(data), "--target", "claims", "--family", "poisson"]
    assert main([*args, "--out", str(tmp_path / out)]) == 1
    line = _error_line(capsys)
    assert f"looks like a {out[out.index('.') :]} file" in line
    assert "model.zip" in line
    assert not (tmp_path / out).exists()


def test_model_out_as_directory_or_zip(table, tmp_path, capsys):
    data = tmp_path / "claims.csv"
    table[["x0", "x1", "claims"]].to_csv(data, index=False)
    args = ["fit", str(data), "--target", "claims", "--family", "poisson"]
    args += ["--set", "local_penalty=inf"]
    assert main([*args, "--out", str(tmp_path / "m.zip")]) == 0
    assert (tmp_path / "m.zip").is_file()
    assert main([*args, "--out", f"{tmp_path / 'run.v1'}/"]) == 0  # trailing '/'
    assert (tmp_path / "run.v1").is_dir()
    assert "gain over the global GLM: -0 " not in capsys.readouterr().out


def test_parquet_without_pyarrow_names_the_extra(table, tmp_path, capsys, monkeypatch):
    import pandas.io.parquet

    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine; tried using: 'pyarrow'.")

    monkeypatch.setattr(pandas.io.parquet, "get_engine", no_engine)
    (tmp_path / "claims.parquet").write_bytes(b"PAR1")
    args = ["fit", str(tmp_path / "claims.parquet"), "--target", "claims"]
    assert main([*args, "--family", "poisson", "--out", str(tmp_path / "m")]) == 1
    line = _error_line(capsys)
    assert "pip install 'autoglm-graph[parquet]'" in line
    data = tmp_path / "claims.csv"
    table[["x0", "claims"]].to_csv(data, index=False)
    model = tmp_path / "model"
    fit = ["fit", str(data), "--target", "claims", "--family", "poisson"]
    assert main([*fit, "--set", "local_penalty=inf", "--out", str(model)]) == 0
    capsys.readouterr()
    out = str(tmp_path / "p.parquet")
    assert main(["predict", str(model), str(data), "--out", out]) == 1
    assert "autoglm-graph[parquet]" in _error_line(capsys)


@pytest.mark.parametrize("command", ["fit", "predict"])
def test_unwritable_out_is_refused_before_the_work(
    table, tmp_path, capsys, monkeypatch, command
):
    """An --out under a file was found only after the fit, and reported as an
    internal error (FileExistsError)."""
    import autoglm_graph.cli as cli

    data = tmp_path / "claims.csv"
    table[["x0", "x1", "claims"]].to_csv(data, index=False)
    out = data / ("model/" if command == "fit" else "p.csv")  # under a file
    if command == "fit":
        args = ["fit", str(data), "--target", "claims", "--family", "poisson"]
    else:
        args = ["predict", str(tmp_path / "never-read"), str(data)]
    reads = []
    original = cli.read_table
    monkeypatch.setattr(cli, "read_table", lambda p: reads.append(p) or original(p))
    assert main([*args, "--out", str(out)]) == 1
    line = _error_line(capsys)
    assert f"{str(data)!r} is a file, not a folder" in line
    assert reads == []  # nothing was read, let alone fitted


def test_fit_without_intercept(table, tmp_path):
    from autoglm_graph.persistence._io import load_model

    data = tmp_path / "claims.csv"
    table.drop(columns=["label"]).to_csv(data, index=False)
    model_dir = tmp_path / "model"
    args = ["fit", str(data), "--target", "claims", "--family", "poisson"]
    assert main([*args, *FAST, "--no-intercept", "--out", str(model_dir)]) == 0
    model = load_model(model_dir)
    assert model.fit_intercept is False
    assert model.intercept_ == 0.0


def test_fit_with_a_formula_and_predict(table, tmp_path, capsys):
    """The target comes from the formula's left side; the saved model
    predicts with the formula's fitted state (its levels) from a file
    without the target column."""
    from autoglm_graph.persistence._io import load_model

    data = tmp_path / "claims.csv"
    table.drop(columns=["label", "person", "weight"]).to_csv(data, index=False)
    model_dir = tmp_path / "model"
    formula = "claims ~ x0 + C(region)"
    args = ["fit", str(data), "--family", "poisson", "--offset", "log_exposure"]
    assert main([*args, "--formula", formula, *FAST, "--out", str(model_dir)]) == 0
    assert "rows: 240, features: 4" in capsys.readouterr().out
    model = load_model(model_dir)
    assert model.formula == formula
    assert list(model.feature_names_out_) == ["x0", "C(region)[T.south]"]
    new = tmp_path / "new.csv"
    table.drop(columns=["claims", "label"]).head(30).to_csv(new, index=False)
    predictions = tmp_path / "pred.csv"
    args = ["predict", str(model_dir), str(new), "--out", str(predictions)]
    assert main([*args, "--offset", "log_exposure"]) == 0
    X = table.drop(columns=["claims", "label", "person", "weight", "log_exposure"])
    expected = model.predict(X.head(30), offset=table["log_exposure"].head(30))
    np.testing.assert_allclose(pd.read_csv(predictions)["prediction"], expected)
    # --target naming the same column agrees; another one is an error.
    again = ["fit", str(data), "--family", "poisson", "--target", "claims"]
    assert main([*again, "--formula", formula, *FAST, "--out", str(model_dir)]) == 0
    capsys.readouterr()
    other = ["fit", str(data), "--family", "poisson", "--target", "x1"]
    assert main([*other, "--formula", formula, "--out", str(model_dir)]) == 1
    assert "name different targets" in _error_line(capsys)


def test_a_one_sided_formula_takes_target(table, tmp_path, capsys):
    data = tmp_path / "claims.csv"
    table[["x0", "region", "claims"]].to_csv(data, index=False)
    args = ["fit", str(data), "--family", "poisson", "--formula", "x0 + C(region)"]
    out = ["--out", str(tmp_path / "model")]
    assert main([*args, *out]) == 1
    assert "No target: give --target" in _error_line(capsys)
    assert main([*args, "--target", "claims", *FAST, *out]) == 0
    with_set = ["fit", str(data), "--family", "poisson", "--set", "formula=claims ~ x0"]
    assert main([*with_set, *FAST, *out]) == 0


# ------------------------------------------------------------ #44, point 9
@pytest.fixture()
def coded(tmp_path):
    """Counts with integer codes (a state 1-6, a year), a count-like slope
    with many values and a 0/1 indicator."""
    rng = np.random.default_rng(0)
    n = 180
    frame = pd.DataFrame(
        {
            "state": rng.integers(1, 7, n),
            "year": rng.integers(2001, 2005, n).astype(float),
            "age": np.arange(n) % 150,  # 150 values: a slope
            "urban": rng.integers(0, 2, n),  # 0/1: slope and level agree
            "x0": rng.standard_normal(n),
        }
    )
    frame.loc[3, "year"] = np.nan  # a float column of whole numbers
    frame["claims"] = rng.poisson(np.exp(0.2 * frame["state"] % 3), n)
    path = tmp_path / "coded.csv"
    frame.to_csv(path, index=False)
    return path


def _notes(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if " note: " in line]


def test_integer_codes_read_as_slopes_are_named(coded, tmp_path, capsys):
    args = ["fit", str(coded), "--target", "claims", "--family", "poisson"]
    args += ["--set", "local_penalty=inf", "--out", str(tmp_path / "m")]
    assert main(args) == 0
    (note,) = _notes(capsys)
    assert note == (
        "autoglm-graph: note: integer columns read as numeric slopes: "
        "state (6 values), year (4 values); if they are codes, read them as "
        "levels with --categorical state year (or --auto-categorical)."
    )
    assert main([*args, "--categorical", "state"]) == 0
    (note,) = _notes(capsys)
    assert "slopes: year (4 values);" in note and "--categorical year " in note
    assert main([*args, "--max-code-levels", "5"]) == 0  # state has 6
    (note,) = _notes(capsys)
    assert "slopes: year (4 values);" in note
    assert main([*args, "--max-code-levels", "0"]) == 0
    assert _notes(capsys) == []
    formula = ["--formula", "claims ~ x0 + state"]  # the formula's own choice
    assert main([*args, *formula]) == 0
    assert _notes(capsys) == []


def test_auto_categorical_reads_integer_codes_as_levels(coded, tmp_path, capsys):
    from autoglm_graph.persistence._io import load_model

    model_dir = tmp_path / "m"
    args = ["fit", str(coded), "--target", "claims", "--family", "poisson"]
    args += ["--set", "local_penalty=inf", "--auto-categorical"]
    assert main([*args, "--out", str(model_dir)]) == 0
    (note,) = _notes(capsys)
    assert note == (
        "autoglm-graph: note: integer columns read as levels "
        "(--auto-categorical): state (6 values), year (4 values)."
    )
    model = load_model(model_dir)
    assert set(model.preprocessor_.categorical_features_) == {"state", "year"}
    predictions = tmp_path / "pred.csv"
    assert main(["predict", str(model_dir), str(coded), "--out", str(predictions)]) == 0
    assert len(pd.read_csv(predictions)) == 180
    formula = ["--formula", "claims ~ x0 + C(state)"]
    assert main([*args, *formula, "--out", str(model_dir)]) == 1
    assert "--auto-categorical does not combine with --formula" in _error_line(capsys)


def test_max_code_levels_must_be_a_count(coded, capsys):
    args = ["fit", str(coded), "--target", "claims", "--family", "poisson"]
    with pytest.raises(SystemExit) as excinfo:
        main([*args, "--max-code-levels", "-1", "--out", "m"])
    assert excinfo.value.code == 2
    assert "expected an int >= 0; got '-1'" in capsys.readouterr().err
