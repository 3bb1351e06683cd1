"""Shared fixtures for the autoglm_graph test suite."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from autoglm_graph.datasets import make_varying_coefficients

N_ROWS = 200


@pytest.fixture
def mixed_frame() -> pd.DataFrame:
    """A small seeded table with every column kind the preprocessor handles.

    Columns
    -------
    age : float64, no missing values.
    income : float64, about 10 % NaN.
    visits : int64.
    region : object dtype; levels north/south/east/west, about 10 % NaN and a
        rare level "island" in exactly one row.
    plan : pandas ``category`` dtype (basic/plus/pro) with a few NaN.
    member : bool.
    const : float64, constant 1.0.
    """
    rng = np.random.default_rng(0)
    income = rng.lognormal(mean=10.0, sigma=0.5, size=N_ROWS)
    income[rng.random(N_ROWS) < 0.1] = np.nan
    region = rng.choice(["north", "south", "east", "west"], size=N_ROWS).astype(object)
    region[rng.random(N_ROWS) < 0.1] = np.nan
    region[7] = "island"
    plan = pd.Categorical(
        rng.choice(["basic", "plus", "pro"], size=N_ROWS),
        categories=["basic", "plus", "pro"],
    )
    plan[rng.random(N_ROWS) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "age": rng.normal(45.0, 12.0, size=N_ROWS),
            "income": income,
            "visits": rng.poisson(3.0, size=N_ROWS).astype(np.int64),
            "region": pd.Series(region, dtype=object),
            "plan": plan,
            "member": rng.random(N_ROWS) < 0.4,
            "const": np.ones(N_ROWS),
        }
    )


@pytest.fixture
def mixed_target(mixed_frame: pd.DataFrame) -> np.ndarray:
    """A strictly positive float64 target of shape (200,) that depends on
    ``mixed_frame`` (usable with Gaussian, Poisson, Gamma and Tweedie models)."""
    rng = np.random.default_rng(1)
    X = mixed_frame
    eta = (
        0.5
        + 0.02 * (X["age"] - 45.0)
        + 0.3 * np.log(X["income"].fillna(X["income"].median()) / 22000.0)
        + 0.1 * X["visits"]
        + 0.4 * (X["region"] == "north")
        + 0.3 * X["member"]
    ).to_numpy(dtype=np.float64)
    return np.exp(eta + rng.normal(0.0, 0.2, size=len(X)))


@pytest.fixture(scope="module")
def poisson_600() -> tuple[np.ndarray, np.ndarray]:
    """600 rows of a Poisson GLM whose coefficients vary between groups of rows
    (the small fit of the training, checkpoint and random-stream tests)."""
    X, y, _ = make_varying_coefficients(600, 3, family="poisson", random_state=0)
    return X, y


def pytest_collection_modifyitems(config, items):
    """Test ids must be the same in every process (pytest-xdist compares them):
    an object's default repr carries its memory address."""
    unstable = [
        item.nodeid for item in items if re.search(r" at 0x[0-9a-f]+", item.nodeid)
    ]
    if unstable:
        raise pytest.UsageError(
            "Test ids that hold a memory address differ between processes; give "
            f"these parametrizations ids: {unstable[:5]}"
        )
