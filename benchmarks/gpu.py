"""The scale benchmark on one GPU (H200 class), sized to finish in under 8 minutes.

Runs :mod:`scale` with GPU sizes: training steps of the fast path against
torch_geometric's layer at 1M and 10M rows (fp32 and bf16), and fits at 100k,
1M and 10M rows (exact neighbour search on the GPU, input-space graph; 10M
rows train in mini-batches). Record its table in ``benchmarks/results/gpu.md``
whenever it has run on a GPU::

    python benchmarks/gpu.py --out benchmarks/results/gpu

Extra arguments are passed to ``scale.py`` (e.g. ``--sizes 1000000``).
On a machine without CUDA it stops with a message.
"""

from __future__ import annotations

import sys

import scale
import torch

GPU_DEFAULTS = [
    "--device", "cuda",
    "--threads", "8",
    "--step-sizes", "1000000", "10000000",
    "--sizes", "100000", "1000000", "10000000",
    "--precisions", "fp32", "bf16",
    "--datasets", "fertility", "flights",
    "--graph-space", "input",
    "--backend", "exact",
    "--max-epochs", "60",
]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not torch.cuda.is_available() and "--device" not in argv:
        sys.exit("benchmarks/gpu.py needs a CUDA device; run benchmarks/scale.py here.")
    scale.main([*GPU_DEFAULTS, *argv])  # later arguments override the defaults


if __name__ == "__main__":
    main()
