"""The ``autoglm-graph`` command line: fit, predict, search, list datasets.

Examples
--------
.. code-block:: bash

    autoglm-graph fit claims.csv --target n_claims --family poisson \\
        --offset log_exposure --out model/
    autoglm-graph predict model/ new_claims.parquet --out predictions.csv \\
        --offset log_exposure
    autoglm-graph search claims.csv --target n_claims --family poisson \\
        --trials 20 --storage sqlite:///search.db --out best/
    autoglm-graph fit claims.csv --family poisson --offset log_exposure \\
        --formula "n_claims ~ age + C(region)" --out model/
    autoglm-graph datasets

Integer columns are slopes unless named in ``--categorical``. ``fit`` and
``search`` name on stderr, in one note, the integer columns with 3 to
``--max-code-levels`` (100) distinct values that they read as slopes (a
``state`` coded 1-46, a ``year``), with the ``--categorical`` that makes them
levels; ``--auto-categorical`` reads them all as levels. With ``--formula``
the formula says how each column enters (``C(state)``) and nothing is said.

Also runnable as ``python -m autoglm_graph``. User errors (a missing file, an
unknown column, a bad family or target) print one line
``autoglm-graph: error: ...`` and exit with status 1; ``--debug`` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import ast
import shlex
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# numpy, pandas, torch and the estimators are imported inside the commands, so
# that `autoglm-graph --help` answers at once (importing torch takes seconds).
if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

PROG = "autoglm-graph"
# Errors a user can fix: reported in one line, without a traceback.
USER_ERRORS = (ValueError, FileNotFoundError, KeyError, ImportError, TypeError)
_READERS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
PARQUET_HINT = (
    "Parquet files need pyarrow: pip install 'autoglm-graph[parquet]' "
    "(or pip install pyarrow)."
)

EPILOG = """examples:
  autoglm-graph fit claims.csv --target n_claims --family poisson \\
      --offset log_exposure --out model/
  autoglm-graph predict model/ new.parquet --offset log_exposure --out pred.csv
  autoglm-graph search claims.csv --target n_claims --family poisson \\
      --trials 20 --storage sqlite:///search.db --out best/
  autoglm-graph fit claims.csv --family poisson --offset log_exposure \\
      --formula "n_claims ~ age + C(region)" --out model/
  autoglm-graph datasets

'autoglm-graph COMMAND --help' describes each command."""

__all__ = ["build_parser", "main", "read_table", "write_table"]


# ------------------------------------------------------------------ tables
def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in _READERS:
        raise ValueError(
            f"Cannot tell the format of {str(path)!r} from its extension "
            f"{suffix!r}; expected one of {', '.join(_READERS)}."
        )
    return _READERS[suffix]


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV, TSV or Parquet file, chosen by its extension.

    Parameters
    ----------
    path : str or Path
        ``.csv``, ``.tsv``, ``.parquet`` or ``.pq``.

    Returns
    -------
    DataFrame

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        If the extension is unknown or the file cannot be parsed.
    """
    import pandas as pd

    path = Path(path)
    kind = _format(path)
    if not path.is_file():
        raise FileNotFoundError(f"No such file: {str(path)!r}.")
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, sep="\t" if kind == "tsv" else ",")
    except ImportError as error:
        if kind == "parquet":
            raise ImportError(PARQUET_HINT) from error
        raise
    except Exception as error:  # the readers raise many types for a bad file
        raise ValueError(
            f"Cannot read {str(path)!r} as {kind}: {type(error).__name__}: {error}"
        ) from error


def write_table(frame: pd.DataFrame, path: str | Path) -> None:
    """Write ``frame`` as CSV, TSV or Parquet, chosen by the extension of ``path``.

    Parameters
    ----------
    frame : DataFrame
    path : str or Path
        ``.csv``, ``.tsv``, ``.parquet`` or ``.pq``; missing parent folders are
        created.
    """
    path = Path(path)
    kind = _format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "parquet":
        try:
            frame.to_parquet(path, index=False)
        except ImportError as error:
            raise ImportError(PARQUET_HINT) from error
    else:
        frame.to_csv(path, sep="\t" if kind == "tsv" else ",", index=False)


