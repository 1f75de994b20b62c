"""Evaluation end to end: infer -> judge -> score for a world model and its baselines.

Used by the `evaluate` stage and by `agentworld eval run`. Everything lands under one output
directory:

    predictions/<system>.jsonl        step 1, resumable
    judged/<judge>/<system>.jsonl     step 2, resumable
    rollout/<system>.jsonl            long-horizon consistency
    summary.json, summary.md          step 3: per-domain tables next to the baselines
    worst_examples.md, plots/*.png
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworld.config import EvaluateParams, ModelParams
from agentworld.data.awbench import BenchRecord, final_records, write_bench
from agentworld.data.io import claim_directory, write_jsonl
from agentworld.data.prompts import WorldModelExample, assistant_turn
from agentworld.data.retrieval import RetrievalMemory, episode_of
from agentworld.data.sampling import balanced_sample
from agentworld.evaluation import report
from agentworld.evaluation.baselines import LeaveEpisodeOutRetrieval, RetrievalBaseline, copy_previous, episode_first
from agentworld.evaluation.infer import Generate, infer
from agentworld.evaluation.judging import judge_predictions, make_judges
from agentworld.evaluation.rollout import crossings, curve, rollout
from agentworld.models.backends import (
    BackendError,
    OpenAIBackend,
    RegistryModel,
    TransformersBackend,
    VLLMBackend,
    local_model_dir,
)
from agentworld.scoring.judge import DIMENSIONS, rank_agreement

#: Generation cap of the untrained baseline (see `untrained_generate`).
UNTRAINED_MAX_NEW_TOKENS = 16


@dataclass
class WorldModel:
    """The model under evaluation: how to call it, and what to call it in reports."""

    label: str
    generate: Generate
    model_dir: Path | None = None
    registered: RegistryModel | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: What makes two evaluations' predictions interchangeable (resume only within one identity).
    identity: str = ""


def open_world_model(settings: EvaluateParams, *, model: str | None = None, base_url: str | None = None,
                     model_name: str | None = None, cache_root: Path = Path(".cache/models"),
                     max_seq_len: int | None = None) -> WorldModel:
    """A registered model, a local checkpoint (transformers or vLLM engine) or an OpenAI-compatible server."""
    if base_url:
        if not model_name:
            raise BackendError("--base-url needs --model-name (the model id the server serves)")
        backend = OpenAIBackend(base_url, model_name, settings.max_new_tokens, concurrency=settings.batch_size)
        backend.check()
        label = f"{model_name} at {base_url}"
        return WorldModel(label=label, generate=backend.generate, identity=label)
    if not model:
        raise BackendError("give --model (models:/NAME@ALIAS, models:/NAME/VERSION or a checkpoint directory) or --base-url")
    path, registered = local_model_dir(model, cache_root)
    if settings.engine == "vllm":
        backend = VLLMBackend(path, settings.max_new_tokens, max_seq_len)
    else:
        backend = TransformersBackend(path, settings.max_new_tokens, settings.batch_size, max_seq_len)
    label = f"models:/{registered.name}/{registered.version}" if registered else str(path)
    return WorldModel(label=label, generate=backend.generate, model_dir=path, registered=registered,
                      identity=f"{label} {checkpoint_stamp(path)}")


def checkpoint_stamp(path: Path) -> str:
    """Size and modification time of a checkpoint's files: changes whenever it is retrained."""
    files = sorted(p for p in path.iterdir() if p.is_file())
    return ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)


def prepare_out_dir(out_dir: Path, fingerprint: dict[str, Any]) -> None:
    """Keep an interrupted evaluation's files only if they belong to the same model, data and
    settings (then inference resumes); otherwise start the directory afresh."""
    claim_directory(out_dir, fingerprint)


def sample_records(records: Sequence[BenchRecord], limit: int | None, seed: int) -> list[BenchRecord]:
    """A fixed seeded subset in id order, so every model is scored on the same records; balanced
    over domains, so that a per-domain comparison has as many records as the split allows."""
    return balanced_sample(records, limit, seed, domain=lambda r: r.domain, key=lambda r: r.key)


