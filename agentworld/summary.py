"""The pipeline summary the demo prints, read back from the stages' report files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow

from agentworld.evaluation.rollout import describe_crossings


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _per_domain(folder: Path, totals: tuple[str, ...], only: Sequence[str] | None) -> dict[str, Any]:
    """Per-domain stage reports (reports/<stage>/<domain>.json) with their totals summed."""
    domains = {path.stem: _read(path) for path in sorted(folder.glob("*.json")) if only is None or path.stem in only}
    if not domains:
        return {}
    summary: dict[str, Any] = {key: sum(d.get(key, 0) for d in domains.values()) for key in totals}
    summary["domains"] = domains
    return summary


#: Systems of the evaluation report: the world model, then its baselines.
SYSTEMS = ("world_model", "ranked_memory", "retrieval", "episode_retrieval", "copy_previous", "untrained")
#: Parts of the world model scored alone: what its language model adds, not floors to beat.
ABLATIONS = ("ranked_memory",)


def collect_summary(root: Path, domains: Sequence[str] | None = None) -> dict[str, Any]:
    """Headline numbers of the last run; `domains` limits per-domain reports to the selected ones."""
    reports = root / "reports"
    validate = _per_domain(reports / "validate", ("total_rows", "clean", "rejected"), domains)
    if validate:
        validate["rejected_share"] = validate["rejected"] / validate["total_rows"] if validate["total_rows"] else 0.0
    return {
        "collect": _per_domain(reports / "collect", ("transitions", "episodes"), domains),
        "validate": validate,
        "train": {stage: _read(reports / "train" / f"{stage}.json") for stage in ("cpt", "sft", "rl")
                  if (reports / "train" / f"{stage}.json").exists()},
        "evaluate": _read(reports / "eval_metrics.json"),
        "promote": _read(reports / "promotion.json"),
    }


def log_summary(root: Path, parent_run_id: str, domains: Sequence[str] | None = None) -> dict[str, Any]:
    """Copy the headline numbers onto the pipeline's parent run, for side-by-side comparison."""
    summary = collect_summary(root, domains)
    flat: dict[str, float] = {}
    if summary["collect"]:
        flat["transitions"] = summary["collect"]["transitions"]
    if summary["validate"]:
        flat["clean_rows"] = summary["validate"]["clean"]
        flat["rejected_rows"] = summary["validate"]["rejected"]
    for system in SYSTEMS:
        for domain, values in summary["evaluate"].get(system, {}).items():
            for metric in ("judge_overall", "exact_match", "token_f1"):
                if metric in values:
                    flat[f"{system}.{domain}.{metric}"] = values[metric]
    with mlflow.start_run(run_id=parent_run_id):
        mlflow.log_metrics(flat)
        for stage, report in summary["train"].items():
            if report.get("registered_version"):
                mlflow.set_tag(f"registered_version.{stage}", report["registered_version"])
    return summary


def _cell(row: dict[str, Any], metric: str) -> str:
    low, high = row.get(f"{metric}_low"), row.get(f"{metric}_high")
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{row[metric]:.3f}{interval}"


def baseline_comparison(evaluate: dict[str, Any], baselines: Sequence[str]) -> list[str]:
    """The world model against the best baseline of each domain, per metric, with 95%
    bootstrap intervals over records, and in how many domains it wins."""
    if not baselines:
        return []
    lines = ["world model vs the best baseline per domain (95% bootstrap intervals over records):",
             f"{'domain':12s} {'n':>4s}  {'token F1: world model':>24s} {'best baseline':>34s}  "
             f"{'exact match: world model':>24s} {'best baseline':>34s}"]
    wins = {"token_f1": 0, "exact_match": 0}
    domains = [d for d in evaluate["world_model"] if d != "all"]
    for domain in [*domains, "all"]:
        mine = evaluate["world_model"][domain]
        cells = []
        for metric in wins:
            best = max(baselines, key=lambda b: evaluate[b].get(domain, {}).get(metric, -1.0))
            theirs = evaluate[best].get(domain, {})
            if domain != "all" and mine[metric] > theirs.get(metric, -1.0):
                wins[metric] += 1
            cells.append(f"{_cell(mine, metric):>24s} {best + ' ' + _cell(theirs, metric):>34s}")
        lines.append(f"{domain:12s} {mine.get('n', 0):4d}  " + "  ".join(cells))
    judge = evaluate["world_model"]["all"]["judge_overall"]
    best_judge = max(baselines, key=lambda b: evaluate[b]["all"]["judge_overall"])
    lines.append(f"beats the best baseline in {wins['token_f1']}/{len(domains)} domains on token F1, "
                 f"{wins['exact_match']}/{len(domains)} on exact match; judge overall {judge:.1f} vs "
                 f"{best_judge} {evaluate[best_judge]['all']['judge_overall']:.1f}")
    return lines


