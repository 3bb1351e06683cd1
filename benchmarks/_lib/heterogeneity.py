"""Power and size of ``heterogeneity_test`` on data with known varying terms.

``make_varying_coefficients`` (3 latent groups, 4 features, Poisson) with the
slopes of ``x2`` and ``x3`` replaced by their mean, so that they are the same
on every row (constant terms), and the group-varying slopes of ``x0`` and
``x1`` (and the intercept) kept, their spread around the mean scaled by
``--amplitude``. Per seed: fit ``GraphGLMRegressor`` with its defaults on
``--n-train`` rows, test on ``--n-test`` held-out rows; a term is flagged when
its p-value is below ``--alpha``. Power: the share of (seed, varying term)
flagged; size: the share of (seed, constant term) flagged. Seeds whose model
is the global GLM count as not flagged.

By default the groups' centres differ in x0 and x1 only (``n_group_features=2``):
x2 and x3 are then independent of the group, and ``log E[y | x]`` is linear in
them with one slope, so flagging them is an error. With ``--centres all`` the
centres differ in every column: a row's group near a border depends on x2 and
x3, and so does the slope of ``log E[y | x]`` in them. The ``oracle`` columns
apply the test's linearisation to that true mean function (known here:
a mixture over the groups' posteriors): where the oracle is flagged, the
constant terms' slopes in the function that any model of x learns do vary.

``--family`` draws y from another family with the same linear predictor
(gaussian sd 1, gamma shape 1, Bernoulli); the oracle is only computed for
Poisson.

``--data categorical``: two numeric columns with the same group structure
(intercept, x0 and x1 vary), a categorical ``c`` of 3 levels with one effect
for every row (constant: ``c_a``, ``c_b``, ``c_c``) and a binary ``v`` whose
effect differs between the groups (varying: ``v_no``, ``v_yes``). A level's
test moves the rows at that level to another level (see
``autoglm_graph.explain.heterogeneity``); there is no oracle column.

    python benchmarks/properties.py heterogeneity --seeds 20 \\
        --out benchmarks/results/heterogeneity
    python benchmarks/properties.py heterogeneity --seeds 20 --centres all \\
        --out benchmarks/results/heterogeneity_all_centres
    python benchmarks/properties.py heterogeneity --seeds 20 --family gaussian \\
        --out benchmarks/results/heterogeneity_gaussian
    python benchmarks/properties.py heterogeneity --seeds 20 --family binomial \\
        --out benchmarks/results/heterogeneity_binomial
    python benchmarks/properties.py heterogeneity --seeds 20 --data categorical \\
        --out benchmarks/results/heterogeneity_categorical
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.utils import check_random_state

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.datasets._synthetic import _groups_and_centres
from autoglm_graph.explain.heterogeneity import (
    _summarise,
    _unit_deviance,
    _with_fitted_slope,
    heterogeneity_test,
)
from autoglm_graph.glm.families import PoissonFamily
from benchmarks._lib.common import command_line, to_markdown

VARYING = ("intercept", "x0", "x1")
CONSTANT = ("x2", "x3")
CATEGORICAL_VARYING = ("intercept", "x0", "x1", "v_no", "v_yes")
CATEGORICAL_CONSTANT = ("c_a", "c_b", "c_c")
N_GROUPS, N_FEATURES = 3, 4


def sample_y(family: str, eta: np.ndarray, seed: int) -> np.ndarray:
    """y given the linear predictor: Poisson, gamma (shape 1) with a log link,
    Bernoulli with a logit link, or gaussian (sd 1)."""
    rng = np.random.default_rng(seed)
    if family == "gaussian":
        return eta + rng.standard_normal(len(eta))
    if family == "binomial":
        return (rng.random(len(eta)) < 1 / (1 + np.exp(-eta))).astype(np.int64)
    if family == "gamma":
        return rng.gamma(1.0, np.exp(eta))
    return rng.poisson(np.exp(eta)).astype(float)


def make_data(
    n_samples: int,
    seed: int,
    amplitude: float = 2.0,
    separation: float = 3.0,
    centres: str = "varying",
    family: str = "poisson",
):
    """X, y (``family``), the true coefficients and the Poisson mixture's
    ``log E[y | x]`` (the oracle's function).

    ``centres="varying"``: the group centres differ in x0 and x1 only;
    ``"all"``: in every column (see the module docstring).
    """
    n_group_features = 2 if centres == "varying" else None
    X, _, coef, group = make_varying_coefficients(
        n_samples,
        N_FEATURES,
        n_groups=N_GROUPS,
        family="poisson",
        random_state=seed,
        group_separation=separation,
        return_groups=True,
        n_group_features=n_group_features,
    )
    coef = coef.copy()
    mean = coef[:, 1:3].mean(axis=0)
    coef[:, 1:3] = mean + amplitude * (coef[:, 1:3] - mean)
    coef[:, 3:] = coef[:, 3:].mean(axis=0)
    eta = coef[:, 0] + np.sum(X * coef[:, 1:], axis=1)
    y = sample_y(family, eta, seed)
    # The generator's first draws, replayed: the groups' centres.
    _, group_centres = _groups_and_centres(
        check_random_state(seed),
        n_samples,
        N_GROUPS,
        N_FEATURES,
        separation,
        n_group_features,
    )
    group_coef = np.stack([coef[group == g][0] for g in range(N_GROUPS)])

    def log_mean(Z: np.ndarray) -> np.ndarray:
        """log E[y | x]: the groups' means weighted by their posteriors."""
        log_post = -0.5 * ((Z[:, None, :] - group_centres[None]) ** 2).sum(-1)
        log_post -= logsumexp(log_post, axis=1, keepdims=True)
        return logsumexp(log_post + group_coef[:, 0] + Z @ group_coef[:, 1:].T, 1)

    return X, y, coef, log_mean


def oracle_p_values(log_mean, X, y) -> dict:
    """The test's slope p-values for the true mean function on ``X, y``: each
    column's null moves it to its median and refits one global slope, as the
    test does for a numeric column."""
    family, weight = PoissonFamily(), np.ones(len(y))
    deviance = _unit_deviance(family, y, log_mean(X)[:, None])
    gains = []
    for j in range(X.shape[1]):
        moved = X.copy()
        moved[:, j] = np.median(X[:, j])
        step = (X[:, j] - moved[:, j])[:, None]
        eta_null = _with_fitted_slope(
            family, log_mean(moved)[:, None], step, np.zeros(1), y, weight
        )
        gains.append(_unit_deviance(family, y, eta_null) - deviance)
    p_values = _summarise(np.stack(gains), weight, alpha=0.05)["p_value"]
    return {f"x{j}": float(p) for j, p in enumerate(p_values)}


def make_categorical_data(n_samples: int, seed: int):
    """A frame with x0, x1 (varying), ``c`` (constant) and ``v`` (varying), y."""
    X, _, coef, group = make_varying_coefficients(
        n_samples,
        2,
        n_groups=N_GROUPS,
        family="poisson",
        random_state=seed,
        return_groups=True,
    )
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 3, n_samples)
    v = rng.integers(0, 2, n_samples)
    eta = coef[:, 0] + np.sum(X * coef[:, 1:], axis=1)
    eta += np.array([0.0, 0.4, -0.4])[c] + np.array([-0.8, 0.0, 0.8])[group] * v
    frame = pd.DataFrame(
        {
            "x0": X[:, 0],
            "x1": X[:, 1],
            "c": pd.Categorical(np.array(["a", "b", "c"])[c]),
            "v": pd.Categorical(np.array(["no", "yes"])[v]),
        }
    )
    return frame, rng.poisson(np.exp(eta)).astype(float)


