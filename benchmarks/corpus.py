"""Corpus: models on the real datasets of ``shared/corpus/``, the project's yardstick.

Every model of the run is fitted on 3 shuffled 75/25 splits (seeds 0, 1, 2)
of each dataset of ``real.csv`` (read from ``../shared/corpus/`` beside the
repository, or ``--corpus DIR``), prepared, split and scored as that folder's
README says (``benchmarks/_lib/corpus_data.py``): the family's mean test
deviance, log-loss for classifiers, Poisson deviance of the mean for negative
binomial, tweedie at power 1.5. The report (markdown, and a JSON of every fit)
gives per dataset each model's split-mean test deviance and fit seconds, and
per model the geometric mean over datasets of its deviance ratio to the GLM
and to LightGBM's defaults with 95 % bootstrap intervals over datasets, win
counts, the median fit seconds and the fit-time ratio to LightGBM
(``benchmarks/_lib/corpus_report.py``). A dataset's ratio is the geometric
mean over its splits of the per-split ratio.

Models: ``--models`` names the registry's (``glm``: the global GLM, i.e.
``graphglm_global``; ``graphglm``: this tree's default GraphGLM; ``glum``,
``lightgbm``, ``lightgbm_tuned``, ``ebm``, ...); ``--graphglm NAME:PARAM=VALUE,...``
adds this tree's GraphGLM at those estimator parameters (``policy.FIELD=VALUE``
sets a field of its ``FitPolicy``; values as ``ablation.py`` reads them);
``--revisions REV ...`` adds the default GraphGLM of git revisions
(``worktree``: this tree). Every GraphGLM variant is judged against the
``--baseline`` (default: the first variant, in the order ``--models graphglm``,
``--revisions``, ``--graphglm``) by the project's decision rule, printed as a
verdict line: adopt when the deviance ratio candidate / baseline is below 1
with its 95 % interval below 1, and the median fit-time ratio is at most
``1.2 ** gain`` (gain in per cent).

    python benchmarks/corpus.py --quick --models glm lightgbm graphglm --jobs 2
    python benchmarks/corpus.py --models glm lightgbm --revisions 7aa57a1 worktree
    python benchmarks/corpus.py --models glm lightgbm graphglm \\
        --graphglm lr:learning_rate=0.006 screen3:policy.screening_epochs=3
    python benchmarks/corpus.py check      # every dataset loads and splits

Fits run in ``--jobs`` processes of one thread each (torch, BLAS/OpenMP,
LightGBM), one split of one dataset at a time, its models one after the
other. The fits that do not depend on this tree's code (the peers, and the
revisions other than ``worktree``, by commit) are cached in ``--cache``
(default ``~/.cache/autoglm_graph/corpus``) by dataset, split, the data's hash
and the package versions, so that a second run refits only what changed; a
cached fit keeps the seconds it was measured with. ``--quick``: split 0 of the
25 smallest datasets (rows after the caps), for iteration.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks._lib import corpus_data, corpus_fits, corpus_report
from benchmarks._lib.common import (
    command_line,
    cpu_name,
    dispatch,
    json_safe,
    to_markdown,
    write_record,
)
from benchmarks._lib.corpus_fits import ModelSpec
from benchmarks._lib.models import EXTRA_MODELS, MODELS, missing_package
from benchmarks._lib.revisions import ROOT, import_revision
from benchmarks._lib.task import string_levels
from benchmarks.ablation import parse_value, policy_params

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "autoglm_graph"
    / "corpus"
)
DEFAULT_MODELS = ("glm", "lightgbm", "graphglm")
QUICK_DATASETS = 25
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
VERSIONS = ("torch", "lightgbm", "glum", "interpret-core", "scikit-learn", "pandas")


# ------------------------------------------------------------------- models


def parse_graphglm(text: str) -> ModelSpec:
    """``NAME:PARAM=VALUE,PARAM=VALUE`` -> this tree's GraphGLM at those
    parameters; ``policy.FIELD=VALUE`` items make its ``fit_policy``. A value
    may itself hold commas (a tuple field: ``policy.cached_state_parts=4,8``):
    an item starts only where ``NAME=`` follows a comma."""
    label, _, rest = text.partition(":")
    if not re.fullmatch(r"[\w.@+-]+", label):
        raise argparse.ArgumentTypeError(
            f"--graphglm takes NAME:PARAM=VALUE,...; got {text!r}."
        )
    params, policy = {}, []
    for item in re.split(r",(?=[\w.]+=)", rest) if rest else []:
        name, sep, value = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(
                f"--graphglm {label}: expected PARAM=VALUE; got {item!r}."
            )
        if name.startswith("policy."):
            policy.append(f"{name.removeprefix('policy.')}={value}")
        else:
            params[name] = parse_value(value)
    if policy:
        try:
            params |= policy_params(policy)
        except TypeError as exc:  # a field FitPolicy does not have
            raise argparse.ArgumentTypeError(f"--graphglm {label}: {exc}") from exc
    return ModelSpec(label=label, params=tuple(sorted(params.items())))


def revision_specs(revisions: list[str], folder: Path) -> list[ModelSpec]:
    """The default GraphGLM of each revision (``worktree``: this tree's)."""
    specs = []
    for i, revision in enumerate(revisions):
        if revision == "worktree":
            specs.append(ModelSpec(label="worktree"))
            continue
        commit = subprocess.run(
            ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        module = f"autoglm_graph_rev{i}"
        import_revision(commit, folder / module, module)
        specs.append(
            ModelSpec(label=revision, revision=revision, commit=commit, module=module)
        )
    return specs


def model_specs(args, folder: Path) -> tuple[list[ModelSpec], list[str]]:
    """The run's models, in report order, and a note per skipped one."""
    specs, notes = [], []
    for name in args.models:
        missing = missing_package(corpus_fits.ALIASES.get(name, name))
        if missing is None:
            specs.append(corpus_fits.registry_spec(name))
        else:
            notes.append(f"model {name} skipped: package {missing} is not installed")
    specs += revision_specs(args.revisions, folder)
    specs += args.graphglm
    labels = [s.label for s in specs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise SystemExit(f"Model names must differ; {repeated} repeat.")
    return specs, notes


# ------------------------------------------------------------------ datasets


def select_entries(entries: list[corpus_data.Entry], args) -> list:
    """``--datasets`` (in the list's order), or with ``--quick`` the
    :data:`QUICK_DATASETS` smallest by rows after the caps, or every entry."""
    if args.datasets:
        names = {e.name for e in entries}
        unknown = [d for d in args.datasets if d not in names]
        if unknown:
            raise SystemExit(
                f"Unknown datasets {unknown}; the list has {sorted(names)}."
            )
        return [e for e in entries if e.name in args.datasets]
    if args.quick:
        sizes = {e.name: sizes_after_caps(e) for e in entries}
        smallest = sorted(entries, key=lambda e: sizes[e.name])[:QUICK_DATASETS]
        return [e for e in entries if e in smallest]
    return entries


def sizes_after_caps(entry: corpus_data.Entry) -> int:
    """Training plus test rows of ``entry`` after the caps."""
    return corpus_data.capped_rows(corpus_data.task_rows(entry))


# --------------------------------------------------------------------- runs


def run_units(entries, splits, specs, cache, jobs: int) -> list[dict]:
    """Every (dataset, split) unit, the largest first, in ``jobs`` processes."""
    sizes = {e.name: sizes_after_caps(e) for e in entries}
    units = [
        (entry, seed)
        for entry in sorted(entries, key=lambda e: -sizes[e.name])
        for seed in splits
    ]
    records = []
    if jobs == 1:
        corpus_fits.init_worker()
        for entry, seed in units:
            records += report_progress(corpus_fits.fit_unit(entry, seed, specs, cache))
        return records
    with ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=get_context("spawn"),  # no fork of torch's thread pools
        initializer=corpus_fits.init_worker,
    ) as pool:
        futures = [
            pool.submit(corpus_fits.fit_unit, entry, seed, specs, cache)
            for entry, seed in units
        ]
        for future in as_completed(futures):
            records += report_progress(future.result())
    return records


def report_progress(records: list[dict]) -> list[dict]:
    """Print one line per fit of a unit; return the records."""
    for r in records:
        head = f"{r['dataset']:<22} split {r['split']} {r['model']:<16}"
        if r["status"] != "ok":
            print(f"{head} {r['status']}: {r['note']}", flush=True)
            continue
        kept = "" if "kept" not in r else f" kept={r['kept']}"
        cached = " (cached)" if r.get("cached") else ""
        print(
            f"{head} score={r['score']:.5g} fit={r['fit_s']:.1f}s{kept}{cached}",
            flush=True,
        )
    return records


def order_records(records, entries, splits, specs) -> list[dict]:
    """The records in the list's order of datasets, then split, then model."""
    rank = {e.name: i for i, e in enumerate(entries)}
    model = {s.label: i for i, s in enumerate(specs)}
    return sorted(
        records, key=lambda r: (rank[r["dataset"]], r["split"], model[r["model"]])
    )


def dataset_info(records: list[dict], entries) -> list[dict]:
    """Per dataset: family and the rows of its first split's parts."""
    first = {}
    for r in records:
        first.setdefault(r["dataset"], r)
    return [
        {
            "dataset": e.name,
            "family": e.family,
            "n_train": first[e.name].get("n_train", "-"),
            "n_test": first[e.name].get("n_test", "-"),
        }
        for e in entries
        if e.name in first
    ]


def references(specs: list[ModelSpec]) -> tuple[str, str]:
    """The labels of the GLM and of LightGBM's defaults (their registry names
    where the run has neither)."""

    def label(registry: str) -> str:
        return next((s.label for s in specs if s.registry == registry), registry)

    return label("graphglm_global"), label("lightgbm")


def verdicts(records: list[dict], specs: list[ModelSpec], baseline) -> list[dict]:
    """The decision rule's verdict of every GraphGLM variant but the baseline."""
    variants = [s.label for s in specs if s.is_graphglm]
    if baseline is None:
        baseline = variants[0] if variants else None
    if baseline is None:
        return []
    if baseline not in [s.label for s in specs]:
        raise SystemExit(f"--baseline {baseline!r} is none of the run's models.")
    values = corpus_report.split_values(records)
    seconds = corpus_report.split_values(records, "fit_s")
    return [
        corpus_report.verdict(values, seconds, candidate, baseline)
        for candidate in variants
        if candidate != baseline
    ]


# ---------------------------------------------------------------------- CLI


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command-line options; see ``--help``."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="The part `check` (python benchmarks/corpus.py check --help) loads "
        "and splits every dataset of the list.",
    )
    parser.add_argument(
        "--models",
        nargs="*",
        default=list(DEFAULT_MODELS),
        choices=["glm", *MODELS, *EXTRA_MODELS],
        metavar="MODEL",
        help="registry models (default: " + " ".join(DEFAULT_MODELS) + "; glm: "
        "the global GLM; graphglm: this tree's default GraphGLM)",
    )
    parser.add_argument(
        "--graphglm",
        nargs="+",
        default=[],
        type=parse_graphglm,
        metavar="NAME:PARAM=VALUE,...",
        help="this tree's GraphGLM at those parameters (policy.FIELD=VALUE: a "
        "FitPolicy field)",
    )
    parser.add_argument(
        "--revisions",
        nargs="+",
        default=[],
        metavar="REV",
        help="the default GraphGLM of git revisions (worktree: this tree)",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help="the GraphGLM variant the others are judged against (default: the first)",
    )
    parser.add_argument("--datasets", nargs="+", default=None, metavar="NAME")
    parser.add_argument(
        "--splits", type=int, nargs="+", default=None, help="default 0 1 2"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"split 0 of the {QUICK_DATASETS} smallest datasets (rows after the caps)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--corpus", type=Path, default=corpus_data.DEFAULT_CORPUS, metavar="DIR"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=DEFAULT_CACHE,
        metavar="DIR",
        help=f"cached fits of the peers and revisions (default {DEFAULT_CACHE})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write <out>.md and <out>.json (default benchmarks/results/corpus, "
        "or corpus_quick with --quick)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}.")
    if args.splits is None:
        args.splits = [0] if args.quick else list(corpus_data.SPLITS)
    if args.out is None:
        args.out = RESULTS / ("corpus_quick" if args.quick else "corpus")
    return args


def main(argv: list[str] | None = None):
    """The part ``check`` when ``argv[0]`` names it, else a run."""
    return dispatch(argv, {"check": check}, default=run)


def run(argv: list[str]) -> dict:
    """Fit, report, write ``<out>.md`` and ``<out>.json``; return the report."""
    args = parse_args(argv)
    started = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    entries = select_entries(corpus_data.read_corpus(args.corpus), args)
    for variable in THREAD_VARIABLES:  # inherited by the worker processes
        os.environ[variable] = "1"
    load = os.getloadavg()
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        specs, notes = model_specs(args, folder)
        for note in notes:
            print(note, flush=True)
        records = run_units(entries, args.splits, specs, args.cache, args.jobs)
    records = order_records(records, entries, args.splits, specs)
    wall_s = time.perf_counter() - started
    labels = [s.label for s in specs]
    refs = references(specs)
    judged = verdicts(records, specs, args.baseline)
    datasets = dataset_info(records, entries)
    cached = sum(bool(r.get("cached")) for r in records)
    versions = corpus_fits.package_versions(VERSIONS)
    machine = (
        f"Machine: {cpu_name()} ({os.cpu_count()} cores, load average "
        f"{load[0]:.1f} at the start); {args.jobs} worker process(es) of one "
        f"thread each; {', '.join(f'{k} {v}' for k, v in versions.items() if v)}. "
        f"{len(datasets)} datasets x splits {' '.join(map(str, args.splits))}; "
        f"{cached} of {len(records)} fits from the cache `{args.cache}`; wall "
        f"time {wall_s:.0f} s."
    )
    body = corpus_report.markdown_body(records, datasets, labels, refs, judged)
    if notes:
        body += ["", *(f"- {n}" for n in notes)]
    command = command_line("corpus.py", argv)
    title = "Corpus" + (" (quick)" if args.quick else "")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_record(title, command, machine, body, args.out)
    report = {
        "title": title,
        "command": command,
        "date": date,
        "machine": {"cpu": cpu_name(), "cpu_count": os.cpu_count(), "load": load},
        "versions": versions,
        "corpus": str(args.corpus),
        "jobs": args.jobs,
        "splits": args.splits,
        "datasets": datasets,
        "models": [s.describe() for s in specs],
        "references": refs,
        "summary": corpus_report.summary_rows(records, labels, *refs),
        "verdicts": judged,
        "records": records,
        "notes": notes,
        "wall_s": wall_s,
    }
    args.out.with_suffix(".json").write_text(
        json.dumps(json_safe(report), indent=1) + "\n"
    )
    print(f"wrote {args.out.with_suffix('.md')} and .json; total {wall_s:.0f} s")
    return report


# -------------------------------------------------------------------- check


def check(argv: list[str]) -> list[dict]:
    """Load and split every dataset of the list: rows, columns, family, time."""
    parser = argparse.ArgumentParser(
        prog="corpus.py check",
        description="Load and split every dataset of the corpus list, as a run "
        "does: rows, columns, family and seconds to load; a dataset that cannot "
        "be prepared says why.",
    )
    parser.add_argument(
        "--corpus", type=Path, default=corpus_data.DEFAULT_CORPUS, metavar="DIR"
    )
    parser.add_argument("--datasets", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    entries = corpus_data.read_corpus(args.corpus)
    if args.datasets:
        entries = [e for e in entries if e.name in args.datasets]
    rows = [check_entry(entry) for entry in entries]
    for row in rows:
        print(row, flush=True)
    write_record(
        "Corpus: every dataset loaded and split",
        command_line("corpus.py check", argv),
        f"Machine: {cpu_name()}; the list `{args.corpus / 'real.csv'}`.",
        [to_markdown(rows)],
        args.out,
    )
    return rows


def check_entry(entry: corpus_data.Entry) -> dict:
    """One row of ``check``: the prepared task and its splits."""
    row = {"dataset": entry.name, "source": f"{entry.package}/{entry.item}"}
    row["family"] = entry.family
    start = time.perf_counter()
    try:
        task = None if entry.is_suite else corpus_data.prepare(entry)
        splits = [corpus_data.load_split(entry, s, task) for s in corpus_data.SPLITS]
    except Exception as exc:
        return {**row, "problem": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - start
    first = splits[0]
    X = first.X_train
    problems = []
    if first.classes is not None:
        for split in splits:
            for side in ("train", "test"):
                present = len(np.unique(getattr(split, f"y_{side}")))
                if present < len(first.classes):
                    problems.append(f"a class absent from split {split.seed} {side}")
    return {
        **row,
        "rows": corpus_data.task_rows(entry) if task is None else len(task.y),
        "rows dropped": "-" if task is None else task.dropped_rows,
        "columns": X.shape[1],
        "string columns": len(string_levels(X)),
        "missing cells": f"{X.isna().to_numpy().mean():.1%}",
        "train": len(first.y_train),
        "test": len(first.y_test),
        "target": target_summary(first),
        "load s": round(seconds, 2),
        "problem": "; ".join(problems) or "-",
    }


def target_summary(split: corpus_data.Split) -> str:
    """Classes and the smallest share, or the range and the share of zeros."""
    y = split.y_train
    if split.classes is not None:
        share = np.bincount(y, minlength=len(split.classes)).min() / len(y)
        return f"{len(split.classes)} classes, smallest {share:.1%}"
    return f"{y.min():.3g} to {y.max():.3g}, zeros {np.mean(y == 0):.0%}"


if __name__ == "__main__":
    main()
