"""Stage `evaluate`: infer -> judge -> score the trained world model on the AgentWorldBench export
of the held-out split, next to its three baselines; DVC metrics and plots, MLflow artifacts, and
the scores as tags on the model's registry version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient

from agentworld.config import Params
from agentworld.data.awbench import read_bench
from agentworld.data.build import load_examples
from agentworld.evaluation.run import (
    evaluate,
    flat_metrics,
    open_world_model,
    sample_records,
)
from agentworld.tracking.runs import stage_run
from stages.paths import StagePaths
from stages.training import trained_report

#: Version tags every evaluated model gets (the world model over all domains).
TAGGED_METRICS = ("judge_overall", "exact_match", "token_f1")


def dvc_metrics(summary: dict[str, Any], stage: str) -> dict[str, Any]:
    """reports/eval_metrics.json: every system's per-domain table (what `dvc metrics diff` compares)."""
    model = summary["systems"]["world_model"]
    return {**summary["systems"], "examples": summary["data"]["records"], "format_valid": model["all"]["format_valid"],
            "primary_judge": summary["primary_judge"], "stage": stage,
            "registered_version": int(summary["model"]["registered_version"]) if summary["model"]["registered_version"] else None,
            "rollout": {name: points[-1]["token_f1"] for name, points in summary["rollout"].items()},
            "rollout_steps": len(summary["rollout"].get("world_model", [])),
            "rollout_below_baseline_from": summary.get("rollout_below_baseline_from") or {}}


def write_dvc_plots(paths: StagePaths, summary: dict[str, Any]) -> list[Path]:
    systems = list(summary["systems"])
    written = []
    for key, x in (("by_turn", "turn"), ("rollout", "step")):
        curves = summary[key]
        if not curves:
            continue
        xs = sorted({p[x] for points in curves.values() for p in points})
        values = {name: {p[x]: p["token_f1"] for p in points} for name, points in curves.items()}
        rows = [(v, *(values[s].get(v, "") for s in systems if s in values)) for v in xs]
        written.append(paths.write_plot(f"eval_{key}.csv", [x, *(s for s in systems if s in values)], rows))
    return written


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    settings = params.evaluate
    trained = trained_report(paths, settings.stage, "evaluate.stage")
    all_records = read_bench(paths.agentworldbench)
    records = sample_records(all_records, settings.max_examples, params.build.seed)
    model_dir = paths.stage_model(settings.stage)
    out = paths.eval_dir
    with stage_run("evaluate", params, settings, parent_run_id, root=root) as run:
        registered = (trained.get("registered_model"), trained.get("registered_version"))
        if registered[1]:
            mlflow.set_tags({"registered_model": registered[0], "registered_version": registered[1]})
        mlflow.set_tag("evaluated_stage", settings.stage)
        world_model = open_world_model(settings, model=str(model_dir), max_seq_len=params.model.max_seq_len)
        if registered[1]:
            world_model.label = f"models:/{registered[0]}/{registered[1]}"
            world_model.extra = {"registered_model": registered[0], "registered_version": str(registered[1])}
        world_model.identity += f" trained by run {trained.get('run_id')}"
        summary = evaluate(records, world_model, settings, out, data_path="data/agentworldbench",
                           model_params=params.model, train=load_examples(paths.sft_train),
                           pool=all_records, seed=params.build.seed)
        metrics = dvc_metrics(summary, settings.stage)
        paths.write_report("eval_metrics.json", metrics)
        for plot in write_dvc_plots(paths, summary):
            mlflow.log_artifact(str(plot), artifact_path="plots")
        mlflow.log_metrics(flat_metrics(summary))
        log_eval_artifacts(out)
        if registered[1]:
            client = MlflowClient()
            overall = summary["systems"]["world_model"]["all"]
            for key in TAGGED_METRICS:
                client.set_model_version_tag(registered[0], registered[1], f"eval.{key}", f"{overall[key]:.4f}")
            client.set_model_version_tag(registered[0], registered[1], "eval_run_id", run.info.run_id)
    return metrics


def log_eval_artifacts(out: Path) -> None:
    """The report, predictions, judged rows and plots under `eval/` (the untrained model stays out)."""
    for name in ("summary.json", "summary.md", "worst_examples.md"):
        mlflow.log_artifact(str(out / name), artifact_path="eval")
    for sub in ("predictions", "judged", "rollout", "plots"):
        if (out / sub).exists():
            mlflow.log_artifacts(str(out / sub), artifact_path=f"eval/{sub}")
