"""The pipeline summary the demo prints, read back from the stages' report files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def collect_summary(root: Path) -> dict[str, Any]:
    reports = root / "reports"
    return {
        "collect": _read(reports / "collect.json"),
        "validate": _read(reports / "validate.json"),
        "train": _read(reports / "train.json"),
        "evaluate": _read(reports / "eval_metrics.json"),
    }


def log_summary(root: Path, parent_run_id: str) -> dict[str, Any]:
    """Copy the headline numbers onto the pipeline's parent run, for side-by-side comparison."""
    summary = collect_summary(root)
    flat: dict[str, float] = {}
    if summary["collect"]:
        flat["transitions"] = summary["collect"]["transitions"]
    if summary["validate"]:
        flat["clean_rows"] = summary["validate"]["clean"]
        flat["rejected_rows"] = summary["validate"]["rejected"]
    for system in ("world_model", "retrieval"):
        for domain, values in summary["evaluate"].get(system, {}).items():
            flat[f"{system}.{domain}.exact_match"] = values["exact_match"]
            flat[f"{system}.{domain}.token_f1"] = values["token_f1"]
    with mlflow.start_run(run_id=parent_run_id):
        mlflow.log_metrics(flat)
        if summary["train"]:
            mlflow.set_tag("registered_version", summary["train"]["registered_version"])
    return summary


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
    if train:
        lines.append(f"model registered      : {train['registered_model']} version {train['registered_version']} "
                     f"({train['model_parameters']:,} parameters, {train['global_step']} steps, loss {train['train_loss']:.3f})")
    if evaluate:
        lines.append(f"held-out examples     : {evaluate['examples']}")
        lines.append(f"{'domain':12s} {'system':12s} {'exact match':>12s} {'token F1':>10s}")
        for domain in evaluate["world_model"]:
            for system in ("world_model", "retrieval"):
                v = evaluate[system][domain]
                lines.append(f"{domain:12s} {system:12s} {v['exact_match']:12.3f} {v['token_f1']:10.3f}")
    lines.append("Look next: `make mlflow` (runs, registry), `make airflow` (DAGs), `dvc metrics show`.")
    return "\n".join(lines)
