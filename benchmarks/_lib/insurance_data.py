"""The insurance portfolios: where they are, their columns, one task's data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "insurance"


@dataclass(frozen=True)
class Portfolio:
    """Where a portfolio's columns are (see the data card's README.md)."""

    file: str
    exposure: str
    count: str
    amount: str
    amount_is_average: bool
    features: tuple[str, ...]
    location: tuple[str, ...] = ()


PORTFOLIOS = {
    "belgian": Portfolio(
        "bemtpl97.parquet",
        "expo",
        "nclaims",
        "amount",
        False,
        (
            "coverage",
            "ageph",
            "sex",
            "bm",
            "power",
            "agec",
            "fuel",
            "use",
            "fleet",
            "long",
            "lat",
        ),
        location=("long", "lat"),
    ),
    "norwegian": Portfolio(
        "norauto.parquet",
        "Expo",
        "NbClaim",
        "ClaimAmount",
        True,
        ("Male", "Young", "DistLimit", "GeoRegion"),
    ),
    "australian": Portfolio(
        "ausprivauto.parquet",
        "Exposure",
        "ClaimNb",
        "ClaimAmount",
        False,
        ("VehValue", "VehAge", "VehBody", "Gender", "DrivAge"),
    ),
}


@dataclass
class Data:
    """One modelling task: features, target, weights, offset, exposure."""

    X: pd.DataFrame
    y: np.ndarray
    weight: np.ndarray  # the deviance's and the balance's row weights
    offset: np.ndarray | None
    family: str
    location: tuple[str, ...] = ()  # coordinate columns of X, if any

    def take(self, rows: np.ndarray) -> Data:
        return Data(
            self.X.iloc[rows].reset_index(drop=True),
            self.y[rows],
            self.weight[rows],
            None if self.offset is None else self.offset[rows],
            self.family,
            self.location,
        )


def load_task(folder: Path, name: str, task: str, subsample, seed: int) -> Data:
    """The frequency or severity data of a portfolio (subsampled policies)."""
    spec = PORTFOLIOS[name]
    frame = pd.read_parquet(folder / spec.file)
    if subsample is not None and subsample < len(frame):
        frame = frame.sample(n=subsample, random_state=seed).reset_index(drop=True)
    X = frame[list(spec.features)]
    count = frame[spec.count].to_numpy(np.float64)
    if task == "frequency":
        exposure = frame[spec.exposure].to_numpy(np.float64)
        return Data(
            X, count, np.ones(len(X)), np.log(exposure), "poisson", spec.location
        )
    amount = frame[spec.amount].to_numpy(np.float64)
    rows = (count > 0) & (amount > 0)
    average = amount[rows] if spec.amount_is_average else amount[rows] / count[rows]
    X = X[rows].reset_index(drop=True)
    return Data(X, average, count[rows], None, "gamma", spec.location)
