"""Default GraphGLM vs an Optuna search (``GraphGLMSearchCV``) on the suite.

For each dataset: fit the estimator at its defaults on the training part, then a
search of ``--trials`` trials over the default search space (``cv=None``: every
trial is scored on the same validation rows of the training part, the best is
refit), and compare the mean test deviance of the family (with the dataset's
own Tweedie power; twice the log-loss for classifiers, as ``run.py``). The
markdown table goes to ``benchmarks/results/search.md``.

    python benchmarks/search.py --threads 1                      # 30 trials, core
    python benchmarks/search.py --datasets diabetes --trials 3   # smoke test
    python benchmarks/search.py --storage journal:benchmarks/results/search.log

With ``--storage`` each dataset's study (named after it) is kept there: an
interrupted run resumes, and several processes can share the trials.

The part ``cache`` times a search's shared neighbour cache instead
(``benchmarks/_lib/search_cache.py``; its own ``--help``):

    python benchmarks/search.py cache --threads 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from autoglm_graph import (
    GraphGLMClassifier,
    GraphGLMRegressor,
    GraphGLMSearchCV,
    get_family,
)
from autoglm_graph.datasets import load_dataset
from benchmarks._lib import search_cache
from benchmarks._lib.common import command_line, cpu_name, dispatch, to_markdown
from benchmarks._lib.suite import family_parameters, mean_deviance, resolve_datasets

RESULTS = Path(__file__).resolve().parent / "results"


def make_estimator(ds, args):
    params = {"random_state": 0}
    if args.max_epochs is not None:
        params["max_epochs"] = args.max_epochs
    if ds.classes is not None:
        return GraphGLMClassifier(**params)
    return GraphGLMRegressor(family=ds.family, **family_parameters(ds.name), **params)


def test_deviance(model, ds) -> float:
    family = get_family(ds.family, **family_parameters(ds.name))
    if ds.classes is not None:
        mean = model.predict_proba(ds.X_test, offset=ds.offset_test)
    else:
        mean = model.predict(ds.X_test, offset=ds.offset_test)
    return mean_deviance(family, ds.y_test, mean)


def fit_timed(model, ds):
    start = time.perf_counter()
    model.fit(ds.X_train, ds.y_train, offset=ds.offset_train, groups=ds.groups_train)
    return time.perf_counter() - start


def run_dataset(name: str, args) -> dict:
    ds = load_dataset(name, max_rows=args.max_rows)
    default = make_estimator(ds, args)
    default_s = fit_timed(default, ds)
    search = GraphGLMSearchCV(
        make_estimator(ds, args),
        n_trials=args.trials,
        cv=None,  # the validation split, as in the results of record
        storage=args.storage,
        study_name=None if args.storage is None else f"search-{name}",
        random_state=0,
        verbose=args.verbose,
    )
    search_s = fit_timed(search, ds)
    dev_default = test_deviance(default, ds)
    dev_search = test_deviance(search, ds)
    states = search.trials_dataframe_["state"].value_counts()
    best = search.best_estimator_
    return {
        "dataset": name,
        "family": ds.family,
        "train rows": len(ds.y_train),
        "default": f"{dev_default:.4g}",
        "searched": f"{dev_search:.4g}",
        "gain %": f"{100 * (dev_default - dev_search) / dev_default:+.2f}",
        "trials (pruned)": f"{states.sum()} ({states.get('PRUNED', 0)})",
        "network kept (default / searched)": (
            f"{not default.is_global_only_} / {not best.is_global_only_}"
        ),
        "default fit s": f"{default_s:.1f}",
        "search s": f"{search_s:.1f}",
        "best": ", ".join(f"{k}={_short(v)}" for k, v in search.best_params_.items()),
    }


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def main(argv: list[str] | None = None) -> None:
    """The part ``cache`` when ``argv[0]`` names it, else the search comparison."""
    return dispatch(argv, {"cache": search_cache.main}, default=compare_search)


def compare_search(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["core"])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--max-rows", type=int, default=None)
    parser.add_argument("--max-epochs", type=int, default=None)
    parser.add_argument("--storage", default=None)
    parser.add_argument("--verbose", type=int, default=1)
    parser.add_argument("--out", default=str(RESULTS / "search.md"))
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    names, notes = resolve_datasets(args.datasets)
    rows = []
    for name in names:
        rows.append(run_dataset(name, args))
        print(rows[-1], flush=True)
    gains = [float(r["gain %"]) for r in rows]
    command = command_line("search.py", argv)
    text = "\n".join(
        [
            "# GraphGLM at its defaults vs GraphGLMSearchCV",
            "",
            f"`{command.strip()}`",
            "",
            f"{args.trials} trials per dataset over `default_search_space`, "
            "cv=None (validation rows of the training part), MedianPruner, "
            f"TPE; {torch.get_num_threads()} torch thread(s) on {cpu_name()}. "
            "Mean test deviance of the family (lower is better; classifiers: "
            "twice the log-loss). Gain: relative drop of test deviance.",
            "",
            to_markdown(rows),
            "",
            f"Median gain {np.median(gains):+.2f} % over {len(rows)} dataset(s).",
            *notes,
            "",
        ]
    )
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
