"""Embedding-graph refreshes: exact search against faiss IVF, in one process.

A default fit (``graph_backend="auto"``) searches its training rows among
themselves at every refresh of the embedding graph with a faiss IVF index from
5,000 rows (``graph.refresh_backend``); ``graph_backend="exact"`` keeps the
exact tiled search. This script fits both on the suite's split of each dataset,
alternately in one process and on one thread, and reports fit seconds, the
seconds of the epochs that refreshed the graph, the epochs run and the test
deviance.

    python benchmarks/neighbors.py refresh --out benchmarks/results/refresh_backend
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from autoglm_graph import get_family
from autoglm_graph.datasets import load_dataset
from benchmarks._lib import models as bench_models
from benchmarks._lib.common import command_line, cpu_name, to_markdown
from benchmarks._lib.suite import family_parameters, score

DATASETS = ("nass_cds", "cps1988", "hi", "star")


def fit_once(name: str, backend: str) -> dict:
    """One default fit of ``name`` with ``graph_backend=backend``."""
    ds = load_dataset(name, random_state=0)
    params = family_parameters(name)
    task = bench_models.Task(ds.family, seed=0, threads=1, **params)
    model = bench_models.GraphGLMModel(task, graph_backend=backend)
    start = time.perf_counter()
    model.fit(ds.X_train, ds.y_train, ds.offset_train, groups=ds.groups_train)
    fit_s = time.perf_counter() - start
    history = model.estimator.history_
    refresh_s = sum(h["seconds"] for h in history if h.get("graph_refreshed"))
    n_classes = None if ds.classes is None else len(ds.classes)
    mean = np.asarray(model.predict(ds.X_test, ds.offset_test))
    deviance = score(get_family(ds.family, **params), ds, mean, n_classes)["deviance"]
    return {
        "dataset": name,
        "backend": backend,
        "fit_s": round(fit_s, 2),
        "refresh_epochs_s": round(refresh_s, 2),
        "epochs": model.estimator.n_iter_,
        "global_only": model.estimator.is_global_only_,
        "test_deviance": f"{deviance:.6g}",
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for name in args.datasets:
        for backend in ("exact", "auto"):
            rows.append(fit_once(name, backend))
            print(rows[-1], flush=True)
    command = command_line("neighbors.py refresh", argv)
    text = (
        "# Embedding-graph refreshes: exact against IVF\n\n"
        f"Command: `{command.strip()}`\n\n"
        f"{cpu_name()}, one torch thread; both fits of a dataset in one process, "
        "one after the other. `refresh_epochs_s`: the seconds of the epochs that "
        "rebuilt the graph (search, validation search and that epoch's step).\n\n"
        + to_markdown(rows)
        + "\n"
    )
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text)
