"""Stage `evaluate`: held-out predictions, exact match and token F1 per domain, next to the
nearest-neighbour retrieval baseline, written as DVC metrics and logged to MLflow."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient

from agentworld.config import Params
from agentworld.data.build import load_examples
from agentworld.data.io import write_jsonl
from agentworld.evaluation.baselines import RetrievalBaseline
from agentworld.evaluation.metrics import exact_match, score
from agentworld.evaluation.predict import predict_observations
from agentworld.models.factory import load_local
from agentworld.tracking.runs import stage_run
from tasks.paths import StagePaths


def held_out_sample(examples: list[Any], limit: int, seed: int) -> list[Any]:
    """A fixed random subset, so every model is scored on the same examples."""
    if len(examples) <= limit:
        return examples
    return sorted(random.Random(seed).sample(examples, limit), key=lambda e: e.id)


def exact_match_by_turn(rows: list[dict[str, Any]]) -> list[tuple[int, float, float, int]]:
    """Accuracy against turn index: does the model lose track of state as episodes grow?"""
    buckets: dict[int, list[tuple[float, float]]] = {}
    for row in rows:
        turn = int(row["id"].rsplit(":", 1)[1])
        buckets.setdefault(turn, []).append(
            (exact_match(row["prediction"], row["reference"]), exact_match(row["retrieval"], row["reference"]))
        )
    return [
        (turn, round(sum(p[0] for p in pairs) / len(pairs), 4), round(sum(p[1] for p in pairs) / len(pairs), 4), len(pairs))
        for turn, pairs in sorted(buckets.items())
    ]


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    train = load_examples(paths.sft_train)
    test = held_out_sample(load_examples(paths.sft_test), params.evaluate.max_examples, params.build.seed)
    report = paths.train_report(params.evaluate.stage)
    if not report.exists():
        raise FileNotFoundError(f"{report}: missing; evaluate.stage is {params.evaluate.stage!r}, "
                                f"run `agentworld stage {params.evaluate.stage}` first")
    trained = json.loads(report.read_text())
    with stage_run("evaluate", params, params.evaluate, parent_run_id):
        if trained.get("registered_version"):
            mlflow.set_tags({"registered_model": trained["registered_model"],
                             "registered_version": trained["registered_version"]})
        mlflow.set_tag("evaluated_stage", params.evaluate.stage)
        model, tokenizer = load_local(paths.stage_model(params.evaluate.stage))
        predictions, well_formed = predict_observations(
            model, tokenizer, test, params.evaluate.max_new_tokens, params.evaluate.batch_size, params.model.max_seq_len
        )
        retrieved = RetrievalBaseline(train).predict(test)
        references = [e.observation for e in test]
        domains = [e.domain for e in test]
        metrics = {
            "world_model": score(predictions, references, domains),
            "retrieval": score(retrieved, references, domains),
            "format_valid": sum(well_formed) / max(len(well_formed), 1),
            "examples": len(test),
            "stage": params.evaluate.stage,
            "registered_version": int(trained["registered_version"]) if trained.get("registered_version") else None,
        }
        flat = {"format_valid": metrics["format_valid"]}
        for system in ("world_model", "retrieval"):
            for domain, values in metrics[system].items():
                flat[f"{system}.{domain}.exact_match"] = values["exact_match"]
                flat[f"{system}.{domain}.token_f1"] = values["token_f1"]
        mlflow.log_metrics(flat)
        rows = [
            {"id": e.id, "domain": e.domain, "action": e.action, "reference": ref, "prediction": pred, "retrieval": ret}
            for e, ref, pred, ret in zip(test, references, predictions, retrieved)
        ]
        write_jsonl(paths.report("predictions.jsonl"), rows)
        by_turn = paths.write_plot("exact_match_by_turn.csv", ["turn", "world_model", "retrieval", "n"], exact_match_by_turn(rows))
        mlflow.log_artifact(str(by_turn), artifact_path="plots")
        paths.write_report("eval_metrics.json", metrics)
        mlflow.log_artifact(str(paths.report("predictions.jsonl")))
        mlflow.log_dict(metrics, "eval_metrics.json")
        client = MlflowClient()
        overall = metrics["world_model"]["all"]
        for key in ("exact_match", "token_f1") if trained.get("registered_version") else ():
            client.set_model_version_tag(
                trained["registered_model"], trained["registered_version"], f"eval.{key}", f"{overall[key]:.4f}"
            )
    return metrics
