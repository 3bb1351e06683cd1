"""Benchmark suite: GraphGLM against GLMs, gradient boosting and other peers.

For each dataset of ``autoglm_graph.datasets`` and each model of
``benchmarks._lib.models.MODELS``: fit on the training part, predict the test part (with
its offset where the data has an exposure), and score

* the family's mean test deviance, computed with GraphGLM's own family object
  from the predicted mean (``eta = family.link(mu)``); for classifiers this is
  twice the log-loss, with probabilities clipped to ``[1e-15, 1 - 1e-15]``;
* D² = 1 - deviance / null deviance, the null model predicting the training
  mean (the training rate ``sum(y) / sum(exposure)`` times the exposure when the
  data has an offset; the training class proportions for classifiers);
* log-loss and accuracy for classifiers; fit and predict seconds.

Models are ranked per dataset by mean test deviance (1 = best); the report
gives mean ranks and the datasets on which ``graphglm`` beats ``glum`` and
``lightgbm``. Results go to ``<out>.json``, ``<out>.md`` and ``<out>.png`` (test
deviance relative to ``graphglm_global``, the exact global GLM).

    python benchmarks/run.py                     # core + synthetic suites
    python benchmarks/run.py --quick             # smoke test, < 3 minutes
    python benchmarks/run.py --datasets diabetes synthetic --models graphglm glum
    python benchmarks/run.py --models lightgbm_tuned ebm --ebm-budget 300
    python benchmarks/run.py --merge A.json B.json --out C   # one table of runs

The tuned peers (``lightgbm_tuned``: Optuna's TPE over LightGBM's parameters,
scored by the 3-fold CV deviance; ``ebm``: interpret's Explainable Boosting
Machine) run only when named with ``--models``: they cost minutes per dataset.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import sys
import time
import traceback
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from autoglm_graph import get_family
from autoglm_graph.datasets import load_dataset
from benchmarks._lib import models as bench_models
from benchmarks._lib import report as bench_report
from benchmarks._lib.common import cpu_name, json_safe
from benchmarks._lib.suite import family_parameters, resolve_datasets, score

RESULTS = Path(__file__).resolve().parent / "results"
all_models = {**bench_models.MODELS, **bench_models.EXTRA_MODELS}
DEFAULT_SUITES = ("core", "synthetic")
QUICK_DATASETS = ("diabetes", "synthetic_poisson", "synthetic_binomial", "affairs")
QUICK_MAX_ROWS = 1500
PACKAGES = (
    "autoglm-graph",
    "torch",
    "torch-geometric",
    "scikit-learn",
    "glum",
    "lightgbm",
    "optuna",
    "interpret-core",
    "faiss-cpu",
    "contextualized-ml",
    "numpy",
    "pandas",
)


# --------------------------------------------------------------------- runs


def run_model(model: str, task: bench_models.Task, ds, family) -> dict:
    """Fit one model on one dataset and score it; never raises.

    Returns
    -------
    dict
        ``status`` ("ok", "n/a" or "error"), ``note``, the metrics of
        :func:`score`, ``fit_s`` and ``predict_s``.
    """
    n_classes = None if ds.classes is None else len(ds.classes)
    try:
        adapter = all_models[model](task)
        start = time.perf_counter()
        adapter.fit(ds.X_train, ds.y_train, ds.offset_train, groups=ds.groups_train)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        mean = adapter.predict(ds.X_test, ds.offset_test)
        predict_s = time.perf_counter() - start
    except bench_models.NotApplicable as exc:
        return {"status": "n/a", "note": str(exc)}
    except Exception as exc:  # a failing model must not end a long run
        traceback.print_exc()
        return {"status": "error", "note": f"{type(exc).__name__}: {exc}"}
    metrics = score(family, ds, np.asarray(mean), n_classes)
    return {
        "status": "ok",
        "note": adapter.note() if hasattr(adapter, "note") else "",
        **metrics,
        "fit_s": fit_s,
        "predict_s": predict_s,
    }


def _dataset_task(name: str, seed: int, args) -> tuple:
    """``(dataset, family, task)``: the seeded split of ``name`` and what its
    models are fitted and scored with."""
    ds = load_dataset(name, random_state=seed, max_rows=args.max_rows)
    params = family_parameters(name)
    family = get_family(ds.family, **params)
    task = bench_models.Task(
        ds.family,
        seed=seed,
        quick=args.quick,
        threads=args.threads,
        tuning_trials=args.tuning_trials,
        tuning_folds=args.tuning_folds,
        ebm_budget_s=args.ebm_budget,
        **params,
    )
    return ds, family, task


def warm_up(name: str, models: list[str], args) -> None:
    """Fit every model once on ``name``, untimed and unrecorded.

    A process pays its libraries' one-time costs (first calls into faiss and
    torch, torch_geometric's layer set-up, LightGBM's) in its first fits: without
    this pass they land in the timings of whichever dataset comes first
    (about 0.8 s of a 1.6 s GraphGLM fit on ``rwm5yr``), not in a fit's own
    cost. They are per process, and the README states them separately.
    """
    ds, family, task = _dataset_task(name, 0, args)
    start = time.perf_counter()
    for model in models:
        run_model(model, task, ds, family)
    print(f"warm-up on {name}: {time.perf_counter() - start:.1f} s", flush=True)


def run_dataset(name: str, models: list[str], seed: int, args) -> list[dict]:
    """Every model on one seeded split of one dataset, one record each.

    With ``--fit-repeats N`` every model is fitted N times on the split, in
    rounds over the models (so that a slow spell of a shared machine falls on
    all of them), and its record keeps the median fit and predict seconds.
    The fits of one model are the same seeded fit; a deviance that differs
    between them is an error.
    """
    ds, family, task = _dataset_task(name, seed, args)
    runs: dict[str, list[dict]] = {model: [] for model in models}
    for _ in range(args.fit_repeats):
        for model in models:
            runs[model].append(run_model(model, task, ds, family))
    records = []
    for model in models:
        record = _median_seconds(runs[model])
        record = {
            "dataset": name,
            "family": ds.family,
            "model": model,
            "seed": seed,
            "n_train": len(ds.y_train),
            "n_test": len(ds.y_test),
            **record,
        }
        records.append(record)
        print(_progress(record), flush=True)
    return records


def _median_seconds(runs: list[dict]) -> dict:
    """The first run's record with the median seconds of all runs."""
    record = dict(runs[0])
    if record["status"] != "ok" or len(runs) == 1:
        return record
    deviances = {r.get("deviance") for r in runs}
    if len(deviances) > 1 and not all(np.isnan(d) for d in deviances):
        raise RuntimeError(
            f"Repeated fits gave different deviances {sorted(deviances)}: "
            "a seeded fit must repeat exactly."
        )
    for key in ("fit_s", "predict_s"):
        record[key] = float(np.median([r[key] for r in runs]))
    return record


