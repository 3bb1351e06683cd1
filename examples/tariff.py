"""
A claim-frequency tariff: relativities per rating factor, with constraints.
===========================================================================

Run:  python examples/tariff.py [factors.csv] [--data DIR]    (about 20-40 s)

A Poisson GLM of claim counts with the offset ``log(exposure)`` on a motor
portfolio (``norauto``, CASdatasets: driver sex and age class, distance
limit, region; read from ``../shared/data/insurance/`` beside the repository,
or ``--data``), written as a formula whose left side names the claim counts
in the frame, and whose coefficients the graph network lets vary per policy,
under two constraints a pricing actuary would put on them:

- ``global_terms=["Male", "Young"]``: the driver's sex and age class are
  protected factors, so their coefficients are the same for every policy (the
  network gives them no deviation);
- ``local_sign`` on the term of "no limit": the surcharge of a contract
  without a distance limit may vary between policies but never turns into a
  discount. It is a surcharge against the tightest limit, 8,000 km, made the
  base level in the formula (``contr.treatment('8000 km')``).

The factor table (one row per rating factor and level: relativity
``exp(coef)`` with its 95 % interval, policies and exposure at the level, and
the spread of the per-policy relativities) is printed and written to CSV, to
the path given on the command line or to a temporary folder.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from autoglm_graph import GraphGLMRegressor

REPO = Path(__file__).resolve().parent.parent
N_POLICIES = 20_000
FACTORS = ["Male", "Young", "DistLimit", "GeoRegion"]
DISTANCE = "C(DistLimit, contr.treatment('8000 km'))"
FORMULA = f"NbClaim ~ Male + Young + {DISTANCE} + GeoRegion"
UNLIMITED = f"{DISTANCE}[T.no limit]"  # the formula's name of that term

parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
parser.add_argument("output", nargs="?", help="CSV file for the factor table")
parser.add_argument(
    "--data",
    type=Path,
    default=REPO.parent / "shared" / "data" / "insurance",
    help="folder holding norauto.parquet",
)
args = parser.parse_args()

path = args.data / "norauto.parquet"
if not path.exists():
    print(
        f"The insurance data is not here ({path}); this example needs "
        "norauto.parquet (CASdatasets), e.g. with --data DIR. Nothing to do."
    )
    sys.exit(0)

data = pd.read_parquet(path).sample(N_POLICIES, random_state=0)
X = data[[*FACTORS, "NbClaim"]]
claims = data["NbClaim"].to_numpy()
offset = np.log(data["Expo"].to_numpy())
print(
    f"{len(X)} policies, {data['Expo'].sum():.0f} policy-years, {claims.sum()} claims"
)

model = GraphGLMRegressor(
    family="poisson",
    formula=FORMULA,
    global_terms=["Male", "Young"],
    local_sign={UNLIMITED: "positive"},
    max_epochs=30,
    random_state=0,
)
start = time.perf_counter()
model.fit(X, offset=offset)  # y is the formula's left side
print(f"fitted in {time.perf_counter() - start:.1f} s; ", end="")
if model.is_global_only_:
    print(f"the model is the global GLM ({model.global_only_reason_})")
else:
    print(f"the network was kept (best epoch {model.best_epoch_})")

local = model.local_coef(X)
unlimited = local[UNLIMITED]
print(
    f"per-policy coefficient of Male: spread {np.ptp(local['Male']):.1e} (held "
    f"global); of DistLimit 'no limit': {unlimited.min():.3f} to "
    f"{unlimited.max():.3f} (kept positive)"
)

table = model.factor_table(X, claims, offset=offset)
shown = ["term", "level", "relativity", "relativity_ci_lower", "relativity_ci_upper"]
shown += ["rows", "exposure", "local_q05", "local_q95"]
with pd.option_context("display.width", 140, "display.precision", 3):
    print(table[shown].to_string(index=False))

output = Path(args.output) if args.output else Path(tempfile.mkdtemp()) / "factors.csv"
table.to_csv(output, index=False)
print(f"factor table written to {output}")
