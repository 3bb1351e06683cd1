"""The corpus runner's aggregates, decision rule and tables (``benchmarks/corpus.py``).

A fit record is a dict with ``dataset``, ``split``, ``model``, ``status``
("ok", "n/a" or "error"), ``score`` (the family's mean test deviance;
log-loss for classifiers) and ``fit_s``. Comparisons of a model with a
reference are made per dataset first, then over datasets:

- a dataset's ratio is the geometric mean over its splits of the per-split
  ratio model / reference (only the splits both fitted), so that a split is
  compared with the same split;
- the aggregate is the geometric mean of the datasets' ratios, so that no
  dataset's scale dominates, with a percentile bootstrap interval over
  datasets (:data:`RESAMPLES` resamples of the datasets with replacement, seed
  :data:`BOOTSTRAP_SEED`);
- a win is a dataset whose ratio is below 1.

The decision rule (:func:`decide`): a candidate replaces the baseline when
its geometric-mean deviance ratio is below 1 with the interval's upper end
below 1, and its median fit-time ratio is at most ``1.2 ** gain`` with
``gain`` the deviance gain in per cent (1.2x the time for each 1 % gained).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from benchmarks._lib.common import to_markdown

RESAMPLES = 2000
BOOTSTRAP_SEED = 0
LEVEL = 0.95
#: Allowed growth of the median fit time for each 1 % of deviance gained.
TIME_PER_PERCENT = 1.2


# -------------------------------------------------------------- aggregates


def split_values(records: list[dict], key: str = "score") -> dict:
    """``model -> dataset -> split -> value`` of the fits that succeeded."""
    values: dict = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r["status"] == "ok" and r.get(key) is not None:
            values[r["model"]][r["dataset"]][r["split"]] = float(r[key])
    return values


def dataset_ratios(values: dict, model: str, reference: str) -> dict[str, float]:
    """Per dataset, the geometric mean over the splits both fitted of the
    ratio ``model / reference`` (datasets without a common split are left
    out)."""
    ours, theirs = values.get(model, {}), values.get(reference, {})
    ratios = {}
    for dataset, splits in ours.items():
        common = sorted(set(splits) & set(theirs.get(dataset, {})))
        if common:
            logs = [np.log(splits[s] / theirs[dataset][s]) for s in common]
            ratios[dataset] = float(np.exp(np.mean(logs)))
    return ratios


def geometric_mean(values) -> float:
    """The geometric mean of positive numbers (NaN for none)."""
    values = np.asarray(list(values), dtype=float)
    return float(np.exp(np.mean(np.log(values)))) if len(values) else np.nan


def bootstrap_interval(
    ratios, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, level=LEVEL
) -> tuple[float, float]:
    """Percentile interval of the geometric mean of ``ratios`` over resamples
    of them (the datasets) with replacement."""
    logs = np.log(np.asarray(list(ratios), dtype=float))
    if len(logs) == 0:
        return np.nan, np.nan
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, len(logs), size=(resamples, len(logs)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(np.exp(low)), float(np.exp(high))


def comparison(ratios: dict[str, float]) -> dict:
    """Geometric mean, bootstrap interval, wins (ratio < 1) and count of the
    datasets' ratios."""
    low, high = bootstrap_interval(ratios.values())
    return {
        "ratio": geometric_mean(ratios.values()),
        "low": low,
        "high": high,
        "wins": int(sum(r < 1 for r in ratios.values())),
        "datasets": len(ratios),
    }


def median_seconds(values: dict, model: str) -> float:
    """Median over datasets of a model's mean fit seconds over splits."""
    means = [np.mean(list(s.values())) for s in values.get(model, {}).values()]
    return float(np.median(means)) if means else np.nan


# ------------------------------------------------------------ decision rule


def decide(ratio: float, high: float, time_ratio: float) -> tuple[bool, str]:
    """The project's rule for a candidate against the baseline.

    Parameters
    ----------
    ratio, high : float
        Geometric-mean deviance ratio candidate / baseline and the upper end
        of its bootstrap interval.
    time_ratio : float
        Median over datasets of the fit-time ratio candidate / baseline.

    Returns
    -------
    adopt : bool
    reason : str
        Why not, or the allowance met.
    """
    if not np.isfinite(ratio) or not np.isfinite(high):
        return False, "no dataset compared"
    gain = (1 - ratio) * 100
    allowed = TIME_PER_PERCENT**gain
    if ratio >= 1:
        return False, "no deviance gain"
    if high >= 1:
        return False, f"the {LEVEL:.0%} interval reaches 1"
    if time_ratio > allowed:
        return False, (
            f"median fit-time ratio {time_ratio:.2f} above the {allowed:.2f} "
            f"allowed for a {gain:.2f} % gain"
        )
    return True, f"median fit-time ratio {time_ratio:.2f} within {allowed:.2f}"


