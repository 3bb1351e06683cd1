"""Neighbour search: graph builds, the exact search's backends, training refreshes.

Parts (the first argument; each has its own ``--help``):

* ``build``: the exact (and with ``--approximate`` the approximate) kNN-graph
  build of ``cosine_topk`` against faiss and scikit-learn, time and peak
  memory per size (``benchmarks/_lib/graph_build.py``);
* ``exact``: the exact search on a CPU, faiss's exhaustive search against the
  tiled search (``benchmarks/_lib/exact_search.py``);
* ``refresh``: default fits whose embedding-graph refreshes search exactly
  against faiss IVF (``graph_backend="exact"`` against ``"auto"``;
  ``benchmarks/_lib/refresh_backend.py``).

    python benchmarks/neighbors.py build --out benchmarks/results/graph_build
    python benchmarks/neighbors.py build --approximate \\
        --out benchmarks/results/graph_build_approx
    python benchmarks/neighbors.py exact --sizes 3750:3400 18500:16700 20000:90000
    python benchmarks/neighbors.py refresh --out benchmarks/results/refresh_backend

Timings are for reading, never asserted in tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._lib import exact_search, graph_build, refresh_backend
from benchmarks._lib.common import dispatch

PARTS = {
    "build": graph_build.main,
    "exact": exact_search.main,
    "refresh": refresh_backend.main,
}


def main(argv: list[str] | None = None):
    """Run the part named by ``argv[0]`` with the remaining arguments."""
    return dispatch(argv, PARTS)


if __name__ == "__main__":
    main()
