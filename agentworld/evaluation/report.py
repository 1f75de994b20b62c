"""Step 3 of evaluation, score: per-domain tables, plots and worst examples from judged predictions.

The summary (`summary.json`) holds, for every system (the world model and each baseline) and
every domain plus `all`: the five judge dimensions on 0-100, their mean (`judge_overall`),
exact match, token F1 and the share of well-formed generations; the accuracy against turn
index; and the long-horizon rollout curve. `render_markdown` turns it into the tables people
read; `compare_markdown` puts two summaries side by side with deltas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentworld.data.awbench import BenchRecord
from agentworld.evaluation.rollout import describe_crossings
from agentworld.experiments.stats import bootstrap_ci
from agentworld.scoring.judge import DIMENSIONS
from agentworld.scoring.metrics import exact_match, token_f1

METRICS: tuple[str, ...] = (*DIMENSIONS, "judge_overall", "exact_match", "token_f1", "format_valid")


def _mean(values: Sequence[float | None]) -> float | None:
    """Mean (4 decimals) over the values that apply (None: a judge dimension not applicable to
    that record); None when none applies, which JSON writes as null and tables as n/a."""
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def system_scores(records: Sequence[BenchRecord], predictions: Sequence[dict[str, Any]],
                  judged: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per domain and `all`: dimensions 0-100 (each averaged over the records where it applies,
    n/a where it applies to none), judge_overall, exact match, token F1, format_valid, n."""
    buckets: dict[str, list[dict[str, float]]] = {}
    for record, pred, scores in zip(records, predictions, judged):
        row = {dim: None if scores.get(dim) is None else (scores[dim] - 1) * 25.0 for dim in DIMENSIONS}
        row["judge_overall"] = float(scores["overall"])
        row["exact_match"] = exact_match(pred["prediction"], record.reference)
        row["token_f1"] = token_f1(pred["prediction"], record.reference)
        row["format_valid"] = float(pred["well_formed"])
        buckets.setdefault(record.domain, []).append(row)
        buckets.setdefault("all", []).append(row)
    return {
        domain: {**{m: _mean([r[m] for r in rows]) for m in METRICS}, **_intervals(rows), "n": len(rows)}
        for domain, rows in sorted(buckets.items(), key=lambda kv: (kv[0] == "all", kv[0]))
    }


#: Metrics reported with a 95% bootstrap interval over records (`<metric>_low`, `<metric>_high`).
INTERVAL_METRICS: tuple[str, ...] = ("judge_overall", "exact_match", "token_f1")


