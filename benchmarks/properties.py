"""Estimator properties: nesting, synthetic gains, the heterogeneity test.

Parts (the first argument; each has its own ``--help``):

* ``nesting``: with ``local_penalty=inf`` the model is the GLM (its largest
  relative difference from scikit-learn's solution, per family), and the
  held-out gains on data with known varying coefficients
  (``benchmarks/_lib/nesting.py``);
* ``heterogeneity``: power and size of ``heterogeneity_test`` on data with
  known varying and constant terms (``benchmarks/_lib/heterogeneity.py``);
* ``intervals``: coverage of ``local_coef(X, interval=0.9)`` on data with
  known per-row coefficients, and its cost (``benchmarks/_lib/intervals.py``).

    python benchmarks/properties.py nesting --out benchmarks/results/estimators
    python benchmarks/properties.py heterogeneity --seeds 20 \\
        --out benchmarks/results/heterogeneity
    python benchmarks/properties.py intervals --out benchmarks/results/intervals
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # ``python benchmarks/X.py``: import ``benchmarks`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._lib import heterogeneity, intervals, nesting
from benchmarks._lib.common import dispatch

PARTS = {
    "nesting": nesting.main,
    "heterogeneity": heterogeneity.main,
    "intervals": intervals.main,
}


def main(argv: list[str] | None = None):
    """Run the part named by ``argv[0]`` with the remaining arguments."""
    return dispatch(argv, PARTS)


if __name__ == "__main__":
    sys.exit(main())
