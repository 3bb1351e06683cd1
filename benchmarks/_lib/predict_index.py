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

With ``--baseline REV``, whole predictions (with the index) of this tree's
network and of the network of ``autoglm_graph`` at git revision ``REV``
(:func:`benchmarks._lib.revisions.import_revision`) alternate instead, on the
same fitted model: the revision's ``FittedNetwork`` is rebuilt from this one's
state (its own HNSW index from the same settings, built on one thread: the
same graph), and this tree's ``Predictor`` serves both, so what differs is the
network's prediction path alone. The two predict in turn, ``--rounds`` x
``--repeats`` pairs, the order alternating (the load of a shared machine
changes within a run): reported are the median and best rows per second of
each, the median and range of the pairs' ratios, and whether the predictions
are equal to the bit.

    python benchmarks/scale.py predict_index --sizes 100000 --baseline 22e52a9 \
        --out benchmarks/results/predict_speed

Timings are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import tempfile
import time
from pathlib import Path

import numpy as np
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
    if args.baseline is not None:
        return _against_baseline(model, X_test, n, args)
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


def _baseline_network(fitted, package):
    """``fitted`` as the revision ``package``'s ``FittedNetwork`` (the
    network's settings it does not know left out)."""
    config, tensors = fitted.state()
    config = dict(config)
    modules = importlib.import_module(f"{package.__name__}.network.modules")
    names = {f.name for f in dataclasses.fields(modules.NetConfig)}
    config["net"] = {k: v for k, v in config["net"].items() if k in names}
    network = importlib.import_module(f"{package.__name__}.network._fitted")
    return network.FittedNetwork.from_state(config, tensors, policy=fitted.policy)


def _against_baseline(model, X_test, n: int, args) -> list[dict]:
    from benchmarks._lib.revisions import import_revision

    with tempfile.TemporaryDirectory() as folder:
        package = import_revision(args.baseline, Path(folder))
        tree = model.predictor()
        versions = {
            args.baseline: dataclasses.replace(
                tree, network=_baseline_network(tree.network, package)
            ),
            "tree": tree,
        }

        def predict(predictor):
            eta, _ = predictor.coefficients(predictor.design(X_test))
            return model.family_.inverse_link(eta[:, 0])

        answers = {}
        for name, predictor in versions.items():
            predict(dataclasses.replace(predictor, predict_chunk=100))  # warm-up
            answers[name] = predict(predictor)
        # Paired calls, the order alternating: the machine's load changes
        # within a run, so each pair's ratio is read, and their median.
        seconds = {name: [] for name in versions}
        names = list(versions)
        for repeat in range(args.rounds * args.repeats):
            for name in names if repeat % 2 == 0 else names[::-1]:
                start = time.perf_counter()
                predict(versions[name])
                seconds[name].append(time.perf_counter() - start)
    equal = bool(np.array_equal(answers[args.baseline], answers["tree"]))
    base = np.asarray(seconds[args.baseline])
    rows = []
    for name in versions:
        ratios = base / np.asarray(seconds[name])
        rows.append(
            {
                "n_train": n,
                "training_rows": int(tree.network.rows.context.shape[0]),
                "version": name,
                "threads": args.threads,
                "median_rows_per_s": int(len(X_test) / np.median(seconds[name])),
                "best_rows_per_s": int(len(X_test) / np.min(seconds[name])),
                "x baseline (median of pairs)": round(float(np.median(ratios)), 2),
                "pairs min-max": f"{ratios.min():.2f}-{ratios.max():.2f}",
                "equal to the bit": equal,
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
    parser.add_argument(
        "--baseline",
        default=None,
        help="a git revision: whole predictions of its network against this tree's",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    table = to_markdown([row for n in args.sizes for row in _size(n, args)])
    print(table)
    if args.out is not None:
        command = command_line("scale.py predict_index", argv)
        machine = f"{cpu_name()}, torch {torch.__version__}"
        title = "Prediction index"
        if args.baseline is not None:
            title = f"Prediction speed against {args.baseline}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# {title}\n\nCommand: `{command}`\n\nMachine: {machine}\n\n{table}\n"
        )
