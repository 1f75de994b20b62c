"""The staged-training ablation: SFT-only vs CPT->SFT vs CPT->SFT->RL (and SFT without reasoning),
on the same data and optimizer-step budget, over several seeds (`agentworld experiment stages`).

It lives with the stages because it is made of them: each variant runs the cpt, sft, rl and
evaluate stages in a workspace of its own, as DVC and Airflow run them.

Budget: CPT->SFT takes `cpt.max_steps + sft.max_steps` steps; SFT-only gets the same total as
SFT steps. CPT->SFT->RL continues that seed's CPT->SFT model with `rl.max_steps` GRPO steps on
top (its extra wall time is reported). SFT without reasoning starts from the same CPT model
with `sft.reasoning: false`. Every variant is scored by the evaluate stage on the same held-out
sample; the table gives exact match and token F1 per domain as mean and 95% CI over seeds.
All runs hang under one MLflow parent run (one comparable group), one result run per
(variant, seed) tagged `variant` and `seed`.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow

import stages.cpt
import stages.evaluate
import stages.rl
import stages.sft
import stages.tokenizer
from agentworld.config import Params
from agentworld.experiments.stats import mean_ci
from agentworld.tracking.runs import configure, lineage_tags

VARIANTS: tuple[str, ...] = ("sft_only", "cpt_sft", "cpt_sft_rl", "cpt_sft_no_reasoning")
METRICS: tuple[str, ...] = ("exact_match", "token_f1")


def _with(params: Params, seed: int, **sections: dict[str, Any]) -> Params:
    """`params` with every stage seeded by `seed` and the given section fields replaced."""
    update: dict[str, Any] = {}
    for name in ("cpt", "sft", "rl"):
        section = getattr(params, name)
        update[name] = section.model_copy(update={"seed": seed, **sections.get(name, {})})
    for name, fields in sections.items():
        if name not in update:
            update[name] = getattr(params, name).model_copy(update=fields)
    return params.model_copy(update=update)


def _workspace(root: Path, data_root: Path) -> Path:
    """A fresh folder whose data/ (built splits, AgentWorldBench export, corpora) links to the project's."""
    root.mkdir(parents=True, exist_ok=True)
    for rel in ("data/sft", "data/corpora", "data/agentworldbench"):
        link = root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to((data_root / rel).resolve(), target_is_directory=True)
    return root


def _evaluate(params: Params, root: Path, stage: str, parent: str) -> dict[str, Any]:
    evaluated = params.model_copy(update={"evaluate": params.evaluate.model_copy(update={"stage": stage})})
    return stages.evaluate.run(evaluated, root, parent)


def _log_result(variant: str, seed: int, metrics: dict[str, Any], wall_s: float, steps: dict[str, int],
                parent: str) -> None:
    with mlflow.start_run(run_name=f"{variant}:seed{seed}", parent_run_id=parent, nested=True):
        mlflow.set_tags({"agentworld.kind": "experiment-result", "experiment": "stages", "variant": variant,
                         "seed": str(seed)})
        mlflow.log_params({f"steps.{k}": v for k, v in steps.items()})
        flat = {f"{domain}.{m}": values[m] for domain, values in metrics["world_model"].items() for m in METRICS}
        mlflow.log_metrics({**flat, "train_wall_s": wall_s})


def run_seed(params: Params, seed: int, variants: Sequence[str], out: Path, data_root: Path,
             parent: str) -> dict[str, dict[str, Any]]:
    """Every asked variant for one seed; returns {variant: {"metrics", "wall_s", "steps"}}."""
    results: dict[str, dict[str, Any]] = {}
    budget = params.cpt.max_steps + params.sft.max_steps
    needs_cpt = any(v != "sft_only" for v in variants)
    staged = _workspace(out / f"seed{seed}" / "cpt_sft", data_root)
    seeded = _with(params, seed)
    cpt_s = 0.0
    if needs_cpt:
        started = time.monotonic()
        stages.tokenizer.run(seeded, staged, parent)
        stages.cpt.run(seeded, staged, parent, register=False)
        cpt_s = time.monotonic() - started
    if {"cpt_sft", "cpt_sft_rl"} & set(variants):
        started = time.monotonic()
        stages.sft.run(seeded, staged, parent, register=False)
        sft_s = time.monotonic() - started
        results["cpt_sft"] = {"metrics": _evaluate(seeded, staged, "sft", parent), "wall_s": cpt_s + sft_s,
                              "steps": {"cpt": params.cpt.max_steps, "sft": params.sft.max_steps}}
        if "cpt_sft_rl" in variants:
            started = time.monotonic()
            stages.rl.run(seeded, staged, parent, register=False)
            results["cpt_sft_rl"] = {"metrics": _evaluate(seeded, staged, "rl", parent),
                                     "wall_s": cpt_s + sft_s + time.monotonic() - started,
                                     "steps": {**results["cpt_sft"]["steps"], "rl": params.rl.max_steps}}
    if "cpt_sft_no_reasoning" in variants:
        plain = _workspace(out / f"seed{seed}" / "cpt_sft_no_reasoning", data_root)
        for rel in ("models/cpt", "reports/train/cpt.json"):
            src, dest = staged / rel, plain / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, dest, dirs_exist_ok=True) if src.is_dir() else shutil.copy(src, dest)
        no_reasoning = _with(params, seed, sft={"reasoning": False})
        started = time.monotonic()
        stages.sft.run(no_reasoning, plain, parent, register=False)
        results["cpt_sft_no_reasoning"] = {"metrics": _evaluate(no_reasoning, plain, "sft", parent),
                                           "wall_s": cpt_s + time.monotonic() - started,
                                           "steps": {"cpt": params.cpt.max_steps, "sft": params.sft.max_steps}}
    if "sft_only" in variants:
        alone = _workspace(out / f"seed{seed}" / "sft_only", data_root)
        sft_only = _with(params, seed, sft={"init": "scratch", "max_steps": budget})
        started = time.monotonic()
        stages.tokenizer.run(sft_only, alone, parent)
        stages.sft.run(sft_only, alone, parent, register=False)
        results["sft_only"] = {"metrics": _evaluate(sft_only, alone, "sft", parent),
                               "wall_s": time.monotonic() - started, "steps": {"sft": budget}}
    for variant, result in results.items():
        _log_result(variant, seed, result["metrics"], result["wall_s"], result["steps"], parent)
    return results


