"""Prediction throughput of a model fitted on 100k rows, exact vs approximate graph.

For each dataset and neighbour-search backend, one ``GraphGLMRegressor`` is
fitted (input-space graph, a few epochs: the fit is not what is measured) and
then predicts the test rows with 1 and 2 torch threads. Reported: rows per
second (best of ``--repeats``, after a warm-up call that also builds any
search index), the share of the time spent in the neighbour search, recall@k
of the prediction graph against the exact search, and the test deviance
relative to the exact backend's model.

* ``synthetic``: ``make_varying_coefficients`` with d = 32 (isotropic rows
  within 4 groups, the hard case for approximate search);
* ``flights``: 100k rows of the suite's flights training set (real rows with
  9 features, many near-duplicates).

    python benchmarks/scale.py predict --out benchmarks/results/predict

Timings are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from autoglm_graph import FitPolicy, GraphGLMRegressor, cosine_topk, recall_at_k
from benchmarks._lib.common import command_line, cpu_name, to_markdown


def _data(name: str, n_train: int, n_test: int):
    if name == "synthetic":
        from autoglm_graph.datasets import make_varying_coefficients

        X, y, _ = make_varying_coefficients(
            n_train + n_test, 32, 4, family="gaussian", noise=0.5, random_state=0
        )
        return X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    from autoglm_graph.datasets import load_dataset

    ds = load_dataset(name)
    rng = np.random.default_rng(0)
    train = rng.choice(
        len(ds.y_train), size=min(n_train, len(ds.y_train)), replace=False
    )
    test = rng.choice(len(ds.y_test), size=min(n_test, len(ds.y_test)), replace=False)
    return (
        ds.X_train.iloc[np.sort(train)],
        ds.y_train[np.sort(train)],
        ds.X_test.iloc[np.sort(test)],
        ds.y_test[np.sort(test)],
    )


def _queries(model, X) -> torch.Tensor:
    """``X``'s vectors in the graph's space (the input space here)."""
    predictor = model.predictor()
    context = torch.as_tensor(predictor.design(X), dtype=torch.float32)
    return predictor.network.graph_vectors(context)[1].float()


def _search_share(model, X) -> float:
    """Fraction of one predict call's time that its neighbour searches take.

    ``predict`` searches the rows ``FitPolicy.predict_chunk`` at a time; the
    same searches are timed apart, right after a timed ``predict`` of the rows.
    """
    network = model.predictor().network
    chunk = (model.fit_policy or FitPolicy()).predict_chunk
    queries = _queries(model, X)
    start = time.perf_counter()
    model.predict(X)
    total = time.perf_counter() - start
    start = time.perf_counter()
    for first in range(0, len(queries), chunk):
        network.search(queries[first : first + chunk])
    return (time.perf_counter() - start) / total


def _prediction_graph(model, X):
    return model.predictor().network.search(_queries(model, X))


def run(args) -> list[dict]:
    rows = []
    for name in args.datasets:
        X, y, X_test, y_test = _data(name, args.n_train, args.n_test)
        exact_deviance = exact_graph = None
        for backend in args.backends:
            model = GraphGLMRegressor(
                graph_space="input",
                graph_backend=backend,
                max_epochs=args.max_epochs,
                random_state=0,
            )
            torch.set_num_threads(1)
            start = time.perf_counter()
            model.fit(X, y)
            fit_s = time.perf_counter() - start
            if model.is_global_only_:
                print(f"{name}/{backend}: the fit is the global GLM; skipped")
                continue
            graph = _prediction_graph(model, X_test)
            if exact_graph is None:
                exact_graph = cosine_topk(
                    _queries(model, X_test),
                    model.predictor().network.base_vectors(),
                    n_neighbors=model.n_neighbors,
                    threshold=model.threshold,
                )
            deviance = float(np.mean((model.predict(X_test) - y_test) ** 2))
            if backend == "exact":
                exact_deviance = deviance
            for threads in args.threads:
                torch.set_num_threads(threads)
                model.set_params(n_jobs=threads)  # the estimator's own limit
                model.predict(X_test)  # warm-up (and any index build)
                times = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    model.predict(X_test)
                    times.append(time.perf_counter() - start)
                rows.append(
                    {
                        "data": name,
                        "n_train": len(y),
                        "n_predict": len(y_test),
                        "backend": backend,
                        "threads": threads,
                        "fit_s": round(fit_s, 1),
                        "predict_rows_per_s": int(len(y_test) / min(times)),
                        "search_share": round(_search_share(model, X_test), 2),
                        "recall@k": round(recall_at_k(graph, exact_graph), 3),
                        "test_mse": round(deviance, 4),
                        "mse_vs_exact": "-"
                        if exact_deviance is None
                        else f"{deviance / exact_deviance - 1:+.2%}",
                    }
                )
                print(rows[-1], flush=True)
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["synthetic", "flights"])
    parser.add_argument("--backends", nargs="+", default=["exact", "faiss"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--n-train", type=int, default=100_000)
    parser.add_argument("--n-test", type=int, default=20_000)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    table = to_markdown(run(args))
    print(table)
    if args.out is not None:
        command = command_line("scale.py predict", argv)
        machine = f"{cpu_name()}, torch {torch.__version__}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# Prediction throughput\n\nCommand: `{command}`\n\nMachine: {machine}\n\n"
            f"{table}\n"
        )
