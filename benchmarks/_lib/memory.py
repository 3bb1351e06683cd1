"""Peak memory of a fit and its prediction, with and without checkpointing.

Each configuration runs in a fresh process that samples its resident memory
every 20 ms: the peak while the data are made, while the estimator fits, and
while it predicts 20,000 rows. Also reported: the median seconds of an epoch
(``history_``'s ``seconds``).

    python benchmarks/scale.py memory --sizes 200000 --out benchmarks/results/memory

``checkpoint`` "on" recomputes activations from one row on
(``FitPolicy(checkpoint_min_rows=1)``), "off" never at these sizes; the
library's default is ``FitPolicy().checkpoint_min_rows`` rows
(``docs/decisions/checkpointing.md``). Timings and memory are for reading,
never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks._lib.common import command_line, cpu_name, to_markdown

SCALE = str(Path(__file__).resolve().parents[1] / "scale.py")


def measure(n: int, checkpoint: str, epochs: int, backend: str) -> dict:
    """One fit in this process; peak RSS (GiB) per stage and epoch seconds."""
    import psutil
    import torch

    from autoglm_graph import FitPolicy, GraphGLMRegressor
    from autoglm_graph.datasets import make_varying_coefficients

    torch.set_num_threads(1)
    process, stage, peaks = psutil.Process(), ["start"], {}

    def sample() -> None:
        while True:
            rss = process.memory_info().rss / 2**30
            peaks[stage[0]] = max(peaks.get(stage[0], 0.0), rss)
            time.sleep(0.02)

    threading.Thread(target=sample, daemon=True).start()
    stage[0] = "data"
    X, y, _ = make_varying_coefficients(
        n + 20_000, 32, 4, family="gaussian", noise=0.5, random_state=0
    )
    stage[0] = "fit"
    policy = FitPolicy(checkpoint_min_rows=1 if checkpoint == "on" else n + 1)
    model = GraphGLMRegressor(
        random_state=0,
        graph_space="input",
        max_epochs=epochs,
        graph_backend=backend,
        fit_policy=policy,
    )
    model.fit(X[:n], y[:n])
    stage[0] = "predict"
    model.predict(X[n:])
    time.sleep(0.1)
    seconds = [h["seconds"] for h in model.history_ if "seconds" in h]
    row = {"n": n, "checkpoint": checkpoint}
    row["epoch_s"] = round(float(np.median(seconds)), 2) if seconds else "-"
    # Every stage gets a column; a stage too short for the sampler shows "-".
    for key in ("data", "fit", "predict"):
        row[f"{key}_gib"] = round(peaks[key], 2) if key in peaks else "-"
    row["peak_gib"] = round(max(peaks.values()), 2)
    return row


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[200_000])
    parser.add_argument("--checkpoint", nargs="+", default=["off", "on"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--backend", default="exact")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(**json.loads(args.one))))
        return
    rows = []
    for n in args.sizes:
        for checkpoint in args.checkpoint:
            config = dict(n=n, checkpoint=checkpoint, epochs=args.epochs)
            config["backend"] = args.backend
            command = [sys.executable, SCALE, "memory", "--one", json.dumps(config)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{config} failed:\n{done.stderr}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    table = to_markdown(rows)
    print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# Peak memory of a fit\n\n"
            f"Command: `{command_line('scale.py memory', argv)}`"
            f"\n\nMachine: {cpu_name()}, one torch thread. Columns `*_gib`: peak "
            f"resident memory while that stage ran; `epoch_s`: median seconds of "
            f"an epoch.\n\n{table}\n"
        )
