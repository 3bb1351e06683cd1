"""Thread control: ``GridSearchCV(n_jobs=...)`` over GraphGLM with ``n_jobs``.

Times one small grid search (4 candidates x 3 folds) in this process, four
ways: the search's ``n_jobs`` 1 or 2, and the estimator's ``n_jobs`` None (one
torch thread per fit, the default) or -1 (every core per fit, which is what
torch did before the estimators had ``n_jobs``). With ``GridSearchCV(n_jobs=2)``
on a 2-core machine the second oversubscribes: 2 workers x 2 threads.

    python benchmarks/scale.py threads --out benchmarks/results/threads
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from sklearn.model_selection import GridSearchCV

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from benchmarks._lib.common import command_line

GRID = {"n_neighbors": [8, 16], "learning_rate": [3e-3, 6e-3]}


def run(n_rows: int, search_jobs: int, estimator_jobs: int | None, max_epochs: int):
    X, y, _ = make_varying_coefficients(n_rows, 8, family="poisson", random_state=0)
    estimator = GraphGLMRegressor(
        family="poisson", max_epochs=max_epochs, n_jobs=estimator_jobs, random_state=0
    )
    search = GridSearchCV(estimator, GRID, cv=3, n_jobs=search_jobs)
    start = time.perf_counter()
    search.fit(X, y)
    return time.perf_counter() - start, float(search.best_score_)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--max-epochs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    for search_jobs, estimator_jobs in [(1, None), (2, None), (1, -1), (2, -1)]:
        seconds, score = run(args.rows, search_jobs, estimator_jobs, args.max_epochs)
        row = {
            "search_n_jobs": search_jobs,
            "estimator_n_jobs": str(estimator_jobs),
            "seconds": round(seconds, 1),
            "best_score": round(score, 4),
        }
        print(row, flush=True)
        rows.append(row)
    base = rows[0]["seconds"]
    lines = [
        "# GridSearchCV over GraphGLM: search and estimator threads",
        "",
        f"Command: `{command_line('scale.py threads', argv)}`",
        "",
        f"{os.cpu_count()} CPUs; {args.rows} rows x 8 features, poisson, "
        f"{len(GRID['n_neighbors']) * len(GRID['learning_rate'])} candidates x "
        f"3 folds, max_epochs={args.max_epochs}. Speed-up against the first row.",
        "",
        "| GridSearchCV n_jobs | estimator n_jobs | seconds | speed-up | best score |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['search_n_jobs']} | {r['estimator_n_jobs']} | {r['seconds']} | "
            f"{base / r['seconds']:.2f}x | {r['best_score']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
