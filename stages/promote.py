"""Stage `promote`: the evaluated model (challenger) becomes the registry's champion only if it
beats the current champion, both scored on the same held-out records (promotion.py has the rule)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from agentworld.config import Params
from agentworld.data.awbench import read_bench
from agentworld.data.build import load_examples
from agentworld.evaluation import promotion
from agentworld.evaluation.run import evaluate, open_world_model, records_md5, sample_records
from agentworld.tracking.runs import stage_run
from stages.paths import StagePaths


def current_champion(client: MlflowClient, name: str, alias: str) -> str | None:
    try:
        return str(client.get_model_version_by_alias(name, alias).version)
    except MlflowException:
        return None


def score_champion(params: Params, paths: StagePaths, name: str, version: str, challenger: dict[str, Any]) -> dict[str, Any]:
    """The champion's world-model scores on the challenger's records (no baselines, no rollouts)."""
    settings = params.evaluate.model_copy(update={"baselines": [], "rollout_episodes": 0})
    records = sample_records(read_bench(paths.agentworldbench), settings.max_examples, params.build.seed)
    if records_md5(records) != challenger["data"]["md5"]:
        raise ValueError(f"{paths.agentworldbench}: records changed since the evaluate stage; rerun it first")
    out = paths.report("promotion") / f"champion-v{version}"
    world_model = open_world_model(settings, model=f"models:/{name}/{version}", cache_root=paths.root / ".cache" / "models",
                                   max_seq_len=params.model.max_seq_len)
    return evaluate(records, world_model, settings, out, data_path=challenger["data"]["path"], model_params=params.model,
                    train=load_examples(paths.sft_train), seed=params.build.seed)


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    summary_path = paths.eval_dir / "summary.json"
    if not summary_path.exists():
        raise FileNotFoundError(f"{summary_path}: missing; run `agentworld stage evaluate` first")
    challenger = json.loads(summary_path.read_text())
    name, version = challenger["model"].get("registered_model"), challenger["model"].get("registered_version")
    if not version:
        raise ValueError(f"{summary_path}: the evaluated model has no registry version; only registered models are promoted")
    settings = params.promote
    with stage_run("promote", params, settings, parent_run_id, root=root):
        client = MlflowClient()
        champion = current_champion(client, name, settings.alias)
        if champion == str(version):
            decision = promotion.Decision(False, f"already {settings.alias}",
                                          challenger["systems"]["world_model"]["all"][settings.primary_metric], None)
        else:
            champion_summary = score_champion(params, paths, name, champion, challenger) if champion else None
            decision = promotion.decide(challenger, champion_summary, settings)
            promotion.apply(client, name, str(version), champion, decision, settings)
        mlflow.set_tags({"challenger_version": str(version), "champion_version": champion or "none",
                         "promoted": str(decision.promote).lower(), "reason": decision.reason})
        mlflow.log_metric(f"challenger.{settings.primary_metric}", decision.challenger_score)
        if decision.champion_score is not None:
            mlflow.log_metric(f"champion.{settings.primary_metric}", decision.champion_score)
        result = {"registered_model": name, "challenger_version": int(version),
                  "champion_version": int(champion) if champion else None, "promoted": decision.promote,
                  "alias": settings.alias, "metric": settings.primary_metric, "margin": settings.margin,
                  "challenger_score": decision.challenger_score, "champion_score": decision.champion_score,
                  "reason": decision.reason}
        paths.write_report("promotion.json", result)
    return result