def run_seed(
    seed,
    n_train,
    n_test,
    amplitude,
    alpha,
    separation=3.0,
    centres="varying",
    data="groups",
    family="poisson",
):
    """The fitted model, its test table and the oracle's p-values (or None:
    the oracle is the Poisson mixture's)."""
    if data == "categorical":
        X, y = make_categorical_data(n_train + n_test, seed)
    else:
        X, y, _, log_mean = make_data(
            n_train + n_test, seed, amplitude, separation, centres, family
        )
    if family == "binomial":
        model = GraphGLMClassifier(random_state=seed, n_jobs=1)
    else:
        model = GraphGLMRegressor(family=family, random_state=seed, n_jobs=1)
    model.fit(X[:n_train], y[:n_train])
    table = heterogeneity_test(model, X[n_train:], y[n_train:], alpha=alpha)
    if data == "categorical" or family != "poisson":
        return model, table, None
    table.index = ["intercept", "x0", "x1", "x2", "x3"]
    oracle = oracle_p_values(log_mean, X[n_train:], y[n_train:])
    return model, table, oracle


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--amplitude", type=float, default=2.0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--separation", type=float, default=3.0)
    parser.add_argument(
        "--centres",
        choices=("varying", "all"),
        default="varying",
        help="columns in which the group centres differ (see the docstring)",
    )
    parser.add_argument("--data", choices=("groups", "categorical"), default="groups")
    parser.add_argument(
        "--family",
        choices=("poisson", "gaussian", "gamma", "binomial"),
        default="poisson",
        help="of the groups data (categorical data are Poisson)",
    )
    parser.add_argument("--out", type=Path, default=None, help="writes OUT.md")
    args = parser.parse_args(argv)
    varying, constant = VARYING, CONSTANT
    if args.data == "categorical":
        varying, constant = CATEGORICAL_VARYING, CATEGORICAL_CONSTANT
    rows, flagged = [], {"varying": [], "constant": [], "oracle": []}
    p_values = {"varying": [], "constant": []}
    for seed in range(args.seeds):
        start = time.perf_counter()
        model, table, oracle = run_seed(
            seed,
            args.n_train,
            args.n_test,
            args.amplitude,
            args.alpha,
            args.separation,
            args.centres,
            args.data,
            args.family,
        )
        flagged["varying"] += [bool(table.loc[t, "varies"]) for t in varying]
        flagged["constant"] += [bool(table.loc[t, "varies"]) for t in constant]
        if oracle is not None:
            flagged["oracle"] += [oracle[t] < args.alpha for t in constant]
        for kind, terms in (("varying", varying), ("constant", constant)):
            p_values[kind] += [float(table.loc[t, "p_value"]) for t in terms]
        rows.append(
            {
                "seed": seed,
                "global only": model.is_global_only_,
                **{f"p {t}": f"{table.loc[t, 'p_value']:.3f}" for t in table.index},
                **{f"oracle p {t}": f"{oracle[t]:.3f}" for t in constant if oracle},
                "seconds": f"{time.perf_counter() - start:.1f}",
            }
        )
        print(to_markdown(rows[-1:]).splitlines()[-1], flush=True)
    power = np.mean(flagged["varying"])
    size = np.mean(flagged["constant"])
    summary = (
        f"power (varying terms flagged, {len(flagged['varying'])} cases): "
        f"{power:.2f}; size (constant terms flagged, {len(flagged['constant'])} "
        f"cases): {size:.2f}; alpha={args.alpha}"
    )
    if flagged["oracle"]:
        summary += (
            ". The true mean function's constant terms flagged by the same "
            f"linearisation (oracle): {np.mean(flagged['oracle']):.2f}"
        )
    # Seeds whose model is the global GLM have p-values 1: never flagged.
    stricter = "; ".join(
        f"alpha={level}: power {np.mean(np.array(p_values['varying']) < level):.2f}, "
        f"size {np.mean(np.array(p_values['constant']) < level):.2f}"
        for level in (0.01, 0.001)
    )
    text = "\n".join(
        [
            "# heterogeneity_test: power and size",
            "",
            "    " + command_line("properties.py heterogeneity", argv),
            "",
            f"{args.n_train} training and {args.n_test} test rows per seed, "
            + (
                "data with a categorical column (see the docstring); "
                if args.data == "categorical"
                else f"slope spread x{args.amplitude}, group separation "
                f"{args.separation}, group centres differ in {args.centres} "
                f"columns, {args.family}; "
            )
            + f"varying: {', '.join(varying)}; constant: {', '.join(constant)}.",
            "",
            summary,
            "",
            f"From the same p-values: {stricter}.",
            "",
            to_markdown(rows),
            "",
        ]
    )
    print(summary)
    if args.out is not None:
        args.out.with_suffix(".md").write_text(text)
    return 0