def ablation_lines(evaluate: dict[str, Any], ablations: Sequence[str]) -> list[str]:
    """One line per part of the world model scored alone, next to the whole model."""
    mine = evaluate["world_model"]["all"]
    return [f"world model vs {name} alone (overall): judge {mine['judge_overall']:.1f} vs "
            f"{evaluate[name]['all']['judge_overall']:.1f}, exact match {mine['exact_match']:.3f} vs "
            f"{evaluate[name]['all']['exact_match']:.3f}, token F1 {mine['token_f1']:.3f} vs "
            f"{evaluate[name]['all']['token_f1']:.3f}" for name in ablations]


def render_summary(summary: dict[str, Any]) -> str:
    lines = ["", "=== AgentWorld pipeline summary ==="]
    collect, validate, train, evaluate = (summary.get(k) or {} for k in ("collect", "validate", "train", "evaluate"))
    if collect:
        lines.append(f"transitions collected : {collect['transitions']} in {collect['episodes']} episodes")
        for domain, d in collect.get("domains", {}).items():
            lines.append(f"  {domain:12s}: {d['transitions']} transitions, {d['transitions_per_s']} transitions/s")
    if validate:
        lines.append(f"rows validated        : {validate['clean']} clean, {validate['rejected']} quarantined "
                     f"({validate['rejected_share']:.1%})")
    for stage, t in train.items():
        metrics = t.get("eval_metrics") or {}
        held_out = ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if k in ("eval_loss", "eval_token_f1", "eval_reward"))
        lines.append(f"{stage:4s} model registered : {t.get('registered_model')} version {t.get('registered_version')} "
                     f"({t['model_parameters']:,} parameters, {t['global_step']} steps, {t['wall_s']} s; held-out {held_out})")
        if metrics.get("rl_kept_parent"):
            lines.append(f"     GRPO lowered held-out token F1 / exact match from {metrics['parent_eval_token_f1']:.3f} / "
                         f"{metrics['parent_eval_exact_match']:.3f} to {metrics['grpo_eval_token_f1']:.3f} / "
                         f"{metrics['grpo_eval_exact_match']:.3f}: this version keeps the SFT weights")
    if evaluate:
        systems = [s for s in SYSTEMS if s in evaluate]
        lines.append(f"held-out examples     : {evaluate['examples']} (judge {evaluate.get('primary_judge', 'local')}, "
                     "0-100 / exact match / token F1; full report: reports/eval/summary.md)")
        lines.append(f"{'domain':12s} " + " ".join(f"{s:>22s}" for s in systems))
        for domain in evaluate["world_model"]:
            cells = []
            for system in systems:
                v = evaluate[system].get(domain, {})
                cells.append(f"{v.get('judge_overall', float('nan')):6.1f} {v.get('exact_match', float('nan')):6.3f} "
                             f"{v.get('token_f1', float('nan')):6.3f}" if v else "n/a")
            lines.append(f"{domain:12s} " + " ".join(f"{c:>22s}" for c in cells))
        lines += baseline_comparison(evaluate, [s for s in systems if s != "world_model" and s not in ABLATIONS])
        lines += ablation_lines(evaluate, [s for s in ABLATIONS if s in evaluate])
        if evaluate.get("rollout_below_baseline_from"):
            lines.append(describe_crossings(evaluate["rollout_below_baseline_from"], evaluate["rollout_steps"]))
    promote = summary.get("promote") or {}
    if promote:
        verdict = "promoted to" if promote["promoted"] else "not promoted to"
        lines.append(f"version {promote['challenger_version']} {verdict} {promote['alias']}: {promote['reason']}")
    lines.append("Look next: `make mlflow` (runs, registry), `make airflow` (DAGs), `dvc metrics show`.")
    return "\n".join(lines)