def records_md5(records: Sequence[BenchRecord]) -> str:
    digest = hashlib.md5()
    for record in records:
        digest.update(json.dumps(record.model_dump(mode="json"), sort_keys=True).encode())
    return digest.hexdigest()


def observations_as_turns(observations: list[str]) -> list[str]:
    return [assistant_turn(o) for o in observations]


def retrieval_lookup(records: Sequence[BenchRecord], train: Sequence[WorldModelExample] | None
                     ) -> Callable[[Sequence[WorldModelExample]], list[str]]:
    """Nearest neighbour over the training split, or over the other episodes when there is none."""
    if train:
        return RetrievalBaseline(train).predict
    pool = [r.to_example() for r in records]
    keys = {r.key: r.episode for r in records}
    loo = LeaveEpisodeOutRetrieval(pool, [keys[r.key] for r in records])
    # A record's example has its key as id; a rollout's (the simulator's) `<key>:<turn>`.
    return lambda examples: loo.predict_excluding(examples, [keys.get(e.id) or keys.get(episode_of(e.id), e.id)
                                                             for e in examples])


def retrieval_generate(records: Sequence[BenchRecord], train: Sequence[WorldModelExample] | None) -> Generate:
    lookup = retrieval_lookup(records, train)
    return lambda examples: observations_as_turns(lookup(examples))


def episode_retrieval_generate(records: Sequence[BenchRecord], train: Sequence[WorldModelExample] | None
                               ) -> Generate:
    lookup = retrieval_lookup(records, train)
    return lambda examples: observations_as_turns(episode_first(examples, lookup(examples)))


def ranked_memory_generate(world_model: WorldModel) -> Generate | None:
    """The world model's own first memory candidate, with no language model: what its learned
    ranking of retrieved and episode observations alone predicts (None for a model without a
    ranked memory). The world model is worth its language model only where it beats this."""
    memory = RetrievalMemory.load(world_model.model_dir) if world_model.model_dir else None
    if memory is None or memory.scorer is None:
        return None
    return lambda examples: observations_as_turns([e.retrieved[0] if e.retrieved else ""
                                                   for e in memory.annotate(examples)])


def untrained_generate(settings: EvaluateParams, model_dir: Path | None, model_params: ModelParams,
                       records: Sequence[BenchRecord], work_dir: Path) -> Generate:
    """The initialisation floor: the evaluated architecture and tokenizer with fresh random
    weights, or (for a remote model) our own model factory's fresh model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from agentworld.models.factory import build_model, load_local_tokenizer

    target = work_dir / "untrained-model"
    if not (target / "config.json").exists():
        torch.manual_seed(0)
        if model_dir is not None:
            tokenizer = load_local_tokenizer(model_dir)
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir, local_files_only=True),
                                                     dtype=torch.float32)
        else:
            episodes = final_records(records, min_turns=1)[:2000]  # each holds its whole episode
            texts = [r.system_str for r in episodes] + [t for r in episodes for t in (*r.prompt, *r.response)]
            model, tokenizer = build_model(model_params.model_copy(update={"source": "scratch"}), texts)
        # The config of a training checkpoint may carry use_cache off (training needs no KV
        # cache); generating without one recomputes the whole prompt per token, 10x slower.
        model.config.use_cache = model.generation_config.use_cache = True
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
    max_seq_len = model_params.max_seq_len if model_dir is None else None
    # Random weights never emit the end-of-turn token; their output is noise at any length, so
    # a short cap keeps the floor cheap (it would otherwise cost more than the model itself).
    max_new_tokens = min(settings.max_new_tokens, UNTRAINED_MAX_NEW_TOKENS)
    return TransformersBackend(target, max_new_tokens, settings.batch_size, max_seq_len).generate


def baseline_generators(settings: EvaluateParams, pool: Sequence[BenchRecord], world_model: WorldModel,
                        train: Sequence[WorldModelExample] | None, model_params: ModelParams,
                        out_dir: Path) -> dict[str, Generate]:
    systems: dict[str, Generate] = {}
    for name in settings.baselines:
        if name == "retrieval":
            systems[name] = retrieval_generate(pool, train)
        elif name == "episode_retrieval":
            systems[name] = episode_retrieval_generate(pool, train)
        elif name == "copy_previous":
            systems[name] = lambda examples: observations_as_turns(copy_previous(examples))
        elif name == "ranked_memory":
            if (ranked := ranked_memory_generate(world_model)) is not None:
                systems[name] = ranked
            else:
                print("evaluate: no ranked_memory baseline (the model has no retrieval memory with a scorer)")
        elif name == "untrained":
            systems[name] = untrained_generate(settings, world_model.model_dir, model_params, pool, out_dir)
    return systems


def judge_agreement(local: Sequence[dict[str, Any]], llm: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Spearman correlation of the two judges over the same predictions, overall and per dimension."""
    out = {"overall": rank_agreement([r["overall"] for r in local], [r["overall"] for r in llm])}
    for dim in DIMENSIONS:
        out[dim] = rank_agreement([r[dim] for r in local], [r[dim] for r in llm], dim)
    return out