def verdict(values: dict, seconds: dict, candidate: str, baseline: str) -> dict:
    """The decision rule's numbers and its line for ``candidate``."""
    found = comparison(dataset_ratios(values, candidate, baseline))
    times = dataset_ratios(seconds, candidate, baseline)
    time_ratio = float(np.median(list(times.values()))) if times else np.nan
    adopt, reason = decide(found["ratio"], found["high"], time_ratio)
    line = (
        f"- **{'adopt' if adopt else 'keep the baseline'}**: `{candidate}` "
        f"against `{baseline}`: deviance ratio {found['ratio']:.4f} "
        f"[{found['low']:.4f}, {found['high']:.4f}] over {found['datasets']} "
        f"datasets (lower on {found['wins']}), median fit-time ratio "
        f"{time_ratio:.2f}; {reason}."
    )
    return {
        **found,
        "candidate": candidate,
        "baseline": baseline,
        "time_ratio": time_ratio,
        "adopt": adopt,
        "line": line,
    }


# ------------------------------------------------------------------ tables


def _interval(found: dict) -> str:
    if not found["datasets"]:
        return "-"
    return f"{found['ratio']:.4f} [{found['low']:.4f}, {found['high']:.4f}]"


def summary_rows(
    records: list[dict], models: list[str], glm: str, lightgbm: str
) -> list[dict]:
    """One row per model: its ratios to ``glm`` and ``lightgbm``, wins, fit
    seconds, and how often a GraphGLM kept its network."""
    values, seconds = split_values(records), split_values(records, "fit_s")
    rows = []
    for model in models:
        row = {"model": model, "datasets": len(values.get(model, {}))}
        for name, reference in (("GLM", glm), ("LightGBM", lightgbm)):
            found = comparison(dataset_ratios(values, model, reference))
            row[f"deviance / {name} [95 %]"] = _interval(found)
            row[f"wins vs {name}"] = (
                f"{found['wins']} / {found['datasets']}" if found["datasets"] else "-"
            )
        row["median fit s"] = f"{median_seconds(seconds, model):.2f}"
        times = dataset_ratios(seconds, model, lightgbm)
        row["fit s / LightGBM (geo-mean)"] = (
            f"{geometric_mean(times.values()):.2f}" if times else "-"
        )
        row["max fit s / LightGBM"] = f"{max(times.values()):.2f}" if times else "-"
        kept = [
            r["kept"]
            for r in records
            if r["model"] == model and r.get("kept") is not None
        ]
        row["network kept"] = f"{sum(kept)} / {len(kept)}" if kept else "-"
        rows.append(row)
    return rows


def dataset_rows(
    records: list[dict],
    datasets: list[dict],
    models: list[str],
    key: str,
    digits: int = 5,
) -> list[dict]:
    """One row per dataset (``datasets``: dicts with ``dataset``, ``family``,
    ``n_train``, ``n_test``): each model's mean ``key`` over its splits, or its
    status when no split succeeded (``digits`` significant digits)."""
    values = split_values(records, key)
    status = {(r["dataset"], r["model"]): r["status"] for r in records}
    rows = []
    for info in datasets:
        row = dict(info)
        for model in models:
            splits = values.get(model, {}).get(info["dataset"])
            row[model] = (
                f"{np.mean(list(splits.values())):.{digits}g}"
                if splits
                else status.get((info["dataset"], model), "-")
            )
        rows.append(row)
    return rows


def markdown_body(
    records: list[dict],
    datasets: list[dict],
    models: list[str],
    references: tuple[str, str],
    verdicts: list[dict],
) -> list[str]:
    """The record's tables: summary, verdicts, then per dataset the test
    deviance and the fit seconds."""
    body = [
        "## Summary",
        "",
        f"Geometric means over datasets of each dataset's ratio (the geometric "
        f"mean over its splits of the per-split ratio) to the GLM "
        f"(`{references[0]}`) and to LightGBM's defaults (`{references[1]}`), "
        f"with {LEVEL:.0%} bootstrap intervals ({RESAMPLES} resamples of the "
        f"datasets, seed {BOOTSTRAP_SEED}); a win is a dataset whose ratio is "
        "below 1; median fit s is the median over datasets of the split-mean "
        "fit seconds.",
        "",
        to_markdown(summary_rows(records, models, *references)),
        "",
    ]
    if verdicts:
        body += [
            "## Decision rule",
            "",
            f"Adopt when the deviance ratio is below 1 with its interval below 1, "
            f"and the median fit-time ratio is at most {TIME_PER_PERCENT} ** "
            "(gain in %).",
            "",
            *(v["line"] for v in verdicts),
            "",
        ]
    body += [
        "## Test deviance per dataset (mean over splits; log-loss for classifiers)",
        "",
        to_markdown(dataset_rows(records, datasets, models, "score")),
        "",
        "## Fit seconds per dataset (mean over splits)",
        "",
        to_markdown(dataset_rows(records, datasets, models, "fit_s", digits=3)),
    ]
    notes = [
        f"- `{r['model']}` on `{r['dataset']}` split {r['split']}: {r['status']}: "
        f"{r['note']}"
        for r in records
        if r["status"] != "ok"
    ]
    return [*body, *(["", "## Fits that did not score", "", *notes] if notes else [])]
