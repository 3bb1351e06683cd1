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
from scipy import stats
from scipy.special import logsumexp
from sklearn.utils import check_random_state

from autoglm_graph import (
    GraphGLMClassifier,
    GraphGLMRegressor,
    get_family,
    heterogeneity_test,
)
from autoglm_graph.datasets import make_varying_coefficients
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
    group_centres = replay_centres(seed, group, separation, n_group_features)
    group_coef = np.stack([coef[group == g][0] for g in range(N_GROUPS)])

    def log_mean(Z: np.ndarray) -> np.ndarray:
        """log E[y | x]: the groups' means weighted by their posteriors."""
        log_post = -0.5 * ((Z[:, None, :] - group_centres[None]) ** 2).sum(-1)
        log_post -= logsumexp(log_post, axis=1, keepdims=True)
        return logsumexp(log_post + group_coef[:, 0] + Z @ group_coef[:, 1:].T, 1)

    return X, y, coef, log_mean


def replay_centres(seed, group, separation, n_group_features) -> np.ndarray:
    """The groups' centres of ``make_varying_coefficients(random_state=seed)``.

    The generator returns the rows' groups but not the centres; they are its
    first draws after the groups' permutation, replayed here (its documented
    construction: standard normal centres, centred, scaled so that the closest
    pair is ``separation`` apart, in the first ``n_group_features`` columns).
    The replayed groups must equal the returned ones, or the draws moved.
    """
    rng = check_random_state(seed)
    n_samples = len(group)
    replayed = rng.permutation(np.arange(n_samples) % N_GROUPS)
    if not np.array_equal(replayed, group):
        raise RuntimeError(
            "make_varying_coefficients draws its groups differently now; "
            "the oracle's replay of its centres needs updating."
        )
    n_varying = N_FEATURES if n_group_features is None else n_group_features
    centres = np.zeros((N_GROUPS, N_FEATURES))
    draws = rng.standard_normal((N_GROUPS, n_varying))
    draws -= draws.mean(axis=0)
    dist = np.linalg.norm(draws[:, None, :] - draws[None, :, :], axis=-1)
    closest = dist[np.triu_indices(N_GROUPS, k=1)].min()
    centres[:, :n_varying] = draws * (separation / closest)
    return centres


def fitted_slope_eta(base: np.ndarray, step: np.ndarray, y: np.ndarray):
    """``base + s * step`` with the slope ``s`` of least Poisson deviance
    (``base``: the moved rows' log mean, an offset).

    Newton's method on the convex deviance, halving a step that does not
    lower it, to machine precision.
    """
    family = get_family("poisson")

    def deviance(slope: float) -> float:
        with np.errstate(over="ignore"):  # a step too far: inf, then halved
            return float(np.sum(family.unit_deviance(y, base + slope * step)))

    slope, current = 0.0, deviance(0.0)
    for _ in range(100):
        mu = np.exp(base + slope * step)
        update = np.sum(step * (mu - y)) / max(np.sum(step**2 * mu), 1e-300)
        while deviance(slope - update) > current and abs(update) > 1e-15:
            update /= 2
        slope -= update
        current = deviance(slope)
        if abs(update) <= 1e-13 * (1.0 + abs(slope)):
            break
    return base + slope * step


def gain_p_values(gains: np.ndarray) -> np.ndarray:
    """One-sided p-value of each row's mean deviance gain being 0 (the test's
    normal approximation: the mean over rows and its standard error)."""
    mean = gains.mean(axis=1)
    std_err = gains.std(axis=1, ddof=1) / np.sqrt(gains.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(std_err > 0, mean / std_err, np.where(mean > 0, np.inf, -np.inf))
    return stats.norm.sf(z)


def oracle_p_values(log_mean, X, y) -> dict:
    """The test's slope p-values for the true mean function on ``X, y``: each
    column's null moves it to its median and refits one global slope, as the
    test does for a numeric column (unit weights)."""
    family = get_family("poisson")
    y = np.asarray(y, dtype=np.float64)
    deviance = family.unit_deviance(y, log_mean(X))
    gains = []
    for j in range(X.shape[1]):
        moved = X.copy()
        moved[:, j] = np.median(X[:, j])
        eta_null = fitted_slope_eta(log_mean(moved), X[:, j] - moved[:, j], y)
        gains.append(family.unit_deviance(y, eta_null) - deviance)
    p_values = gain_p_values(np.stack(gains))
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


def parse_args(argv: list[str]) -> argparse.Namespace:
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
    return parser.parse_args(argv)


def summarise(args, flagged: dict, p_values: dict) -> tuple[str, str]:
    """The power and size at ``alpha`` (and the oracle's), and at 0.01, 0.001."""
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
    return summary, stricter


def report_text(args, argv, rows, terms, summaries) -> str:
    """The markdown record: the command, the data, the summaries, the seeds."""
    (varying, constant), (summary, stricter) = terms, summaries
    return "\n".join(
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


def main(argv: list[str]) -> int:
    args = parse_args(argv)
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
    summary, stricter = summarise(args, flagged, p_values)
    text = report_text(args, argv, rows, (varying, constant), (summary, stricter))
    print(summary)
    if args.out is not None:
        args.out.with_suffix(".md").write_text(text)
    return 0
