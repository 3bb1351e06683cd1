"""Summaries, ranks, markdown and the plot of ``benchmarks/run.py``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

METRICS = ("deviance", "d2", "log_loss", "accuracy", "fit_s", "predict_s")
# Deviances are compared (ranks, wins) at the precision the table shows, so that
# equal cells are ties: glum, scikit-learn and our global GLM agree to ~1e-6.
SIGNIFICANT_DIGITS = 4
# The opt-in peers (run.py --models) with columns in the fit-cost table.
PEERS = ("lightgbm_tuned", "ebm")
REFERENCE = "graphglm_global"
# Plotted ratio range; points outside are drawn on its edge.
PLOT_RANGE = (0.05, 4.0)
METHOD_NOTES = """\
All models but GraphGLM, LightGBM (plain and tuned) and EBM see the output of
`autoglm_graph.TabularPreprocessor` (standardised numeric columns, one-hot
categories, imputation); GraphGLM does this itself, LightGBM and EBM read the
DataFrame with pandas categories. The GLMs share GraphGLM's L2 penalty (alpha = 1e-4 in
scikit-learn's scaling). Models without an offset (scikit-learn's GLMs, MLP,
k-NN) are fitted on `y / exposure` (GLMs with weight `exposure ** (2 - power)`)
and predict `rate * exposure`; LightGBM and EBM take the offset as `init_score`. The MLP
and k-NN have no link: their predictions for log-link families are clipped to
`>= 1e-6`, which the Tweedie and gamma deviances punish hard when `y > 0`. The
null model of D² predicts the training mean (rate times exposure with an
offset; class proportions for classifiers)."""


# ----------------------------------------------------------------- summaries


def comparable(deviance: float) -> float:
    """``deviance`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits."""
    if not math.isfinite(deviance) or deviance == 0:
        return deviance
    return float(f"{deviance:.{SIGNIFICANT_DIGITS - 1}e}")


def _aggregate(records: list[dict]) -> dict:
    """Mean and sd over seeds of one (dataset, model), or its n/a / error note."""
    for status in ("error", "n/a"):
        bad = [r for r in records if r["status"] == status]
        if bad:
            return {"status": status, "note": bad[0]["note"], "n_seeds": len(records)}
    notes = "; ".join(dict.fromkeys(r["note"] for r in records if r["note"]))
    out: dict = {"status": "ok", "note": notes, "n_seeds": len(records)}
    for metric in METRICS:
        values = [r[metric] for r in records if metric in r]
        if values:
            out[metric] = float(np.mean(values))
            sd = float(np.std(values, ddof=1)) if len(values) > 1 else None
            out[f"{metric}_sd"] = sd
    return out


def summarise(records: list[dict], datasets: list[str], models: list[str]) -> dict:
    """Per dataset: family, sizes and, per model, aggregated metrics and rank.

    The rank (1 = lowest mean test deviance, compared at
    :data:`SIGNIFICANT_DIGITS` significant digits, ties averaged) is among the
    models that ran; a NaN deviance gets no rank.

    Returns
    -------
    dict
        ``{dataset: {"family", "n_train", "n_test", "models": {model: {...}}}}``.
    """
    summary = {}
    for name in datasets:
        rows = [r for r in records if r["dataset"] == name]
        if not rows:
            continue
        per_model = {
            m: _aggregate([r for r in rows if r["model"] == m])
            for m in models
            if any(r["model"] == m for r in rows)
        }
        deviance = pd.Series(
            {
                m: comparable(s["deviance"])
                for m, s in per_model.items()
                if s["status"] == "ok" and not math.isnan(s["deviance"])
            },
            dtype=float,
        )
        for m, rank in deviance.rank(method="average").items():
            per_model[m]["rank"] = float(rank)
        summary[name] = {
            "family": rows[0]["family"],
            "n_train": rows[0]["n_train"],
            "n_test": rows[0]["n_test"],
            "models": per_model,
        }
    return summary


def mean_ranks(summary: dict, models: list[str]) -> dict:
    """Per model: mean rank over the datasets it was ranked on, and their number."""
    out = {}
    for m in models:
        ranks = [
            d["models"][m]["rank"]
            for d in summary.values()
            if "rank" in d["models"].get(m, {})
        ]
        out[m] = {
            "mean_rank": float(np.mean(ranks)) if ranks else None,
            "n_datasets": len(ranks),
        }
    return out


def win_counts(
    summary: dict, model: str, others: tuple[str, ...], tolerance: float = 0.02
) -> dict:
    """Datasets where ``model``'s mean test deviance is lower than each other's.

    Only datasets on which both models were ranked count. ``within`` lists the
    datasets where ``model``'s deviance is at most ``1 + tolerance`` times the
    other's (the wins, the ties and the near losses).
    """
    out = {}
    for other in others:
        won, lost, tied, within = [], [], [], []
        for name, d in summary.items():
            a, b = d["models"].get(model, {}), d["models"].get(other, {})
            if "rank" not in a or "rank" not in b:
                continue
            dev_a, dev_b = comparable(a["deviance"]), comparable(b["deviance"])
            if dev_a < dev_b:
                won.append(name)
            elif dev_a > dev_b:
                lost.append(name)
            else:
                tied.append(name)
            if a["deviance"] <= (1.0 + tolerance) * b["deviance"]:
                within.append(name)
        out[other] = {
            "wins": len(won),
            "losses": len(lost),
            "ties": len(tied),
            "n": len(won) + len(lost) + len(tied),
            "won": won,
            "lost": lost,
            "within": within,
            "tolerance": tolerance,
        }
    return out


# ------------------------------------------------------------------ markdown


def _num(value, spec: str = ".4g") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def _cell(stats: dict | None) -> str:
    if stats is None:
        return ""
    if stats["status"] != "ok":
        return stats["status"]
    text = _num(stats["deviance"], f".{SIGNIFICANT_DIGITS}g")
    if stats.get("deviance_sd") is not None:
        text += f" ± {_num(stats['deviance_sd'], '.2g')}"
    rank = stats.get("rank")
    return text if rank is None else f"{text} ({rank:g})"


def _table(header: list[str], rows: list[list[str]], align: str) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main_table(report: dict) -> str:
    """Datasets x models, cells "deviance (rank)", a mean-rank row, win counts."""
    models, summary = report["models"], report["summary"]
    rows = [
        [
            f"`{name}`",
            d["family"],
            str(d["n_train"]),
            *(_cell(d["models"].get(m)) for m in models),
        ]
        for name, d in summary.items()
    ]
    ranks = report["mean_ranks"]
    rows.append(
        [
            "**mean rank**",
            "",
            "",
            *(
                f"**{_num(ranks[m]['mean_rank'], '.2f')}** ({ranks[m]['n_datasets']})"
                for m in models
            ),
        ]
    )
    table = _table(
        ["dataset", "family", "n_train", *models], rows, "lll" + "r" * len(models)
    )
    return table + "\n\n" + win_lines(report["wins"])


def win_lines(wins: dict) -> str:
    """One line per competitor: graphglm's wins, losses and ties against it."""
    lines = []
    for other, w in wins.items():
        lines.append(
            f"- graphglm vs {other}: lower test deviance on **{w['wins']} of "
            f"{w['n']}** datasets ({w['losses']} losses, {w['ties']} ties)"
            + _within(w)
            + (f"; won: {', '.join(w['won'])}" if w["won"] else "")
        )
    return "\n".join(lines)


def _within(w: dict) -> str:
    """ "within 2 % on k": the deviance at most (1 + tolerance) x the other's."""
    if "within" not in w:  # a report written before the count existed
        return ""
    return f", within {w['tolerance']:.0%} on {len(w['within'])}"


def fit_costs(
    summary: dict, model: str = "graphglm", peers: tuple[str, ...] = ()
) -> dict:
    """``model``'s fit seconds against LightGBM's and its own global GLM's.

    Per dataset where both ran: the ratio ``model`` fit / LightGBM fit (same
    process, same threads), and, where the fitted model is the global GLM,
    the fallback budget ``5 x global GLM fit + 1 s``. Also the median and the
    maximum ratio. For each of ``peers`` that ran on the dataset, its fit
    seconds and ``model``'s ratio to them (``<peer>_fit_s``, ``<peer>_ratio``),
    and their medians in ``peer_median_ratios``.
    """
    rows = {}
    for name, d in summary.items():
        ours, gbm = d["models"].get(model, {}), d["models"].get("lightgbm", {})
        if "fit_s" not in ours or "fit_s" not in gbm:
            continue
        glm = d["models"].get(REFERENCE, {})
        row = {
            "fit_s": ours["fit_s"],
            "lightgbm_fit_s": gbm["fit_s"],
            "ratio": ours["fit_s"] / gbm["fit_s"],
            "global_only": ours["note"].startswith("global GLM only"),
        }
        if row["global_only"] and "fit_s" in glm:
            row["fallback_budget_s"] = 5 * glm["fit_s"] + 1.0
        for peer in peers:
            other = d["models"].get(peer, {})
            if "fit_s" in other:
                row[f"{peer}_fit_s"] = other["fit_s"]
                row[f"{peer}_ratio"] = ours["fit_s"] / other["fit_s"]
        rows[name] = row
    ratios = [r["ratio"] for r in rows.values()]
    peer_ratios = {
        peer: [r[f"{peer}_ratio"] for r in rows.values() if f"{peer}_ratio" in r]
        for peer in peers
    }
    return {
        "datasets": rows,
        "median_ratio": float(np.median(ratios)) if ratios else None,
        "max_ratio": float(np.max(ratios)) if ratios else None,
        "peers": list(peers),
        "peer_median_ratios": {
            p: float(np.median(v)) if v else None for p, v in peer_ratios.items()
        },
    }


def cost_table(costs: dict) -> str:
    """Markdown: fit seconds, the ratio to LightGBM, the fallback budget, and
    the fit seconds of the peers and the ratio to them."""
    peers = costs.get("peers", [])
    rows = []
    for name, r in costs["datasets"].items():
        budget = r.get("fallback_budget_s")
        rows.append(
            [
                f"`{name}`",
                _num(r["fit_s"], ".2f"),
                _num(r["lightgbm_fit_s"], ".2f"),
                _num(r["ratio"], ".1f"),
                "yes" if r["global_only"] else "no",
                "-" if budget is None else f"{_num(budget, '.2f')}",
                *(
                    cell
                    for peer in peers
                    for cell in (
                        _num(r.get(f"{peer}_fit_s"), ".2f"),
                        _num(r.get(f"{peer}_ratio"), ".2f"),
                    )
                ),
            ]
        )
    header = [
        "dataset",
        "graphglm fit s",
        "lightgbm fit s",
        "ratio",
        "global GLM returned",
        "fallback budget s (5 x GLM + 1)",
        *(h for peer in peers for h in (f"{peer} fit s", f"ratio to {peer}")),
    ]
    summary = (
        f"Median ratio **{_num(costs['median_ratio'], '.1f')}**, maximum "
        f"**{_num(costs['max_ratio'], '.1f')}** (GraphGLM fit / LightGBM fit, "
        "same process and threads)."
    )
    for peer, median in costs.get("peer_median_ratios", {}).items():
        summary += (
            f" Median ratio to {peer} **{_num(median, '.2f')}** (GraphGLM fit "
            f"/ {peer} fit)."
        )
    align = "lrrrlr" + "rr" * len(peers)
    return _table(header, rows, align) + "\n\n" + summary


def details_table(report: dict) -> str:
    """Long table: every metric of every (dataset, model)."""
    rows = []
    for name, d in report["summary"].items():
        for m, s in d["models"].items():
            if s["status"] != "ok":
                rows.append([name, m, s["status"], *[""] * 6, s["note"]])
                continue
            rows.append(
                [
                    name,
                    m,
                    _num(s.get("rank"), "g"),
                    _num(s["deviance"]),
                    _num(s["d2"], ".3f"),
                    _num(s.get("log_loss")),
                    _num(s.get("accuracy"), ".3f"),
                    _num(s["fit_s"], ".2f"),
                    _num(s["predict_s"], ".3f"),
                    s["note"],
                ]
            )
    header = [
        "dataset",
        "model",
        "rank",
        "deviance",
        "D²",
        "log-loss",
        "accuracy",
        "fit s",
        "predict s",
        "note",
    ]
    return _table(header, rows, "llrrrrrrrl")


def to_markdown(report: dict) -> str:
    """The full markdown report: provenance, main table, details, notes."""
    machine = report["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)
    parts = [
        f"# {report['title']}",
        "",
        f"- Command: `{report['command']}`",
        f"- Date (UTC): {report['date']}; wall time {report['wall_s']:.0f} s",
        f"- Machine: {machine['cpu']}, {machine['cpu_count']} CPUs, "
        f"{machine['torch_threads']} torch threads, {machine['platform']}, "
        f"Python {machine['python']}",
        f"- Versions: {versions}",
        "",
        "Cells: mean test deviance of the family (binomial/multinomial: twice "
        "the log-loss) and, in parentheses, the rank among the models on that "
        f"dataset (1 = best; deviances are compared at the {SIGNIFICANT_DIGITS} "
        "significant digits shown, so equal cells tie). n/a: the model does not "
        "handle the family or the offset. The mean-rank row gives, in "
        "parentheses, the number of datasets the model was ranked on.",
        "",
        main_table(report),
        "",
    ]
    peers = tuple(m for m in PEERS if m in report["models"])
    costs = fit_costs(report["summary"], peers=peers)
    if costs["datasets"]:
        parts += ["## Fit cost", "", cost_table(costs), ""]
        repeats = report["options"].get("fit_repeats", 1)
        if repeats > 1:
            parts += [
                f"Seconds: the median of {repeats} fits of each model on each "
                "split, fitted in rounds over the models.",
                "",
            ]
        if not report["options"].get("no_warm_up", True):
            parts += [
                "Before the timed runs every model was fitted once, untimed, on "
                "the first dataset: the process's one-time costs (imports, "
                "library set-up) are not in these seconds.",
                "",
            ]
    parts += ["## Models", ""]
    parts += [f"- `{m}`: {d}" for m, d in report["model_descriptions"].items()]
    parts += ["", METHOD_NOTES, ""]
    if report["notes"]:
        parts += ["## Notes", "", *(f"- {n}" for n in report["notes"]), ""]
    parts += ["## All metrics", "", details_table(report), ""]
    return "\n".join(parts)


# ---------------------------------------------------------------------- plot


def relative_deviance(summary: dict, models: list[str]) -> pd.DataFrame:
    """Test deviance / graphglm_global's, datasets x models (NaN where missing)."""
    frame = {}
    for name, d in summary.items():
        ref = d["models"].get(REFERENCE, {})
        if "rank" not in ref or not ref["deviance"] > 0:
            continue
        frame[name] = {
            m: d["models"][m]["deviance"] / ref["deviance"]
            for m in models
            if m != REFERENCE and "rank" in d["models"].get(m, {})
        }
    return pd.DataFrame.from_dict(frame, orient="index").reindex(
        columns=[m for m in models if m != REFERENCE]
    )


def plot_relative(summary: dict, models: list[str], path: Path, title: str) -> bool:
    """Dot plot of test deviance relative to the global GLM, one row per dataset.

    Returns
    -------
    bool
        False (and nothing written) when ``graphglm_global`` did not run or
        matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ratios = relative_deviance(summary, models)
    if ratios.empty or REFERENCE not in models:
        return False
    ratios = ratios.clip(*PLOT_RANGE)
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(ratios) + 1.8))
    y = np.arange(len(ratios))[::-1]
    offsets = np.linspace(0.3, -0.3, max(len(ratios.columns), 1))
    markers = "o^sDvP*Xh<>"
    for k, model in enumerate(ratios.columns):
        ax.scatter(
            ratios[model],
            y + offsets[k],
            label=model,
            s=28,
            marker=markers[k % len(markers)],
            zorder=3,
        )
    ax.axvline(1.0, color="grey", lw=1, ls="--", zorder=1)
    ax.set_xscale("log")
    ax.set_yticks(y, [f"{n} ({summary[n]['family']})" for n in ratios.index])
    ax.set_xlabel(
        "test deviance / global GLM (graphglm_global); < 1 is better\n"
        f"(ratios outside [{PLOT_RANGE[0]:g}, {PLOT_RANGE[1]:g}] are drawn on the edge)"
    )
    ax.set_xlim(PLOT_RANGE[0] / 1.2, PLOT_RANGE[1] * 1.2)
    ax.set_title(title)
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
