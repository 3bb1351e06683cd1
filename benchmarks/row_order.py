"""Does the order of the training rows change the cost of a step? (#13)

A training step's sparse products (the attention's CSR product, its
transpose, the sampled product and the gather of the transposed values) read
the source rows at the positions the neighbour lists name. In the rows' given
order those reads land anywhere in ``[n, 64]`` tensors of several MB; in an
order where neighbours sit close together, most of them hit the cache. In
isolation (a microbenchmark not kept here; ``row_order.md``), at 16.7k rows x 4
heads x k = 16, the CSR product took 1.5 ms against 3.0 ms when every
neighbour lay within 300 positions, the values' gather 1.9 against 4.7 ms
and the sampled product 3.9 against 7.1 ms.

This measures what that is worth in a whole step: the default network's
full-batch training step (``step_ab.make_step``: dropout 0.1, fused AdamW)
on ``make_varying_coefficients`` rows (d = 12, standardised) and their exact
input-space graph (k = 16), with the rows and the graph permuted to

- ``given``: the generator's order (independent rows, so a random one);
- ``rcm``: the reverse Cuthill-McKee order of the symmetrised graph (scipy);
- ``kmeans``: sorted by a ``MiniBatchKMeans`` label, sqrt(n) clusters
  (scikit-learn).

The orders' steps alternate in rounds in one process; the table gives each
one's median step and its ratio to ``given``.

    python benchmarks/row_order.py --sizes 3750 15000 40000 \\
        --out benchmarks/results/row_order
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

N_FEATURES = 12
K = 16


def orders(X: np.ndarray, indices: np.ndarray, seed: int = 0) -> dict:
    """Each order's permutation of the rows (``order[new] = old``)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee
    from sklearn.cluster import MiniBatchKMeans

    n = X.shape[0]
    ones = np.ones(indices.size)
    starts = np.arange(0, indices.size + 1, indices.shape[1])
    adjacency = sp.csr_matrix((ones, indices.ravel(), starts), shape=(n, n))
    rcm = reverse_cuthill_mckee((adjacency + adjacency.T).tocsr(), True)
    clusters = int(np.sqrt(n))
    labels = MiniBatchKMeans(clusters, random_state=seed, n_init=1).fit_predict(X)
    return {
        "given": np.arange(n),
        "rcm": np.ascontiguousarray(rcm, dtype=np.int64),
        "kmeans": np.argsort(labels, kind="stable"),
    }


def permute(context, graph, order: np.ndarray):
    """The rows in ``order`` and their graph, its indices renumbered to match."""
    from autoglm_graph.graph import NeighborGraph

    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))  # old row -> new position
    rows = torch.from_numpy(order)
    indices = torch.from_numpy(position[graph.indices.numpy()])[rows]
    permuted = NeighborGraph(indices, graph.similarities[rows], graph.mask[rows])
    return context[rows], permuted


def make_ordered_step(context, graph, order: np.ndarray, seed: int = 0):
    """A closure running one training step on the rows permuted by ``order``."""
    from step_ab import make_step

    import autoglm_graph

    step, _ = make_step(
        autoglm_graph,
        context.shape[0],
        N_FEATURES,
        seed,
        rows=permute(context, graph, order),
    )
    return step


def compare(n: int, repeats: int) -> list[dict]:
    """Median step of each order at ``n`` rows, alternating in rounds."""
    from autoglm_graph.datasets import make_varying_coefficients
    from autoglm_graph.graph import cosine_topk

    X, _, _ = make_varying_coefficients(
        n, N_FEATURES, 4, family="gaussian", noise=0.5, random_state=0
    )
    X = np.asarray(X, dtype=np.float32)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    context = torch.from_numpy(X)
    graph = cosine_topk(context, n_neighbors=K)
    steps = {
        name: make_ordered_step(context, graph, order)
        for name, order in orders(X, graph.indices.numpy()).items()
    }
    for step in steps.values():  # warm-up: first-touch allocations
        for _ in range(3):
            step()
    seconds = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            seconds[name].append(step())
    given = statistics.median(seconds["given"])
    return [
        {
            "rows": n,
            "order": name,
            "step ms": round(statistics.median(times) * 1e3, 1),
            "ratio to given": round(statistics.median(times) / given, 3),
        }
        for name, times in seconds.items()
    ]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3750, 15000])
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md")
    args = parser.parse_args(argv)
    from _common import cpu_name, to_markdown, write_record

    torch.set_num_threads(args.threads)
    rows = []
    for n in args.sizes:
        rows += compare(n, args.repeats)
        print(rows[-3:], flush=True)
    write_record(
        "Training-step cost by the order of the rows",
        "python benchmarks/row_order.py " + shlex.join(argv or sys.argv[1:]),
        f"Machine: {cpu_name()}, {args.threads} torch thread(s).",
        [to_markdown(rows)],
        args.out,
    )
    return rows


if __name__ == "__main__":
    main()