def _progress(r: dict) -> str:
    head = f"[seed {r['seed']}] {r['dataset']:<28} {r['model']:<16}"
    if r["status"] != "ok":
        return f"{head} {r['status']}: {r['note']}"
    return (
        f"{head} deviance={r['deviance']:.5g}  D2={r['d2']:.3f}  fit={r['fit_s']:.1f}s"
    )


def select_models(requested: list[str]) -> tuple[list[str], list[str]]:
    """Requested models whose package is installed, and a note per skipped one."""
    models, notes = [], []
    for model in requested:
        missing = bench_models.missing_package(model)
        if missing is None:
            models.append(model)
        else:
            notes.append(f"model {model} skipped: package {missing} is not installed")
    return models, notes


@contextlib.contextmanager
def limit_threads(threads: int | None):
    """Limit torch's and the BLAS/OpenMP thread pools to ``threads`` (None: no-op).

    On a machine shared with other work, several threads per process spin at
    every parallel region while their siblings wait for a core: one thread per
    model is then faster and its timings are steadier.
    """
    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(previous)


# ------------------------------------------------------------------- report


def machine_info() -> dict:
    """What the numbers were measured on."""
    cpu = cpu_name()
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
        "versions": versions,
    }


def write_outputs(out: Path, report: dict, markdown: str, plot: bool) -> list[Path]:
    """Write ``<out>.json``, ``<out>.md`` and (optionally) ``<out>.png``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".json"), out.with_suffix(".md")]
    paths[0].write_text(json.dumps(json_safe(report), indent=1) + "\n")
    paths[1].write_text(markdown)
    if plot:
        png = out.with_suffix(".png")
        if bench_report.plot_relative(
            report["summary"], report["models"], png, report["title"]
        ):
            paths.append(png)
    return paths


# ---------------------------------------------------------------------- CLI


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; see ``--help``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=None,
        help="dataset or suite names (default: core synthetic; with --quick: "
        + " ".join(QUICK_DATASETS)
        + ")",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        default=list(bench_models.MODELS),
        choices=[*bench_models.MODELS, *bench_models.EXTRA_MODELS],
        metavar="MODEL",
        help="models to compare (default: all of "
        + ", ".join(bench_models.MODELS)
        + ")",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke test: max_rows={QUICK_MAX_ROWS}, GraphGLM max_epochs=30, "
        "LightGBM n_estimators=100",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="seeds 0..N-1 (split and models); mean ± sd",
    )
    parser.add_argument(
        "--fit-repeats",
        type=int,
        default=1,
        help="fits of each model on each split, in rounds over the models; "
        "the median seconds are recorded (a shared machine's timings vary "
        "by 20 %% and more from one fit to the next)",
    )
    parser.add_argument(
        "--max-rows",
        type=int,
        default=None,
        help="seeded subsample of each dataset before splitting",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output prefix (default: benchmarks/results/suite, or "
        "benchmarks/results/quick with --quick)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of torch, BLAS/OpenMP and LightGBM (default: the libraries' "
        "own; 1 with --quick)",
    )
    parser.add_argument(
        "--tuning-trials",
        type=int,
        default=30,
        help="Optuna (TPE) trials of lightgbm_tuned",
    )
    parser.add_argument(
        "--tuning-folds",
        type=int,
        default=3,
        help="cross-validation folds of the training rows scoring each trial "
        "of lightgbm_tuned",
    )
    parser.add_argument(
        "--ebm-budget",
        type=float,
        default=600.0,
        help="seconds after which an ebm fit stops and is reported n/a (default 600)",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        metavar="JSON",
        help="fit nothing: report the records of earlier runs' <out>.json "
        "files (other models on the same splits) as one table",
    )
    parser.add_argument(
        "--merge-models",
        nargs="+",
        default=None,
        metavar="FILE=MODEL,...",
        help="with --merge: take only these models from the part of that file "
        "name (e.g. fits.json=lightgbm_tuned), the others' records coming from "
        "a newer part",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="time the first dataset's fits too with the process's one-time "
        "costs (imports, library set-up) in them",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1; got {args.repeats}.")
    if args.fit_repeats < 1:
        parser.error(f"--fit-repeats must be >= 1; got {args.fit_repeats}.")
    if args.tuning_trials < 1:
        parser.error(f"--tuning-trials must be >= 1; got {args.tuning_trials}.")
    if args.tuning_folds < 2:
        parser.error(f"--tuning-folds must be >= 2; got {args.tuning_folds}.")
    if args.ebm_budget <= 0:
        parser.error(f"--ebm-budget must be > 0; got {args.ebm_budget}.")
    if args.merge_models is not None:
        if not args.merge:
            parser.error("--merge-models needs --merge.")
        keep = {}
        for item in args.merge_models:
            name, sep, models = item.partition("=")
            if not sep or not models:
                parser.error(f"--merge-models takes FILE=MODEL,...; got {item!r}.")
            keep[name] = models.split(",")
        args.merge_models = keep
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be >= 1; got {args.threads}.")
    if args.quick and args.threads is None:
        args.threads = 1
    if args.datasets is None:
        args.datasets = list(QUICK_DATASETS if args.quick else DEFAULT_SUITES)
    if args.quick and args.max_rows is None:
        args.max_rows = QUICK_MAX_ROWS
    if args.out is None:
        args.out = RESULTS / ("quick" if args.quick else "suite")
    return args


def fit_all(args) -> tuple[list[str], list[str], list[str], list[dict], dict]:
    """Fit the run's models on its datasets: datasets, models, notes, records
    and the machine's description."""
    datasets, notes = resolve_datasets(args.datasets)
    models, model_notes = select_models(args.models)
    notes += model_notes
    for note in notes:
        print(note, flush=True)
    records = []
    with limit_threads(args.threads):
        machine = machine_info()
        if datasets and not args.no_warm_up:
            warm_up(datasets[0], models, args)
        for seed in range(args.repeats):
            for name in datasets:
                records += run_dataset(name, models, seed, args)
    return datasets, models, notes, records, machine


