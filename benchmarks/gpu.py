"""GPU: training-step kernels and default fits on one GPU, with LightGBM beside them.

Answers: how fast is a training step (the fused path against torch_geometric's
``GATConv``, fp32 and bf16), and how much of a default fit is its optimiser
steps (``fit_times_``: preprocessing, global GLM, graphs, steps, validation,
wrap-up) at 100k and 1M rows of synthetic varying-coefficient data (d = 32,
gaussian), against LightGBM on the machine's CPU threads. Sized for one
H200-class card in a few minutes::

    python benchmarks/gpu.py --out benchmarks/results/gpu.md

On a machine without CUDA it stops with a message. Timings are for reading,
never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from benchmarks._lib.common import command_line, to_markdown


def _synthetic(n: int, n_test: int = 20_000):
    from autoglm_graph.datasets import make_varying_coefficients

    X, y, _ = make_varying_coefficients(
        n + n_test, 32, 4, family="gaussian", noise=0.5, random_state=0
    )
    return X[:n], y[:n], X[n:], y[n:]


def _random_graph(n: int, k: int, device: str):
    from autoglm_graph import NeighborGraph

    # A step's cost depends on how many neighbours a row has, not which.
    generator = torch.Generator().manual_seed(0)
    return NeighborGraph(
        torch.randint(0, n, (n, k), generator=generator),
        torch.rand(n, k, generator=generator),
        torch.ones(n, k, dtype=torch.bool),
    ).to(device)


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def step_rows(sizes: list[int], k: int, repeats: int, device: str) -> list[dict]:
    """Median seconds of one full-batch step (forward, backward, AdamW)."""
    from autoglm_graph.network.modules import GraphGLMNet

    rows = []
    for n in sizes:
        context = torch.randn(n, 32, device=device)
        targets = torch.randn(n, 2, device=device)
        graph = _random_graph(n, k, device)
        for layer in ("pyg", "fused"):
            torch.manual_seed(0)
            net = GraphGLMNet(
                32, 33, hidden_channels=64, heads=4, num_layers=2,
                target_channels=2, message_passing=layer,
            ).to(device)  # fmt: skip
            adjacency = net.adjacency(graph, n)
            optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
            for precision, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
                times = []
                try:
                    for _ in range(repeats + 1):  # the first warms up
                        _sync(device)
                        start = time.perf_counter()
                        with torch.autocast(
                            torch.device(device).type,
                            dtype=dtype,
                            enabled=dtype is not None,
                        ):
                            delta, _ = net(context, targets, adjacency)
                        loss = delta.float().square().mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        _sync(device)
                        times.append(time.perf_counter() - start)
                    seconds = f"{np.median(times[1:]):.3f}"
                except torch.OutOfMemoryError:
                    seconds = "out of memory"
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                row = {"rows": n, "layer": layer, "precision": precision}
                rows.append({**row, "step_s": seconds})
    return rows


def fit_rows(sizes: list[int], threads: int, device: str) -> list[dict]:
    """Default fits on the GPU, their phases, and LightGBM on the CPU threads."""
    import lightgbm

    from autoglm_graph import GraphGLMRegressor

    rows = []
    for n in sizes:
        X, y, X_test, y_test = _synthetic(n)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        model = GraphGLMRegressor(random_state=0, device=device)
        start = time.perf_counter()
        model.fit(X, y)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        prediction = model.predict(X_test)
        predict_s = time.perf_counter() - start
        glm = GraphGLMRegressor(local_penalty=np.inf, device=device).fit(X, y)
        start = time.perf_counter()
        booster = lightgbm.LGBMRegressor(n_jobs=threads, verbose=-1).fit(X, y)
        lgbm_s = time.perf_counter() - start
        phases = model.fit_times_
        row = {
            "rows": n,
            "fit_s": round(fit_s, 2),
            "epochs": model.n_iter_,
            **{f"{name}_s": round(s, 2) for name, s in phases.items()},
            "steps_share": f"{phases['steps'] / fit_s:.0%}",
            "predict_rows_per_s": int(len(X_test) / predict_s),
            "test_mse": round(float(np.mean((prediction - y_test) ** 2)), 4),
            "glm_test_mse": round(
                float(np.mean((glm.predict(X_test) - y_test) ** 2)), 4
            ),
            "lightgbm_s": round(lgbm_s, 2),
            "lightgbm_test_mse": round(
                float(np.mean((booster.predict(X_test) - y_test) ** 2)), 4
            ),
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1)
            if torch.cuda.is_available()
            else None,
        }
        print(row, flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["step", "fit"])
    parser.add_argument("--step-sizes", nargs="+", type=int, default=[1_000_000])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100_000, 1_000_000])
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs a CUDA device (--device cpu: a smoke run).")
    torch.set_num_threads(args.threads)
    sections = []
    if "step" in args.parts:
        table = to_markdown(
            step_rows(args.step_sizes, args.k, args.repeats, args.device)
        )
        print(table, flush=True)
        title = "One full-batch training step (random k-regular graph)"
        sections.append((title, table))
    if "fit" in args.parts:
        table = to_markdown(fit_rows(args.sizes, args.threads, args.device))
        print(table, flush=True)
        sections.append(("Default fits (`fit_times_` phases, seconds)", table))
    if args.out is not None:
        name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
        machine = f"{name}, torch {torch.__version__}, {args.threads} CPU threads"
        command = command_line("gpu.py", sys.argv[1:])
        body = "\n\n".join(f"## {title}\n\n{table}" for title, table in sections)
        args.out.write_text(
            f"# GPU\n\nCommand: `{command}`\n\nMachine: {machine}\n\n{body}\n"
        )


if __name__ == "__main__":
    main()