def summarise(per_seed: dict[int, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """{variant: {domain: {metric: {"mean", "ci95", "values"}}, "wall_s": ...}} over seeds."""
    table: dict[str, Any] = {}
    variants = [v for v in VARIANTS if any(v in r for r in per_seed.values())]
    for variant in variants:
        runs = [r[variant] for r in per_seed.values() if variant in r]
        domains = sorted(runs[0]["metrics"]["world_model"], key=lambda d: (d == "all", d))
        row: dict[str, Any] = {}
        for domain in domains:
            row[domain] = {}
            for metric in METRICS:
                values = [r["metrics"]["world_model"][domain][metric] for r in runs]
                mean, half = mean_ci(values)
                row[domain][metric] = {"mean": mean, "ci95": half, "values": values}
        row["retrieval"] = {m: runs[0]["metrics"]["retrieval"]["all"][m] for m in METRICS}
        row["wall_s"] = mean_ci([r["wall_s"] for r in runs])[0]
        row["steps"] = runs[0]["steps"]
        table[variant] = row
    return table


def render(table: dict[str, Any], seeds: Sequence[int]) -> str:
    """A Markdown table: exact match and token F1 per domain, mean ± 95% CI over seeds."""
    domains = [d for d in next(iter(table.values())) if d not in ("retrieval", "wall_s", "steps")]
    lines = [f"Staged-training ablation, seeds {', '.join(map(str, seeds))}: held-out exact match / token F1, "
             "mean ± 95% CI", "",
             "| variant | steps | train s | " + " | ".join(domains) + " |",
             "|---|---|---|" + "---|" * len(domains)]
    for variant, row in table.items():
        cells = [f"{row[d]['exact_match']['mean']:.3f} ± {row[d]['exact_match']['ci95']:.3f} / "
                 f"{row[d]['token_f1']['mean']:.3f} ± {row[d]['token_f1']['ci95']:.3f}" for d in domains]
        steps = "+".join(f"{k} {v}" for k, v in row["steps"].items())
        lines.append(f"| {variant} | {steps} | {row['wall_s']:.0f} | " + " | ".join(cells) + " |")
    retrieval = next(iter(table.values()))["retrieval"]
    lines += ["", f"Retrieval baseline (all): exact match {retrieval['exact_match']:.3f}, "
                  f"token F1 {retrieval['token_f1']:.3f}"]
    return "\n".join(lines)


def run_stages_experiment(params: Params, seeds: Sequence[int], variants: Sequence[str], data_root: Path,
                          out_root: Path) -> dict[str, Any]:
    """Run the ablation; write reports/experiments/stages.{json,md} under `data_root`; return the table."""
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    for rel in ("data/sft/train.jsonl", "data/sft/test.jsonl", "data/agentworldbench", "data/corpora"):
        if not (data_root / rel).exists():
            raise FileNotFoundError(f"{data_root / rel}: missing; run `dvc repro build corpora` (or the demo) first")
    configure(params.tracking.experiment)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = out_root / stamp
    with mlflow.start_run(run_name=f"experiment:stages:{stamp}") as parent_run:
        parent = parent_run.info.run_id
        mlflow.set_tags({"agentworld.kind": "experiment", "experiment": "stages", "seeds": ",".join(map(str, seeds)),
                         "variants": ",".join(variants), **lineage_tags(data_root)})
        mlflow.log_params({"cpt.max_steps": params.cpt.max_steps, "sft.max_steps": params.sft.max_steps,
                           "rl.max_steps": params.rl.max_steps, "model.hidden_size": params.model.hidden_size})
    per_seed = {seed: run_seed(params, seed, variants, out, data_root, parent) for seed in seeds}
    table = summarise(per_seed)
    text = render(table, seeds)
    reports = data_root / "reports" / "experiments"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "stages.json").write_text(json.dumps({"seeds": list(seeds), "table": table}, indent=2))
    (reports / "stages.md").write_text(text + "\n")
    with mlflow.start_run(run_id=parent):
        for variant, row in table.items():
            for domain, values in row.items():
                if isinstance(values, dict) and "exact_match" in values and isinstance(values["exact_match"], dict):
                    for metric in METRICS:
                        mlflow.log_metric(f"{variant}.{domain}.{metric}.mean", values[metric]["mean"])
        mlflow.log_artifact(str(reports / "stages.md"))
        mlflow.log_artifact(str(reports / "stages.json"))
    return {"table": table, "markdown": text, "parent_run_id": parent}