def merge_parts(paths: list[Path], keep: dict[str, list[str]] | None = None) -> tuple:
    """The records of earlier runs (``<out>.json`` files) as one run's.

    Runs of different models on the same splits (same seeds) make one table:
    for instance a slow peer run per dataset, beside the run of the others.
    A (dataset, model, seed) in two parts is an error. The first part gives the
    machine and the options; every part's command is kept in the notes.
    ``keep`` maps a part's file name to the models taken from it (all of its
    models for a part not named): a newer run of some models then replaces
    their records in an older part without refitting the others.

    Returns
    -------
    tuple
        ``(datasets, models, notes, records, machine, options, wall_s)``, with
        ``wall_s`` the sum of the parts' wall times.
    """
    datasets, models, notes, records, seen = [], [], [], [], set()
    parts = [json.loads(Path(p).read_text()) for p in paths]
    for path, part in zip(paths, parts, strict=True):
        taken = (keep or {}).get(Path(path).name, part["models"])
        part["models"] = [m for m in part["models"] if m in taken]
        datasets += [d for d in part["datasets"] if d not in datasets]
        models += [m for m in part["models"] if m not in models]
        notes += part["notes"]
        for r in part["records"]:
            if r["model"] not in taken:
                continue
            key = (r["dataset"], r["model"], r["seed"])
            if key in seen:
                raise SystemExit(f"{key} is in two of the merged parts ({path}).")
            seen.add(key)
            records.append(r)
        notes.append(
            f"records of {', '.join(part['models'])} on "
            f"{', '.join(part['datasets'])} from `{part['command']}` "
            f"({part['date']}, {part['wall_s']:.0f} s; {Path(path).name})"
        )
    wall_s = sum(p["wall_s"] for p in parts)
    return (
        datasets,
        models,
        notes,
        records,
        parts[0]["machine"],
        parts[0]["options"],
        wall_s,
    )


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print the table, write the outputs.

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    dict
        The report written to ``<out>.json`` (before NaN became null).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    started = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if args.merge:
        datasets, models, notes, records, machine, options, wall_s = merge_parts(
            args.merge, args.merge_models
        )
        descriptions = {}
        for part in args.merge:
            descriptions.update(json.loads(part.read_text())["model_descriptions"])
    else:
        datasets, models, notes, records, machine = fit_all(args)
        options = {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
        }
        descriptions = {
            m: (all_models[m].__doc__ or "").strip().split("\n")[0] for m in models
        }
        wall_s = None
    summary = bench_report.summarise(records, datasets, models)
    # The new peers get summary lines when they ran; glum and LightGBM always.
    peers = ("glum", "lightgbm", *(m for m in bench_report.PEERS if m in models))
    report = {
        "title": "GraphGLM benchmark" + (" (quick)" if args.quick else ""),
        "command": shlex.join(["python", "benchmarks/run.py", *argv]),
        "date": date,
        "machine": machine,
        "options": options,
        "datasets": datasets,
        "models": models,
        "model_descriptions": descriptions,
        "notes": notes,
        "records": records,
        "summary": summary,
        "mean_ranks": bench_report.mean_ranks(summary, models),
        "wins": bench_report.win_counts(summary, "graphglm", peers),
        "wall_s": time.perf_counter() - started if wall_s is None else wall_s,
    }
    markdown = bench_report.to_markdown(report)
    print()
    print(bench_report.main_table(report))
    for path in write_outputs(args.out, report, markdown, plot=not args.no_plot):
        print(f"wrote {path}")
    print(f"total {report['wall_s']:.0f} s")
    return report


if __name__ == "__main__":
    main()
