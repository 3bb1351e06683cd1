"""Prediction throughput of default models, exact search against the prediction index.

For each training size, one default ``GraphGLMRegressor(family="poisson")`` is
fitted on clustered rows (``make_varying_coefficients`` with 20 groups, d = 32;
a few epochs: the search cost does not depend on them, prediction searches the
embedding of every training row) with ``FitPolicy(predict_index_min_rows=0)``,
so that it builds the prediction index. It then predicts the test rows with the
exact search (the index dropped) and with the index, alternately, in one
process. Reported: rows per second (best of ``--repeats``, after a warm-up
call), the search's rows per second, recall@k of the index's graph against the
exact search on the test rows, the calibrated efSearch and the recall the fit
measured on its validation rows, and the index's build seconds.

    python benchmarks/scale.py predict_index --out benchmarks/results/predict_index

Timings are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from autoglm_graph import FitPolicy, GraphGLMRegressor, cosine_topk, recall_at_k
from autoglm_graph.datasets import make_varying_coefficients
from benchmarks._lib.common import command_line, cpu_name, to_markdown


def _best_rate(call, n: int, repeats: int) -> int:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return int(n / min(times))


def _size(n: int, args) -> list[dict]:
    X, y, _ = make_varying_coefficients(
        n + args.n_test, 32, 20, family="poisson", random_state=0
    )
    X_test = X[n:]
    model = GraphGLMRegressor(
        family="poisson",
        max_epochs=args.max_epochs,
        random_state=0,
        n_jobs=args.threads,
        fit_policy=FitPolicy(predict_index_min_rows=0),
    ).fit(X[:n], y[:n])
    if model.is_global_only_:  # no network, no index
        print(f"n={n}: the fit is the global GLM; skipped", flush=True)
        return []
    fitted = model.predictor().network  # the fitted network itself, no copy
    spec, index = fitted.prediction_index, fitted.index
    context = torch.as_tensor(model.predictor().design(X_test), dtype=torch.float32)
    queries = fitted.graph_vectors(context)[1].float()
    base = fitted.base_vectors().float()
    k, tau = fitted.graph.n_neighbors, fitted.graph.threshold
    exact = cosine_topk(queries, base, n_neighbors=k, threshold=tau)
    recall = recall_at_k(fitted.search(queries), exact)
    modes = {"exact": (None, None), "index": (spec, index)}
    rates = {name: [] for name in modes}
    search = {name: [] for name in modes}
    for _ in range(args.rounds):
        for name, (s, i) in modes.items():
            fitted.prediction_index, fitted.index = s, i
            model.predict(X_test[:100])  # warm-up (and the exact index)
            n_test = len(X_test)
            rates[name].append(
                _best_rate(lambda: model.predict(X_test), n_test, args.repeats)
            )
            search[name].append(
                _best_rate(lambda: fitted.search(queries), n_test, args.repeats)
            )
    start = time.perf_counter()
    spec.build(base, k)
    build_s = time.perf_counter() - start
    rows = []
    for name in modes:
        rows.append(
            {
                "n_train": n,
                "training_rows": int(base.shape[0]),
                "search": name,
                "threads": args.threads,
                "predict_rows_per_s": max(rates[name]),
                "search_rows_per_s": max(search[name]),
                "recall@k": 1.0 if name == "exact" else round(recall, 4),
                "ef_search": "-" if name == "exact" else spec.ef_search,
                "fit_recall": "-" if name == "exact" else spec.recall,
                "build_s": "-" if name == "exact" else round(build_s, 1),
            }
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", nargs="+", type=int, default=[20_000, 50_000, 100_000]
    )
    parser.add_argument("--n-test", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    table = to_markdown([row for n in args.sizes for row in _size(n, args)])
    print(table)
    if args.out is not None:
        command = command_line("scale.py predict_index", argv)
        machine = f"{cpu_name()}, torch {torch.__version__}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# Prediction index\n\nCommand: `{command}`\n\nMachine: {machine}\n\n"
            f"{table}\n"
        )
