"""Coverage and cost of ``local_coef(X, interval=...)`` on data with known truth.

Data: ``make_varying_coefficients`` (4 features, 3 latent groups, each with
its own coefficients), ``n_train`` rows to fit and ``n_test`` new rows of the
same groups to read. A model with ``interval_members`` bootstrap members is
fitted per family and seed; on the new rows the report gives, per family,

* coverage: the share of (row, term) pairs whose true coefficient lies in the
  nominal interval (all terms, and per term);
* the same for the linear predictor (``predict_linear`` against the true
  ``eta``, bounds from the members' linear predictors the same way), which
  the data identify, where the per-row coefficients are one choice among
  many that give the same ``eta``;
* the mean interval width, the root mean squared error of the coefficients,
  the members' mean standard deviation (a variance-only interval covers
  well only when the error is mostly variance) and the estimated bias
  (``interval_bias_``, root mean square over the terms; 0 with ``--bias
  none``);
* a seed whose model is the global GLM has no members: its intervals are the
  GLM's Wald intervals (``interval_cov_``), and its standard deviations of the
  coefficients and of ``eta`` come from that covariance;
* the width on rows moved 8 standard deviations away from the data, over the
  width on the new rows (> 1: wider away from the training data);
* cost: seconds of the plain fit (the model's own ``fit_times_["total"]`` less
  its ``interval_members`` and ``interval_bias`` phases), of the members
  (theirs, summed) and of the bias estimate
  (``estimate_interval_bias``, timed again after the fit); the whole ``fit``
  over the plain fit, and ``local_coef`` with ``interval`` over
  ``local_coef`` without.

``--bias`` and ``--pilot-rows-per-coef`` set ``IntervalSettings``;
``--local-penalty inf`` reads the global GLM's Wald intervals instead.

    python benchmarks/properties.py intervals --out benchmarks/results/intervals
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor, IntervalSettings
from autoglm_graph.datasets import make_varying_coefficients
from autoglm_graph.explain.intervals import estimate_interval_bias
from benchmarks._lib.common import command_line, to_markdown

FAMILIES = ("poisson", "binomial", "gaussian")
TERMS = ("intercept", "x0", "x1", "x2", "x3")


def run_seed(family: str, seed: int, args) -> dict:
    """Fit one model with members; coverage, widths and seconds on new rows."""
    n = args.n_train + args.n_test
    X, y, coef = make_varying_coefficients(n, 4, family=family, random_state=seed)
    eta = coef[:, 0] + np.einsum("ij,ij->i", X, coef[:, 1:])
    train, test = slice(0, args.n_train), slice(args.n_train, n)
    settings = IntervalSettings(
        bias=args.bias, pilot_rows_per_coef=args.pilot_rows_per_coef
    )
    kwargs = dict(
        interval_members=args.members, interval_settings=settings, random_state=seed
    )
    if args.local_penalty is not None:
        kwargs["local_penalty"] = args.local_penalty
    if family == "binomial":
        model = GraphGLMClassifier(**kwargs)
    else:
        model = GraphGLMRegressor(family=family, **kwargs)
    start = time.perf_counter()
    model.fit(X[train], y[train])
    fit_s = time.perf_counter() - start
    members_s = float(sum(m.fit_times_["total"] for m in model.interval_members_))
    start = time.perf_counter()  # the bias estimate of fit, timed again
    bias = estimate_interval_bias(model, X[train], y[train])
    bias_s = time.perf_counter() - start
    if bias is not None:  # the estimate is deterministic
        assert np.array_equal(bias, model.interval_bias_)
    times = model.fit_times_  # the estimator's own fit: less the intervals' phases
    plain_s = times["total"] - times["interval_members"] - times["interval_bias"]
    start = time.perf_counter()
    plain = model.local_coef(X[test]).to_numpy()
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    local = model.local_coef(X[test], interval=args.level)
    read_interval_s = time.perf_counter() - start
    lower, upper = local["lower"].to_numpy(), local["upper"].to_numpy()
    assert np.array_equal(local["coef"].to_numpy(), plain)
    inside = (coef[test] >= lower) & (coef[test] <= upper)
    coef_sd, eta_sd = _spread(model, X[test])
    eta_hat = _eta(model, X[test])
    z = norm.ppf((1 + args.level) / 2)
    eta_inside = np.abs(eta[test] - eta_hat) <= z * eta_sd
    direction = np.random.default_rng(seed).normal(size=X[test].shape)
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    far = model.local_coef(X[test] + 8.0 * direction, interval=args.level)
    width = (upper - lower).mean()
    return {
        "family": family,
        "seed": seed,
        "global only": f"{model.is_global_only_} / "
        f"{sum(m.is_global_only_ for m in model.interval_members_)} of "
        f"{len(model.interval_members_)}",
        "coverage": inside.mean(),
        **{f"cov {t}": inside[:, j].mean() for j, t in enumerate(TERMS)},
        "coverage eta": eta_inside.mean(),
        "width": width,
        "rmse": np.sqrt(((plain - coef[test]) ** 2).mean()),
        "members sd": coef_sd,
        "bias est": 0.0 if bias is None else float(np.sqrt(np.mean(bias**2))),
        "far / near width": (far["upper"] - far["lower"]).to_numpy().mean() / width,
        "plain fit s": plain_s,
        "members fit s": members_s,
        "bias s": bias_s,
        "fit cost": fit_s / plain_s,
        "local_coef cost": read_interval_s / read_s,
    }


def _spread(model, X) -> tuple[float, np.ndarray]:
    """The mean standard deviation of the coefficients and that of each row's
    linear predictor: over the bootstrap members, or, for a model that is the
    global GLM (no members), from its covariance ``interval_cov_``."""
    members = model.interval_members_
    if members:
        draws = np.stack([m.local_coef(X).to_numpy() for m in members])
        eta_sd = np.std([_eta(m, X) for m in members], 0, ddof=1)
        return float(draws.std(0, ddof=1).mean()), eta_sd
    cov = model.interval_cov_  # of local_coef's columns: intercept, x0, ...
    design = np.column_stack([np.ones(len(X)), X])
    eta_var = np.einsum("ij,jk,ik->i", design, cov, design)
    return float(np.sqrt(np.diag(cov)).mean()), np.sqrt(np.maximum(eta_var, 0.0))


def _eta(model, X) -> np.ndarray:
    return np.asarray(model.predict_linear(X)).reshape(len(X))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--bias", default="pilot", choices=("pilot", "none"))
    parser.add_argument("--pilot-rows-per-coef", type=int, default=15)
    parser.add_argument(
        "--local-penalty",
        type=float,
        default=None,
        help="the estimators' local_penalty (default: theirs); inf: the global GLM",
    )
    parser.add_argument("--out", type=Path, default=None, help="writes OUT.md")
    args = parser.parse_args(argv)
    rows = []
    for family in args.families:
        for seed in range(args.seeds):
            rows.append(run_seed(family, seed, args))
            print(to_markdown([_format(rows[-1])]).splitlines()[-1], flush=True)
    means = [_mean(rows, family) for family in args.families]
    text = "\n".join(
        [
            f"# local_coef intervals: coverage of the true coefficients "
            f"(nominal {args.level:.0%})",
            "",
            "    " + command_line("properties.py intervals", argv),
            "",
            f"make_varying_coefficients, 4 features, 3 groups; {args.n_train} "
            f"training rows, coverage on {args.n_test} new rows; "
            f"interval_members={args.members} (Bayesian bootstrap of the whole fit), "
            f"IntervalSettings(bias={args.bias!r}, "
            f"pilot_rows_per_coef={args.pilot_rows_per_coef}); "
            f"{args.seeds} seed(s) per family. Columns: see "
            "`benchmarks/_lib/intervals.py`.",
            "",
            "## Mean over seeds",
            "",
            to_markdown([_format(r) for r in means]),
            "",
            "## Per seed",
            "",
            to_markdown([_format(r) for r in rows]),
            "",
        ]
    )
    print(to_markdown([_format(r) for r in means]))
    if args.out is not None:
        args.out.with_suffix(".md").write_text(text)
    return 0


def _mean(rows: list[dict], family: str) -> dict:
    mine = [r for r in rows if r["family"] == family]
    numeric = [k for k, v in mine[0].items() if isinstance(v, float)]
    return {
        "family": family,
        **{k: float(np.mean([r[k] for r in mine])) for k in numeric},
    }


def _format(row: dict) -> dict:
    return {k: f"{v:.3g}" if isinstance(v, float) else v for k, v in row.items()}
