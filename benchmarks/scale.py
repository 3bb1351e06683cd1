"""Scale: training-step kernels, fits from 10k to 1M rows, memory, prediction, threads.

Without a part's name, the ``step`` and ``fit`` parts below (``--parts``), each
printing a markdown table; ratios compare peers of one run.

* ``step``: one full-batch training step (forward, backward, AdamW) of the
  graph network at N rows, k neighbours, 2 layers, 4 heads x 16 channels:
  the fixed-degree fast path against torch_geometric's ``GATConv`` with the
  same weights, in fp32 and under bf16 autocast.
* ``fit``: ``GraphGLMRegressor`` fits on synthetic varying-coefficient data
  (d = 32) at each size, and on the large suite datasets (Fertility, flights):
  fit seconds, epochs, predict rows per second, test deviance against the
  global GLM, and the peak resident memory of the process. Each fit runs in a
  fresh subprocess, so the peak memory is its own.

    python benchmarks/scale.py --out benchmarks/results/scale
    python benchmarks/scale.py --parts step --step-sizes 100000
    python benchmarks/scale.py --parts fit --sizes 10000 --datasets

Named parts, each with its own options (``--help``):

* ``memory``: peak memory of a fit and its prediction, with and without
  activation checkpointing (``benchmarks/_lib/memory.py``);
* ``predict``: prediction throughput, exact against approximate search
  (``benchmarks/_lib/predict.py``);
* ``threads``: ``GridSearchCV(n_jobs=...)`` against the estimator's ``n_jobs``
  (``benchmarks/_lib/threads.py``).

    python benchmarks/scale.py memory --sizes 200000 --out benchmarks/results/memory
    python benchmarks/scale.py predict --out benchmarks/results/predict
    python benchmarks/scale.py threads --out benchmarks/results/threads

Timings are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from benchmarks._lib import memory, predict, predict_index, threads
from benchmarks._lib.common import command_line, cpu_name, dispatch, to_markdown


# ----------------------------------------------------------------- step part
def _random_graph(n: int, k: int, seed: int):
    from autoglm_graph import NeighborGraph

    # The cost of a step does not depend on which rows are neighbours, only on
    # how many; random lists avoid an exact search of N x N at 100k+ rows.
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, n, (n, k), generator=generator)
    similarities = torch.rand(n, k, generator=generator)
    mask = torch.ones(n, k, dtype=torch.bool)
    return NeighborGraph(indices, similarities, mask)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_steps(net, context, targets, adjacency, precision: str, repeats: int):
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    dtype = {"bf16": torch.bfloat16}.get(precision)
    device = context.device
    times = []
    for _ in range(repeats + 1):  # the first step warms up (and builds CSR)
        _sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            delta, _ = net(context, targets, adjacency)
        loss = delta.float().square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        _sync(device)
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:]))


def step_part(sizes: list[int], k: int, repeats: int, device: str) -> list[dict]:
    from autoglm_graph.network.modules import GraphGLMNet

    rows = []
    for n in sizes:
        torch.manual_seed(0)
        context = torch.randn(n, 32, device=device)
        targets = torch.randn(n, 2, device=device)
        graph = _random_graph(n, k, 0).to(device)
        reference = None
        for impl in ("pyg", "fused"):
            net = GraphGLMNet(
                32,
                33,
                hidden_channels=64,
                heads=4,
                num_layers=2,
                target_channels=2,
                message_passing=impl,
            ).to(device)
            if reference is None:
                reference = net.state_dict()
            net.load_state_dict(reference)
            adjacency = net.adjacency(graph, n)
            for precision in ("fp32", "bf16"):
                seconds = _time_steps(
                    net, context, targets, adjacency, precision, repeats
                )
                rows.append(
                    {
                        "n": n,
                        "k": k,
                        "layer": impl,
                        "precision": precision,
                        "step_s": round(seconds, 3),
                    }
                )
        base = next(
            r
            for r in rows
            if r["n"] == n and r["layer"] == "pyg" and r["precision"] == "fp32"
        )["step_s"]
        for r in rows:
            if r["n"] == n:
                r["speed-up vs pyg fp32"] = round(base / r["step_s"], 2)
    return rows


# ------------------------------------------------------------------ fit part
def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB


def _scores(model, X, y, offset=None) -> tuple[float, float]:
    """Mean test deviance of the model and of its own global GLM."""
    family = model.family_
    predictor = model.predictor()
    offset = None if offset is None else np.asarray(offset, dtype=np.float64)
    eta_glm = predictor.global_eta(predictor.design(X), offset)
    eta_glm = torch.as_tensor(eta_glm if eta_glm.shape[1] > 1 else eta_glm[:, 0])
    mu_glm = family.inverse_link(eta_glm).numpy()
    if hasattr(model, "classes_"):
        from sklearn.metrics import log_loss

        proba_glm = mu_glm if mu_glm.ndim > 1 else np.c_[1 - mu_glm, mu_glm]
        proba = model.predict_proba(X, offset=offset)
        labels = model.classes_
        return 2 * log_loss(y, proba, labels=labels), 2 * log_loss(
            y, proba_glm, labels=labels
        )
    y64 = torch.as_tensor(np.asarray(y, dtype=np.float64))
    mu = model.predict(X, offset=offset)
    eta = family.link(torch.as_tensor(mu, dtype=torch.float64))
    return float(family.deviance(y64, eta)), float(family.deviance(y64, eta_glm))


def fit_one(config: dict) -> dict:
    """One fit in this process (run by the subprocess entry point)."""
    from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
    from autoglm_graph.datasets import load_dataset, make_varying_coefficients

    torch.set_num_threads(config["threads"])
    start = time.perf_counter()
    if config["data"] == "synthetic":
        n, n_test = config["n"], 20_000
        X, y, _ = make_varying_coefficients(
            n + n_test, 32, 4, family="gaussian", noise=0.5, random_state=0
        )
        X_train, y_train, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
        family, offset_train, offset_test = "gaussian", None, None
    else:
        ds = load_dataset(config["data"])
        X_train, y_train, X_test, y_test = ds.X_train, ds.y_train, ds.X_test, ds.y_test
        family, offset_train, offset_test = ds.family, ds.offset_train, ds.offset_test
    load_s = time.perf_counter() - start
    params = dict(
        random_state=0,
        precision=config["precision"],
        graph_space=config["graph_space"],
        max_epochs=config["max_epochs"],
        device=config["device"],
        batch_size=config["batch_size"],
        graph_backend=config["backend"],
        n_jobs=config["threads"],
    )
    if family in ("binomial", "multinomial"):
        model = GraphGLMClassifier(**params)
    else:
        model = GraphGLMRegressor(family=family, **params)
    fit_kwargs = {} if offset_train is None else {"offset": offset_train}
    start = time.perf_counter()
    model.fit(X_train, y_train, **fit_kwargs)
    fit_s = time.perf_counter() - start
    n_pred = min(len(y_test), 50_000)
    X_pred = X_test[:n_pred]
    start = time.perf_counter()
    if offset_test is None:
        model.predict(X_pred)
    else:
        model.predict(X_pred, offset=offset_test[:n_pred])
    predict_s = time.perf_counter() - start
    test, glm_test = _scores(model, X_test, y_test, offset_test)
    return {
        "data": config["data"],
        "n_train": len(y_train),
        "precision": config["precision"],
        "graph": f"{config['graph_space']}/{config['backend']}",
        "load_s": round(load_s, 1),
        "fit_s": round(fit_s, 1),
        "epochs": model.n_iter_,
        "global_only": bool(model.is_global_only_),
        "predict_rows_per_s": int(n_pred / predict_s),
        "test_deviance": round(test, 4),
        "global_glm_deviance": round(glm_test, 4),
        "peak_rss_gib": round(_peak_rss_gib(), 2),
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if torch.cuda.is_available()
        else None,
    }


def fit_part(args) -> list[dict]:
    configs = [
        {"data": "synthetic", "n": n, "precision": p}
        for n in args.sizes
        for p in args.precisions
    ]
    configs += [{"data": name, "precision": "fp32"} for name in args.datasets]
    rows = []
    for config in configs:
        config.update(
            threads=args.threads,
            graph_space=args.graph_space,
            backend=args.backend,
            max_epochs=args.max_epochs,
            device=args.device,
            batch_size=args.batch_size,
        )
        command = [sys.executable, str(Path(__file__)), "--one", json.dumps(config)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            rows.append({"data": config["data"], "error": done.stderr[-200:]})
            continue
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(row, flush=True)
        rows.append(row)
    return rows


PARTS = {
    "memory": memory.main,
    "predict": predict.main,
    "predict_index": predict_index.main,
    "threads": threads.main,
}


def main(argv: list[str] | None = None) -> None:
    """The part named by ``argv[0]``, else the step and fit parts."""
    return dispatch(argv, PARTS, default=step_and_fit)


def step_and_fit(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["step", "fit"])
    parser.add_argument("--step-sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--sizes", nargs="*", type=int, default=[10_000, 100_000, 1_000_000]
    )
    parser.add_argument("--precisions", nargs="+", default=["fp32"])
    parser.add_argument("--datasets", nargs="*", default=["fertility", "flights"])
    parser.add_argument("--graph-space", default="input")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--max-epochs", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(fit_one(json.loads(args.one))))
        return
    torch.set_num_threads(args.threads)
    sections = []
    if "step" in args.parts:
        steps = step_part(args.step_sizes, args.k, args.repeats, args.device)
        table = to_markdown(steps)
        print(table, flush=True)
        sections.append(
            ("One full-batch training step (random k-regular graph)", table)
        )
    if "fit" in args.parts:
        table = to_markdown(fit_part(args))
        print(table, flush=True)
        sections.append(("Fits (each in a fresh process)", table))
    if args.out is not None:
        command = command_line("scale.py", argv)
        machine = (
            f"{cpu_name()}, {args.threads} torch thread(s), torch {torch.__version__}"
        )
        body = "\n\n".join(f"## {title}\n\n{table}" for title, table in sections)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# Scale\n\nCommand: `{command}`\n\nMachine: {machine}\n\n{body}\n"
        )


if __name__ == "__main__":
    main()