def _column(data: pd.DataFrame, name: str, option: str, path: str) -> pd.Series:
    if name not in data.columns:
        shown = ", ".join(map(str, data.columns[:20]))
        more = ", ..." if len(data.columns) > 20 else ""
        raise ValueError(
            f"{option} column {name!r} is not in {path}; its columns are: "
            f"{shown}{more}."
        )
    return data[name]


def _formula(args: argparse.Namespace) -> str | None:
    """The estimator's formula: ``--formula``, or ``--set formula=...``."""
    formula = args.formula
    if "formula" in _parse_params(args.set):
        if formula is not None:
            raise ValueError("Give the formula once: --formula or --set formula=.")
        formula = _parse_params(args.set)["formula"]
    return formula


def _resolve_target(args: argparse.Namespace) -> bool:
    """Set ``args.target`` from a two-sided formula's left side (or check that
    ``--target`` names the same column); True when the left side names it."""
    from .glm import left_side_columns

    formula = _formula(args)
    left = [] if formula is None else left_side_columns(formula)
    if len(left) > 1:
        raise ValueError(
            f"The --formula's left side must name one target column; {formula!r} "
            f"reads {left}."
        )
    if left and args.target is not None and args.target != left[0]:
        raise ValueError(
            f"--target {args.target!r} and the --formula's left side "
            f"({left[0]!r}) name different targets; give one of them."
        )
    if left:
        args.target = left[0]
    elif args.target is None:
        raise ValueError(
            "No target: give --target COL, or a --formula with the target on its "
            "left side (e.g. 'n_claims ~ age + C(region)')."
        )
    return bool(left)


def _split_columns(data: pd.DataFrame, args: argparse.Namespace):
    """X and the fit arguments (y, sample_weight, offset, groups) from ``data``."""
    import numpy as np

    roles = {
        "--target": args.target,
        "--weight": args.weight,
        "--offset": args.offset,
        "--groups": args.groups,
    }
    used = [name for name in roles.values() if name is not None]
    if len(set(used)) != len(used):
        raise ValueError(f"One column has two roles: {roles}.")
    columns = {
        option: _column(data, name, option, args.data)
        for option, name in roles.items()
        if name is not None
    }
    for name in [*args.drop, *args.categorical]:
        option = "--drop" if name in args.drop else "--categorical"
        _column(data, name, option, args.data)
        if name in used:
            raise ValueError(f"{option} column {name!r} has another role: {roles}.")
    X = data.drop(columns=[*used, *args.drop])
    for name in args.categorical:
        if name in X.columns:
            X[name] = _as_labels(X[name])
    X = _integer_codes(X, args)
    if X.shape[1] == 0:
        raise ValueError(f"{args.data} has no feature columns besides {used}.")
    fit_kwargs = {}
    if "--weight" in columns:
        fit_kwargs["sample_weight"] = _numeric(columns["--weight"], "--weight")
    if "--offset" in columns:
        fit_kwargs["offset"] = _numeric(columns["--offset"], "--offset")
    if "--groups" in columns:
        fit_kwargs["groups"] = np.array(columns["--groups"])
    return X, columns["--target"], fit_kwargs


def _as_labels(column: pd.Series) -> pd.Series:
    """The values of ``column`` as text levels (object dtype, NaN kept):
    ``1`` and ``1.0`` both become ``"1"``, so that integer codes read from a
    file are levels, not a slope."""
    import pandas as pd

    values = column
    if pd.api.types.is_float_dtype(values) and (values.dropna() % 1 == 0).all():
        values = values.astype("Int64")
    labels = values.astype(object).map(str)
    return labels.where(column.notna(), other=float("nan")).astype(object)


def _integer_code_columns(X: pd.DataFrame, max_levels: int) -> dict[str, int]:
    """The numeric columns of ``X`` that look like integer codes, with their
    numbers of distinct values: whole numbers (integer dtype, or floats that
    are whole where present) with 3 to ``max_levels`` distinct values. Two
    values are left out: a 0/1 column fits the same GLM as a slope or as a
    level."""
    import pandas as pd

    found = {}
    for name in X.columns:
        column = X[name]
        if not _is_number_column(column):
            continue
        values = column.dropna()
        whole = pd.api.types.is_integer_dtype(column.dtype) or bool(
            (values % 1 == 0).all()
        )
        n_values = int(values.nunique()) if whole else 0
        if 3 <= n_values <= max_levels:
            found[name] = n_values
    return found