def _intervals(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    out = {}
    for metric in INTERVAL_METRICS:
        low, high = bootstrap_ci([r[metric] for r in rows])
        out[f"{metric}_low"], out[f"{metric}_high"] = round(low, 4), round(high, 4)
    return out


def by_turn(records: Sequence[BenchRecord], predictions: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Exact match and token F1 against turn index: does the model lose track as episodes grow?"""
    turns: dict[int, list[tuple[float, float]]] = {}
    for record, pred in zip(records, predictions):
        turns.setdefault(record.turn_idx, []).append(
            (exact_match(pred["prediction"], record.reference), token_f1(pred["prediction"], record.reference)))
    return [{"turn": t, "exact_match": _mean([p[0] for p in pairs]),
             "token_f1": _mean([p[1] for p in pairs]), "n": len(pairs)} for t, pairs in sorted(turns.items())]


def worst_examples(records: Sequence[BenchRecord], predictions: Sequence[dict[str, Any]],
                   judged: Sequence[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The lowest-scored predictions (judge overall, then token F1), prediction next to ground truth."""
    rows = [
        {"id": r.key, "task": r.domain, "turn_idx": r.turn_idx, "action": r.current_prompt, "reference": r.reference,
         "prediction": p["prediction"], "judge_overall": j["overall"], "token_f1": token_f1(p["prediction"], r.reference),
         "reason": j.get("reason", "")}
        for r, p, j in zip(records, predictions, judged)
    ]
    return sorted(rows, key=lambda row: (row["judge_overall"], row["token_f1"], row["id"]))[:limit]


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render_markdown(summary: Mapping[str, Any]) -> str:
    """The summary tables: the world model per dimension, then every system side by side."""
    systems: Mapping[str, Mapping[str, Mapping[str, float]]] = summary["systems"]
    model = systems["world_model"]
    lines = [f"# Evaluation of {summary['model']['label']} on {summary['data']['path']}", "",
             f"{summary['data']['records']} records; judge: {summary['primary_judge']} "
             "(dimensions 1-5 normalised to 0-100).", "",
             "## World model", "",
             "| domain | n | format | factuality | consistency | realism | quality | judge | exact match | token F1 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for domain, row in model.items():
        dims = " | ".join(_fmt(row[d], 1) for d in DIMENSIONS)
        lines.append(f"| {domain} | {row['n']} | {dims} | {_fmt(row['judge_overall'], 1)} | "
                     f"{_fmt(row['exact_match'])} | {_fmt(row['token_f1'])} |")
    names = list(systems)
    lines += ["", "## Next to the baselines (judge / exact match / token F1)", "",
              "| domain | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for domain in model:
        cells = [f"{_fmt(systems[s][domain]['judge_overall'], 1)} / {_fmt(systems[s][domain]['exact_match'])} / "
                 f"{_fmt(systems[s][domain]['token_f1'])}" if domain in systems[s] else "n/a" for s in names]
        lines.append(f"| {domain} | " + " | ".join(cells) + " |")
    rollout = summary.get("rollout") or {}
    if rollout:
        steps = max(len(c) for c in rollout.values())
        lines += ["", f"## Long-horizon consistency: token F1 per rollout step ({summary.get('rollout_episodes', 0)} "
                  "episodes, own predictions fed back)", "",
                  "| step | " + " | ".join(rollout) + " |", "|---|" + "---|" * len(rollout)]
        for step in range(steps):
            cells = [_fmt(c[step]["token_f1"]) if step < len(c) else "" for c in rollout.values()]
            lines.append(f"| {step + 1} | " + " | ".join(cells) + " |")
        if summary.get("rollout_below_baseline_from"):
            lines += ["", describe_crossings(summary["rollout_below_baseline_from"], steps)]
    agreement = summary.get("judge_agreement")
    if agreement:
        lines += ["", "## Judge agreement (Spearman rank correlation, local vs LLM judge)", "",
                  "| overall | " + " | ".join(DIMENSIONS) + " |", "|---|" + "---|" * len(DIMENSIONS),
                  f"| {_fmt(agreement['overall'])} | " + " | ".join(_fmt(agreement[d]) for d in DIMENSIONS) + " |"]
    return "\n".join(lines) + "\n"


def render_worst(rows: Sequence[dict[str, Any]], clip: int = 400) -> str:
    out = ["# Worst world-model predictions (lowest judge score)", ""]
    for row in rows:
        out += [f"## {row['id']} ({row['task']}, turn {row['turn_idx']}) judge {row['judge_overall']:.1f}, "
                f"token F1 {row['token_f1']:.3f}", "", f"Action: `{row['action'][:200]}`", "",
                "Ground truth:", "```", row["reference"][:clip], "```", "Prediction:", "```", row["prediction"][:clip], "```",
                *([f"Judge: {row['reason']}"] if row.get("reason") else []), ""]
    return "\n".join(out)


def write_plots(summary: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """PNG plots: judge dimensions per system, token F1 against turn index and along rollouts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    systems = summary["systems"]
    written = []

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(systems)
    for k, (name, table) in enumerate(systems.items()):
        axes[0].bar([i + k * width for i in range(len(DIMENSIONS))], [table["all"][d] or 0.0 for d in DIMENSIONS], width, label=name)
        domains = [d for d in systems["world_model"] if d != "all"]
        axes[1].bar([i + k * width for i in range(len(domains))], [table.get(d, {}).get("judge_overall", 0) for d in domains],
                    width, label=name)
    axes[0].set_xticks([i + 0.4 - width / 2 for i in range(len(DIMENSIONS))], DIMENSIONS)
    axes[0].set(title="Judge dimensions, all domains", ylabel="score (0-100)", ylim=(0, 100))
    domains = [d for d in systems["world_model"] if d != "all"]
    axes[1].set_xticks([i + 0.4 - width / 2 for i in range(len(domains))], domains, rotation=30)
    axes[1].set(title="Judge overall per domain", ylim=(0, 100))
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    written.append(out_dir / "judge_dimensions.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    for key, title, xlabel in (("by_turn", "Token F1 against turn index (real history)", "turn index"),
                               ("rollout", "Token F1 along rollouts (own predictions fed back)", "rollout step")):
        curves = summary.get(key) or {}
        if not curves:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, points in curves.items():
            xs = [p.get("turn", p.get("step")) for p in points]
            ax.plot(xs, [p["token_f1"] for p in points], marker="o", label=name)
        ax.set(title=title, xlabel=xlabel, ylabel="token F1", ylim=(0, 1))
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(out_dir / f"{key}.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written


def compare_markdown(a: Mapping[str, Any], b: Mapping[str, Any], metrics: Sequence[str] = ("judge_overall", "exact_match", "token_f1")) -> str:
    """Two evaluations' world models side by side per domain, with B - A deltas."""
    left, right = a["systems"]["world_model"], b["systems"]["world_model"]
    label_a, label_b = a["model"]["label"], b["model"]["label"]
    lines = [f"A: {label_a} on {a['data']['path']} ({a['data']['md5'][:8]})",
             f"B: {label_b} on {b['data']['path']} ({b['data']['md5'][:8]})"]
    if a["data"]["md5"] != b["data"]["md5"]:
        lines.append("note: A and B were scored on different data; pass --data to score both on the same records")
    header = "| domain | " + " | ".join(f"{m} A | {m} B | Δ" for m in metrics) + " |"
    lines += ["", header, "|---|" + "---|---|---|" * len(metrics)]
    for domain in [d for d in right if d in left] + [d for d in left if d not in right]:
        cells = []
        for m in metrics:
            va, vb = left.get(domain, {}).get(m), right.get(domain, {}).get(m)
            delta = vb - va if va is not None and vb is not None else None
            digits = 1 if m in (*DIMENSIONS, "judge_overall") else 3
            cells.append(f"{_fmt(va, digits)} | {_fmt(vb, digits)} | {'n/a' if delta is None else f'{delta:+.{digits}f}'}")
        lines.append(f"| {domain} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
