"""Peak memory of a fit by phase, with and without activation checkpointing.

Each configuration runs in a fresh process that samples its resident memory
every 20 ms and charges it to the phase running at the time: data, the global
GLM, the neighbour graph, training steps, source states, validation, and
prediction ("other": preprocessing and the rest of ``fit``). Also reported:
seconds per training step (the median over the fit's epochs).

    python benchmarks/memory.py --sizes 200000 --out benchmarks/results/memory

``checkpoint`` "on" sets the row count from which activations are recomputed
to 1 (always), "off" to never; the library's default is 250k rows.
Timings and memory are for reading, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from _common import cpu_name, to_markdown

PHASES = {
    "build_graphs": "graph",
    "_train_step": "train_step",
    "_validate": "validate",
    "source_states": "source_states",
}


def measure(n: int, checkpoint: str, epochs: int, backend: str) -> dict:
    """One fit in this process; peak RSS (GiB) per phase and step seconds."""
    import psutil
    import torch

    import autoglm_graph._base as base
    import autoglm_graph.modules as modules
    import autoglm_graph.training as training
    from autoglm_graph import GraphGLMRegressor
    from autoglm_graph.datasets import make_varying_coefficients

    torch.set_num_threads(1)
    modules.CHECKPOINT_MIN_ROWS = 1 if checkpoint == "on" else None
    process, phase, peaks, steps = psutil.Process(), ["start"], {}, []

    def sample() -> None:
        while True:
            rss = process.memory_info().rss / 2**30
            peaks[phase[0]] = max(peaks.get(phase[0], 0.0), rss)
            time.sleep(0.02)

    def charged(owner, name: str, label: str) -> None:
        function = getattr(owner, name)

        def wrapper(*args, **kwargs):
            previous, phase[0] = phase[0], label
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                phase[0] = previous
                if label == "train_step":
                    steps.append(time.perf_counter() - start)

        setattr(owner, name, wrapper)

    for name, label in PHASES.items():
        charged(training.TrainingState, name, label)
    charged(base, "fit_global_glm", "glm")
    threading.Thread(target=sample, daemon=True).start()
    phase[0] = "data"
    X, y, _ = make_varying_coefficients(
        n + 20_000, 32, 4, family="gaussian", noise=0.5, random_state=0
    )
    phase[0] = "other"
    model = GraphGLMRegressor(
        random_state=0, graph_space="input", max_epochs=epochs, graph_backend=backend
    )
    model.fit(X[:n], y[:n])
    phase[0] = "predict"
    model.predict(X[n:])
    time.sleep(0.1)
    row = {
        "n": n,
        "checkpoint": checkpoint,
        "step_s": round(float(np.median(steps)), 2),
    }
    # Every phase gets a column; a phase too short for the sampler shows "-".
    order = ["data", "other", "glm", *PHASES.values(), "predict"]
    row.update({f"{k}_gib": round(peaks[k], 2) if k in peaks else "-" for k in order})
    row["peak_gib"] = round(max(peaks.values()), 2)
    return row


def main(argv: list[str] | None = None) -> None:
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
            command = [sys.executable, __file__, "--one", json.dumps(config)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{config} failed:\n{done.stderr}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    table = to_markdown(rows)
    print(table)
    if args.out is not None:
        command = "python " + shlex.join(["benchmarks/memory.py", *sys.argv[1:]])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(
            f"# Peak memory by phase\n\nCommand: `{command}`\n\nMachine: "
            f"{cpu_name()}, one torch thread. Columns `*_gib`: peak resident "
            f"memory while that phase ran; `step_s`: median seconds of a "
            f"training step.\n\n{table}\n"
        )


if __name__ == "__main__":
    main()