def read_rows(path: Path) -> list[dict[str, Any]]:
    from agentworld.data.io import read_jsonl

    return list(read_jsonl(path)) if path.exists() else []


def infer_step(records: Sequence[BenchRecord], world_model: WorldModel, settings: EvaluateParams, out_dir: Path, *,
               data_path: str, model_params: ModelParams, train: Sequence[WorldModelExample] | None = None,
               pool: Sequence[BenchRecord] | None = None, seed: int = 0, progress: bool = True) -> list[str]:
    """Step 1: every system's predictions (resumable) and rollouts; returns the systems' names.

    The evaluated records are copied to `data/` under `out_dir` in the AgentWorldBench layout,
    so the judge and score steps (and anyone reading the report) see exactly what was scored.
    """
    prepare_out_dir(out_dir, {"model": world_model.identity or world_model.label, "data": records_md5(records),
                              "settings": settings.model_dump(mode="json", exclude={"judge", "judge_base_url",
                                                                                    "judge_model", "worst_examples"})})
    write_bench(records, out_dir / "data")
    pool = list(pool) if pool is not None else list(records)
    systems = {"world_model": world_model.generate,
               **baseline_generators(settings, pool, world_model, train, model_params, out_dir)}
    for name, generate in systems.items():
        infer(name, generate, records, out_dir / "predictions" / f"{name}.jsonl", settings.batch_size, progress)
    episodes = sample_records(final_records(pool), settings.rollout_episodes, seed) if settings.rollout_episodes else []
    for name, generate in systems.items() if episodes else ():
        write_jsonl(out_dir / "rollout" / f"{name}.jsonl", rollout(generate, episodes, settings.rollout_horizon, name))
    meta = {"model": {"label": world_model.label,
                      "registered_model": world_model.registered.name if world_model.registered else None,
                      "registered_version": world_model.registered.version if world_model.registered else None,
                      **world_model.extra},
            "data": {"path": data_path, "records": len(records), "md5": records_md5(records),
                     "domains": {d: sum(r.domain == d for r in records) for d in sorted({r.domain for r in records})}},
            "systems": list(systems), "rollout_episodes": len(episodes)}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2))
    return list(systems)


