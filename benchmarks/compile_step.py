"""Does ``torch.compile`` pay for a training step on a CPU? (#13)

Issue #13 lists ``torch.compile`` among the candidates for faster fits. Each
mode runs in a fresh process (compilation caches are per process and per
shape) on ``step_ab.make_step``'s network and random neighbour lists: one
full-batch training step (forward, backward, fused AdamW) of the default
network, with ``mode``

- ``eager``: as the fits run it;
- ``encoder``: ``torch.compile(net.encoder)`` (linear, GELU, dropout,
  linear, layer norm: the element-wise chain inductor could fuse);
- ``forward``: ``torch.compile(net.forward)``, the whole pass.

The table gives the first step's seconds (compilation included) and the median
of ``--repeats`` steps after it, or the error where compilation fails.

    python benchmarks/compile_step.py --sizes 3750 15000 \\
        --out benchmarks/results/compile_step
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

MODES = ("eager", "encoder", "forward")


def run_mode(mode: str, n: int, repeats: int) -> dict:
    """One mode's step timings, measured in this process."""
    import statistics
    import time

    import torch
    from step_ab import make_step

    import autoglm_graph

    def prepare(net) -> None:
        if mode == "encoder":
            net.encoder = torch.compile(net.encoder, dynamic=False)
        elif mode == "forward":
            net.forward = torch.compile(net.forward, dynamic=False)

    step, _ = make_step(autoglm_graph, n, 10, 0, prepare=prepare)
    start = time.perf_counter()
    try:
        step()
    except Exception as error:  # the failure is the result
        message = str(error).splitlines()[0][:120].replace("|", "/")
        return {"mode": mode, "rows": n, "first step s": "-", "step ms": message}
    first = time.perf_counter() - start
    steps = [step() for _ in range(repeats)]
    return {
        "mode": mode,
        "rows": n,
        "first step s": round(first, 2),
        "step ms": round(statistics.median(steps) * 1e3, 2),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3750, 15000])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    if args.child:
        import torch

        torch.set_num_threads(1)
        mode, n = args.child
        print(json.dumps(run_mode(mode, int(n), args.repeats)))
        return []
    from _common import cpu_name, to_markdown, write_record

    rows = []
    for n in args.sizes:
        for mode in args.modes:
            command = [sys.executable, __file__, "--child", mode, str(n)]
            command += ["--repeats", str(args.repeats)]
            output = subprocess.run(
                command, capture_output=True, text=True, check=True
            ).stdout
            rows.append(json.loads(output.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    write_record(
        "torch.compile on a CPU training step",
        "python benchmarks/compile_step.py " + shlex.join(argv or sys.argv[1:]),
        f"Machine: {cpu_name()}, one torch thread; each mode in a fresh process.",
        [to_markdown(rows)],
        args.out,
    )
    return rows


if __name__ == "__main__":
    main()