def _integer_codes(X: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """Say on stderr which integer columns are read as slopes (see
    :func:`_integer_code_columns`); with ``--auto-categorical`` read them as
    levels instead. A formula says itself how each column enters
    (``C(state)``), so with one nothing is said."""
    if _formula(args) is not None:
        if args.auto_categorical:
            raise ValueError(
                "--auto-categorical does not combine with --formula: the "
                "formula says how each column enters; write C(state) there to "
                "read a column as levels."
            )
        return X
    codes = _integer_code_columns(X, args.max_code_levels)
    if not codes:
        return X
    shown = ", ".join(f"{name} ({n} values)" for name, n in list(codes.items())[:10])
    shown += f", ... ({len(codes)} columns)" if len(codes) > 10 else ""
    if args.auto_categorical:
        for name in codes:
            X[name] = _as_labels(X[name])
        _status(f"note: integer columns read as levels (--auto-categorical): {shown}.")
        return X
    names = " ".join(shlex.quote(str(name)) for name in codes)
    _status(
        f"note: integer columns read as numeric slopes: {shown}; if they are "
        f"codes, read them as levels with --categorical {names} (or "
        "--auto-categorical)."
    )
    return X


def _numeric(column: pd.Series, option: str) -> np.ndarray:
    import numpy as np
    import pandas as pd

    # A writable copy: pandas may hand out read-only views, which torch warns about.
    values = np.array(pd.to_numeric(column, errors="coerce"), dtype=np.float64)
    if not np.isfinite(values).all():
        raise ValueError(
            f"{option} column {column.name!r} must be finite numbers; "
            f"{int((~np.isfinite(values)).sum())} values are missing or not numeric."
        )
    return values


# --------------------------------------------------------------- estimators
def _family(name: str) -> str:
    from .glm import get_family

    return get_family(name).name  # ValueError listing the families if unknown


def _is_classification(name: str) -> bool:
    from .glm import get_family

    return get_family(name).is_classification


def _parse_params(items: Sequence[str]) -> dict:
    params = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--set expects NAME=VALUE; got {item!r}.")
        words = {"true": True, "false": False, "none": None}
        if text.strip().lower() in words:
            value = words[text.strip().lower()]
        elif text.strip().lower().lstrip("+-") in ("inf", "nan"):
            value = float(text)  # e.g. local_penalty=inf: the global GLM
        else:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = text  # a bare string, e.g. conv=gatv2
        params[name.strip()] = value
    return params


def _make_estimator(args: argparse.Namespace, y: pd.Series):
    from .estimators import GraphGLMClassifier, GraphGLMRegressor

    family = _family(args.family)
    common = {"random_state": args.random_state, "verbose": args.verbose}
    if args.max_epochs is not None:
        common["max_epochs"] = args.max_epochs
    if getattr(args, "no_intercept", False):
        common["fit_intercept"] = False
    if getattr(args, "formula", None) is not None:
        common["formula"] = args.formula
    if _is_classification(family):
        from sklearn.utils.multiclass import type_of_target

        if type_of_target(y.dropna()) == "continuous":
            raise ValueError(
                f"The --family {family} needs class labels; the target column "
                f"{args.target!r} holds continuous numbers."
            )
        n_classes = y.nunique(dropna=True)
        if family == "binomial" and n_classes > 2:
            raise ValueError(
                f"--family binomial needs a target with 2 classes; {args.target!r} "
                f"has {n_classes}. Use --family multinomial."
            )
        estimator = GraphGLMClassifier(**common)
    else:
        estimator = GraphGLMRegressor(family=family, **common)
    return estimator.set_params(**_parse_params(args.set))


def _target(y: pd.Series, family: str) -> np.ndarray:
    if _is_classification(family):
        if y.isna().any():
            raise ValueError(f"The target column {y.name!r} has missing values.")
        return y.to_numpy(copy=True)
    return _numeric(y, "--target")


def _status(text: str) -> None:
    """One line on stderr before a step that takes seconds (the output stays
    clean for pipes)."""
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def _load_fit_data(args: argparse.Namespace):
    """``(X, y, fit_kwargs, estimator)``; with a two-sided formula the target
    stays a column of X and y is None (the estimator reads the left side)."""
    in_formula = _resolve_target(args)
    _status(f"reading {args.data} ...")
    data = read_table(args.data)
    X, y, fit_kwargs = _split_columns(data, args)
    estimator = _make_estimator(args, y)
    target = _target(y, _family(args.family))
    if in_formula:
        return X.assign(**{args.target: target}), None, fit_kwargs, estimator
    return X, target, fit_kwargs, estimator


def _summary(model, X: pd.DataFrame, seconds: float) -> str:
    kind = "global GLM only" if model.is_global_only_ else "graph GLM"
    lines = [
        f"rows: {X.shape[0]}, features: {model.n_features_in_} "
        f"({len(model.feature_names_out_)} after preprocessing), "
        f"family: {model.family_.name}",
        f"model: {kind}"
        + (f" ({model.global_only_reason_})" if model.is_global_only_ else ""),
    ]
    if hasattr(model, "validation_gain_"):
        gain = model.validation_gain_ + 0.0  # + 0.0: no "-0" when there is none
        lines.append(
            f"validation gain over the global GLM: {gain:.4g} "
            f"(standard error {model.validation_gain_se_:.2g})"
        )
    lines.append(f"time: {seconds:.1f} s")
    return "\n".join(lines)


# ----------------------------------------------------------------- commands
def _check_model_out(out: str) -> None:
    """Refuse a model path that names a file of another kind (``m1.txt``).

    ``save`` writes a directory for any path but ``.zip``: without this check
    ``--out m1.txt`` would silently become a folder named ``m1.txt``.
    """
    from .persistence import check_save_path

    path = check_save_path(out)  # a link, or a folder holding other files
    _check_writable(path, "--out")
    suffix = path.suffix.lower()
    if suffix in ("", ".zip") or out.endswith(("/", "\\")) or path.is_dir():
        return
    raise ValueError(
        f"--out {out!r} looks like a {suffix} file; a model is saved as a "
        "directory (e.g. model/) or as one .zip file (model.zip). End the path "
        "with '/' to use it as a directory name."
    )


def _check_writable(path: Path, option: str) -> None:
    """Refuse now an output path that cannot be written (its nearest existing
    folder is a file, or refuses a new file), rather than after the fit."""
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(
            f"{option} {str(path)!r} cannot be written: {str(folder)!r} is a file, "
            "not a folder."
        )
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(
            f"{option} {str(path)!r} cannot be written: no new file can be made "
            f"in {str(folder)!r} ({exc.strerror or exc})."
        ) from exc


def _cmd_fit(args: argparse.Namespace) -> int:
    _status("importing torch and scikit-learn (a few seconds) ...")
    _check_model_out(args.out)  # fail before the work
    X, y, fit_kwargs, estimator = _load_fit_data(args)
    _status(f"fitting on {X.shape[0]} rows, {X.shape[1]} columns ...")
    start = time.perf_counter()
    model = estimator.fit(X, y, **fit_kwargs)
    seconds = time.perf_counter() - start
    _status(f"saving to {args.out} ...")
    model.save(args.out)
    print(_summary(model, X, seconds))
    print(f"saved to {args.out}")
    return 0


def _feature_frame(model, data: pd.DataFrame, path: str) -> pd.DataFrame:
    names = getattr(model, "feature_names_in_", None)
    if names is None:  # fitted on an array: take the columns in order
        if data.shape[1] != model.n_features_in_:
            raise ValueError(
                f"The model expects {model.n_features_in_} columns; {path} has "
                f"{data.shape[1]}."
            )
        return data
    missing = [name for name in names if name not in data.columns]
    if missing:
        raise ValueError(f"{path} lacks the model's feature columns {missing}.")
    frame = data[list(names)]
    # Integer codes that fit read as levels (--categorical) are levels again.
    categorical = getattr(model.preprocessor_, "categorical_features_", [])
    for name in categorical:
        if name in frame.columns and _is_number_column(frame[name]):
            frame = frame.assign(**{name: _as_labels(frame[name])})
    return frame


def _is_number_column(column: pd.Series) -> bool:
    import pandas as pd

    kind = column.dtype
    return pd.api.types.is_numeric_dtype(kind) and not pd.api.types.is_bool_dtype(kind)


def _cmd_predict(args: argparse.Namespace) -> int:
    _format(Path(args.out))  # fail before the work on a bad output name
    _check_writable(Path(args.out), "--out")
    _status(f"loading {args.model} ...")
    import pandas as pd

    # scikit-learn; torch too for a model with a network (a model that is the
    # global GLM loads and predicts without it).
    from . import load

    model = load(args.model)
    data = read_table(args.data)
    offset = None
    if args.offset is not None:
        offset = _numeric(_column(data, args.offset, "--offset", args.data), "--offset")
    elif getattr(model, "offset_used_", False):
        _status(
            "warning: the model was fitted with an offset and no --offset column "
            "was given: the predictions are for offset 0 (e.g. a rate per unit "
            "of exposure). Pass --offset COLUMN to predict with exposure."
        )
    X = _feature_frame(model, data, args.data)
    _status(f"predicting {X.shape[0]} rows ...")
    with warnings.catch_warnings():
        # Said above in the command line's words.
        warnings.filterwarnings("ignore", message=r".*fitted with an offset")
        output = pd.DataFrame({"prediction": model.predict(X, offset=offset)})
        if hasattr(model, "predict_proba"):
            proba = model.predict_proba(X, offset=offset)
            for k, label in enumerate(model.classes_):
                output[f"proba_{label}"] = proba[:, k]
    if args.local_coef:
        output = pd.concat([output, _local_coef_columns(model, X)], axis=1)
    write_table(output, args.out)
    print(f"wrote {len(output)} predictions to {args.out}")
    return 0


def _local_coef_columns(model, X: pd.DataFrame) -> pd.DataFrame:
    """Per-row coefficients as ``coef_<term>`` (``coef_<class>_<term>``) columns."""
    coef = model.local_coef(X).reset_index(drop=True)
    if coef.columns.nlevels > 1:
        coef.columns = ["_".join(map(str, c)) for c in coef.columns]
    return coef.add_prefix("coef_")


def _cmd_search(args: argparse.Namespace) -> int:
    from .search import GraphGLMSearchCV

    _status("importing torch, scikit-learn and optuna (a few seconds) ...")
    _check_model_out(args.out)
    X, y, fit_kwargs, estimator = _load_fit_data(args)
    estimator.set_params(verbose=0)  # the search's own bar is over trials
    search = GraphGLMSearchCV(
        estimator,
        n_trials=args.trials,
        storage=args.storage,
        study_name=args.study_name,
        random_state=args.random_state,
        verbose=min(args.verbose, 2),
    )
    start = time.perf_counter()
    search.fit(X, y, **fit_kwargs)
    seconds = time.perf_counter() - start
    search.best_estimator_.save(args.out)
    print(search.summary())
    print(_summary(search.best_estimator_, X, seconds))
    print(f"saved the best estimator to {args.out}")
    return 0


def _cmd_datasets(args: argparse.Namespace) -> int:
    from .datasets import list_datasets

    table = list_datasets(args.suite)
    columns = ["name", "suite", "family", "n_rows", "n_features", "available"]
    print(table[columns].to_string(index=False))
    return 0


# ------------------------------------------------------------------- parser
def _add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", help="training data: .csv, .tsv or .parquet")
    parser.add_argument(
        "--target",
        help="column to predict (or the left side of --formula)",
    )
    parser.add_argument(
        "--family",
        required=True,
        help="gaussian, poisson, gamma, tweedie, negative_binomial, binomial or "
        "multinomial",
    )
    parser.add_argument("--offset", help="column added to the linear predictor")
    parser.add_argument("--weight", help="column of sample weights")
    parser.add_argument(
        "--groups", help="column of unit ids (kept on one side of validation)"
    )
    parser.add_argument(
        "--drop",
        nargs="+",
        action="extend",
        default=[],
        metavar="COL",
        help="columns that are not features (identifiers, other targets)",
    )
    parser.add_argument(
        "--categorical",
        nargs="+",
        action="extend",
        default=[],
        metavar="COL",
        help="numeric columns read as levels, e.g. an integer code such as a "
        "district 1-4 (otherwise a slope)",
    )
    parser.add_argument(
        "--max-code-levels",
        type=_non_negative_int,
        default=100,
        metavar="N",
        help="integer columns with 3 to N distinct values (a state or a year "
        "code, say) read as slopes are named in a note on stderr; 0: no note "
        "(default: 100)",
    )
    parser.add_argument(
        "--auto-categorical",
        action="store_true",
        help="read those integer columns as levels, as if named in --categorical",
    )
    parser.add_argument(
        "--formula",
        help="the global GLM's terms as a formula, e.g. 'n_claims ~ age + "
        "C(region)' (the left side, if any, names the target)",
    )
    parser.add_argument("--max-epochs", type=int, help="upper bound on epochs")
    parser.add_argument(
        "--no-intercept",
        action="store_true",
        help="fit without an intercept (fit_intercept=False)",
    )
    parser.add_argument("--random-state", type=int, default=0, help="seed (0)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any estimator parameter, e.g. --set hidden_channels=32 (repeatable)",
    )
    parser.add_argument(
        "--out", required=True, help="where to save the model: a directory or .zip"
    )


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an int >= 0; got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``autoglm-graph``."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Fit and apply graph-contextualized GLMs on tabular files.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="count", default=0, help="progress bars"
    )
    common.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    fit = commands.add_parser("fit", parents=[common], help="fit and save a model")
    _add_fit_arguments(fit)
    fit.set_defaults(run=_cmd_fit)

    predict = commands.add_parser(
        "predict", parents=[common], help="predict with a saved model"
    )
    predict.add_argument("model", help="model saved by `fit` or `search`")
    predict.add_argument("data", help="rows to predict: .csv, .tsv or .parquet")
    predict.add_argument("--out", required=True, help="output .csv or .parquet")
    predict.add_argument(
        "--offset", help="offset column (needed if the model was fit with one)"
    )
    predict.add_argument(
        "--local-coef",
        action="store_true",
        help="also write each row's coefficients (columns coef_<term>)",
    )
    predict.set_defaults(run=_cmd_predict)

    search = commands.add_parser(
        "search", parents=[common], help="tune hyperparameters with Optuna"
    )
    _add_fit_arguments(search)
    search.add_argument("--trials", type=int, required=True, help="Optuna trials")
    search.add_argument(
        "--storage", help="Optuna storage URL, e.g. sqlite:///search.db (resumable)"
    )
    search.add_argument(
        "--study-name",
        help="Optuna study name; with --storage the default is derived from the "
        "data, family and search space, so that a rerun resumes the study",
    )
    search.set_defaults(run=_cmd_search)

    datasets = commands.add_parser(
        "datasets", parents=[common], help="list the bundled benchmark datasets"
    )
    datasets.add_argument(
        "--suite", choices=["quickstart", "core", "scale", "synthetic"]
    )
    datasets.set_defaults(run=_cmd_datasets)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Parameters
    ----------
    argv : sequence of str or None, default=None
        Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        0 on success, 1 on an error (reported in one line on stderr). Usage
        errors exit through argparse with status 2.
    """
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            if not args.debug:  # one line each, without a Python source line
                warnings.showwarning = _show_warning
            return args.run(args)
    except Exception as error:
        if args.debug:
            raise
        message = str(error).strip().splitlines()
        text = message[0] if message else type(error).__name__
        if isinstance(error, KeyError):
            text = f"missing key {text}"
        if not isinstance(error, USER_ERRORS):
            text = f"{type(error).__name__}: {text} (rerun with --debug for details)"
        print(f"{PROG}: error: {text}", file=sys.stderr)
        return 1