def judge_step(records: Sequence[BenchRecord], settings: EvaluateParams, out_dir: Path,
               progress: bool = True) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Step 2: each judge's scores of each system's predictions (resumable)."""
    systems = json.loads((out_dir / "meta.json").read_text())["systems"]
    judges = make_judges(settings.judge, settings.judge_base_url, settings.judge_model)
    return {jname: {name: judge_predictions(judge, records, read_rows(out_dir / "predictions" / f"{name}.jsonl"),
                                            out_dir / "judged" / jname / f"{name}.jsonl",
                                            progress=progress, desc=f"judge {name} ({jname})")
                    for name in systems} for jname, judge in judges.items()}


def score_step(records: Sequence[BenchRecord], settings: EvaluateParams, out_dir: Path) -> dict[str, Any]:
    """Step 3: summary.json/.md, worst examples and plots from the files of steps 1 and 2."""
    meta = json.loads((out_dir / "meta.json").read_text())
    systems = meta["systems"]
    judges = sorted(p.name for p in (out_dir / "judged").iterdir() if p.is_dir()) if (out_dir / "judged").exists() else []
    if not judges:
        raise FileNotFoundError(f"{out_dir / 'judged'}: no judged predictions; run the judge step first")
    primary = "llm" if "llm" in judges else judges[0]
    predictions = {name: read_rows(out_dir / "predictions" / f"{name}.jsonl") for name in systems}
    judged = {j: {name: read_rows(out_dir / "judged" / j / f"{name}.jsonl") for name in systems} for j in judges}
    for name in systems:
        for j in judges:
            if len(judged[j][name]) != len(records) or len(predictions[name]) != len(records):
                raise ValueError(f"{out_dir}: {name} has {len(predictions[name])} predictions and "
                                 f"{len(judged[j][name])} {j}-judged rows for {len(records)} records; rerun infer and judge")
    curves = {name: curve(read_rows(out_dir / "rollout" / f"{name}.jsonl")) for name in systems
              if (out_dir / "rollout" / f"{name}.jsonl").exists()}
    summary: dict[str, Any] = {
        "model": meta["model"], "data": meta["data"], "judges": judges, "primary_judge": primary,
        "systems": {name: report.system_scores(records, predictions[name], judged[primary][name]) for name in systems},
        "by_turn": {name: report.by_turn(records, predictions[name]) for name in systems},
        "rollout": curves, "rollout_episodes": meta["rollout_episodes"], "judge_agreement": None,
        "rollout_below_baseline_from": crossings(curves) if "world_model" in curves else {},
    }
    if {"local", "llm"} <= set(judges):
        summary["secondary_systems"] = {name: report.system_scores(records, predictions[name], judged["local"][name])
                                        for name in systems}
        summary["judge_agreement"] = judge_agreement([row for name in systems for row in judged["local"][name]],
                                                     [row for name in systems for row in judged["llm"][name]])
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    (out_dir / "summary.md").write_text(report.render_markdown(summary))
    worst = report.worst_examples(records, predictions["world_model"], judged[primary]["world_model"], settings.worst_examples)
    (out_dir / "worst_examples.md").write_text(report.render_worst(worst))
    report.write_plots(summary, out_dir / "plots")
    return summary


def evaluate(records: Sequence[BenchRecord], world_model: WorldModel, settings: EvaluateParams, out_dir: Path, *,
             data_path: str, model_params: ModelParams, train: Sequence[WorldModelExample] | None = None,
             pool: Sequence[BenchRecord] | None = None, seed: int = 0, progress: bool = True) -> dict[str, Any]:
    """Infer, judge and score `records` for the world model and its baselines; write the report."""
    infer_step(records, world_model, settings, out_dir, data_path=data_path, model_params=model_params, train=train,
               pool=pool, seed=seed, progress=progress)
    judge_step(records, settings, out_dir, progress)
    return score_step(records, settings, out_dir)


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """MLflow metric names: `<system>.<domain>.<metric>`, plus rollout and judge agreement."""
    out: dict[str, float] = {}
    for system, table in summary["systems"].items():
        for domain, row in table.items():
            for metric in report.METRICS:
                out[f"{system}.{domain}.{metric}"] = row[metric]
    for system, points in summary["rollout"].items():
        for point in points:
            out[f"rollout.{system}.step{point['step'] + 1}.token_f1"] = point["token_f1"]
    for key, value in (summary.get("judge_agreement") or {}).items():
        out[f"judge_agreement.{key}"] = value
    return {k: float(v) for k, v in out.items() if v is not None and v == v}  # n/a and NaN (no ranking) left out
