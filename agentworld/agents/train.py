"""One agent, end to end: initial weights -> BC on real demonstrations -> GRPO in the simulator
(or the real environment, or not at all) -> evaluation on held-out REAL tasks -> an MLflow run
and a registered `agentworld-agent` version whose tags name the world model it trained in.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

import mlflow
from agentworld.agents.bc import Demo, recorded_demos, scripted_demos, train_bc
from agentworld.agents.episodes import Episode, play, summarise
from agentworld.agents.policy import LMAgent
from agentworld.agents.rl import train_rl
from agentworld.agents.wm2real import wm2real
from agentworld.config import Params
from agentworld.domains import make_env
from agentworld.envs.base import TextEnv
from agentworld.models.backends import BackendError, RegistryModel, TransformersBackend, local_model_dir
from agentworld.models.factory import ModelLoadError, load_local
from agentworld.simulation.env import RealTaskSource, WorldModelEnv
from agentworld.simulation.verifiers import make_verifier
from agentworld.tracking.registry import log_and_register
from agentworld.tracking.runs import configure, lineage_tags

log = logging.getLogger(__name__)
EVAL_BATCH = 10


@dataclass(frozen=True)
class WorldModel:
    """The world model an agent trains in (and may start from)."""

    path: Path
    label: str                      # models:/NAME/VERSION or the directory
    registered: RegistryModel | None


def resolve_world_model(spec: str, root: Path) -> WorldModel:
    try:
        path, registered = local_model_dir(spec, root / ".cache" / "models")
    except (BackendError, ModelLoadError) as err:
        raise BackendError(f"agent.world_model: {err} (train a world model first: make demo)") from None
    label = f"models:/{registered.name}/{registered.version}" if registered else str(path)
    return WorldModel(path, label, registered)


def initial_agent(params: Params, world_model: WorldModel, seed: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The agent before any training: a local checkpoint (`agent.model_path`), the world model's
    weights (`agent.init: world_model`, the warm-up) or fresh weights of its architecture."""
    settings = params.agent
    model, tokenizer = load_local(settings.model_path or world_model.path)
    if settings.model_path is None and settings.init == "scratch":
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    if hasattr(model.config, "output_router_logits"):
        model.config.output_router_logits = False
    return model, tokenizer


def collect_demos(params: Params, root: Path) -> tuple[list[Demo], int]:
    """Successful real trajectories: the validated data's, plus `agent.demo_episodes` fresh scripted ones."""
    settings = params.agent
    clean = root / "data" / "clean" / f"{settings.domain}.jsonl"
    demos = recorded_demos(clean, settings.templates) if clean.exists() else []
    fresh, steps = scripted_demos(settings.domain, settings.demo_episodes, settings.train_seed, settings.templates,
                                  settings.max_steps) if settings.demo_episodes else ([], 0)
    return demos + fresh, steps


def evaluate_real(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, params: Params) -> tuple[dict[str, float], list[Episode]]:
    """Greedy episodes on held-out real tasks: success rate, steps, invalid-action rate."""
    settings = params.agent
    agent = LMAgent(model, tokenizer, settings.domain, max_new_tokens=settings.max_new_tokens,
                    observation_chars=settings.observation_chars)
    seeds = [settings.eval_seed + k for k in range(settings.eval_episodes)]
    # Each in a worker process: the batch's real steps run in parallel.
    envs = [make_env(settings.domain, params.sandbox, process=True) for _ in range(min(EVAL_BATCH, len(seeds)))]
    episodes: list[Episode] = []
    try:
        for start in range(0, len(seeds), len(envs)):
            batch = seeds[start:start + len(envs)]
            episodes += play(agent, envs[:len(batch)], batch, max_steps=settings.max_steps,
                             templates=settings.templates, temperature=0.0)
    finally:
        for env in envs:
            env.close()
    return summarise(episodes), episodes


def evaluate_wm2real(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, params: Params,
                     world_model: WorldModel) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The same held-out tasks played greedily inside the world model, each episode's actions
    replayed in the real environment (agentworld/agents/wm2real.py)."""
    settings = params.agent
    agent = LMAgent(model, tokenizer, settings.domain, max_new_tokens=settings.max_new_tokens,
                    observation_chars=settings.observation_chars)
    make_sim, close = environment_factory(params, world_model, "sim")
    try:
        return wm2real(agent, make_sim, lambda: make_env(settings.domain, params.sandbox),
                       [settings.eval_seed + k for k in range(settings.eval_episodes)], max_steps=settings.max_steps,
                       templates=settings.templates, batch=EVAL_BATCH)
    finally:
        close()


def environment_factory(params: Params, world_model: WorldModel, rl_env: str) -> tuple[Callable[[], TextEnv], Callable[[], None]]:
    """What RL steps in: WorldModelEnvs sharing one world-model backend, one task source and the
    verifier named by `agent.rl.sim_success`; or real envs."""
    settings = params.agent
    if rl_env == "real":
        return (lambda: make_env(settings.domain, params.sandbox, process=True)), (lambda: None)
    backend = TransformersBackend(world_model.path, params.synthesize.max_new_tokens,
                                  settings.rl.num_generations * settings.rl.tasks_per_step, params.model.max_seq_len)
    tasks = RealTaskSource(settings.domain, lambda: make_env(settings.domain, params.sandbox))
    verifier = make_verifier(settings.rl.sim_success)
    return (lambda: WorldModelEnv(settings.domain, backend, tasks, verifier=verifier)), tasks.close


def run_name(params: Params) -> str:
    settings = params.agent
    init = "model_path" if settings.model_path else settings.init
    rl = "" if settings.rl.env == "none" else f"+rl_{settings.rl.env}"
    return f"agent:{init}:bc{rl}:seed{settings.seed}"


def start_agent_run(params: Params, root: Path, *, parent_run_id: str | None = None,
                    tags: dict[str, str] | None = None) -> str:
    """Open the agent's MLflow run (tags name the world model it trains in); return its id."""
    settings = params.agent
    configure(params.tracking.experiment, root)
    world_model = resolve_world_model(settings.world_model, root)
    with mlflow.start_run(run_name=run_name(params), parent_run_id=parent_run_id,
                          nested=parent_run_id is not None) as run:
        mlflow.set_tags({"agentworld.kind": "agent", "domain": settings.domain, "rl_env": settings.rl.env,
                         "init": "model_path" if settings.model_path else settings.init,
                         "world_model": world_model.label, "seed": str(settings.seed), **lineage_tags(root),
                         **(tags or {})})
        mlflow.log_params({k: v for k, v in params.flat().items() if k.startswith("agent.")})
        return run.info.run_id


def train_in_environment(params: Params, root: Path, out_dir: Path, run_id: str, *,
                         demos: tuple[Sequence[Demo], int] | None = None,
                         start_from: Path | None = None) -> dict[str, float]:
    """BC on real demonstrations, then RL in `agent.rl.env`; the agent is saved to `out_dir/model`.

    `start_from` is an agent already behaviour-cloned on the same `demos` (an experiment's shared
    BC agent): BC is skipped and RL starts from it; its demonstrations still count as real steps.
    """
    settings = params.agent
    configure(params.tracking.experiment, root)
    world_model = resolve_world_model(settings.world_model, root)
    demo_list, demo_steps = demos if demos is not None else collect_demos(params, root)
    metrics: dict[str, float] = {"bc_demos": float(len(demo_list)), "real_steps_demos": float(demo_steps)}
    with mlflow.start_run(run_id=run_id):
        if start_from is not None:
            model, tokenizer = load_local(start_from)
            mlflow.set_tag("bc_from", str(start_from))
        else:
            model, tokenizer = initial_agent(params, world_model, settings.seed)
            started = time.monotonic()
            bc = train_bc(model, tokenizer, demo_list, settings, params.distributed, out_dir / "bc")
            metrics.update(bc_train_loss=bc.train_loss, bc_wall_s=time.monotonic() - started)
        rl_real_steps = 0.0
        if settings.rl.env != "none":
            make, close = environment_factory(params, world_model, settings.rl.env)
            try:
                result, used = train_rl(model, tokenizer, make, settings, params.distributed, out_dir / "rl")
            finally:
                close()
            metrics.update(used, rl_steps=float(result.global_step))
            for step, reward in result.loss_curve:
                mlflow.log_metric("rl_reward", reward, step=step)
            rl_real_steps = used["rl_env_steps"] if settings.rl.env == "real" else 0.0
        metrics["real_steps_training"] = metrics["real_steps_demos"] + rl_real_steps
        mlflow.log_metrics(metrics)
    model.save_pretrained(out_dir / "model")
    tokenizer.save_pretrained(out_dir / "model")
    (out_dir / "train.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def evaluate_and_register(params: Params, root: Path, out_dir: Path, run_id: str, *,
                          register: bool = True) -> dict[str, Any]:
    """Evaluate `out_dir/model` on held-out real tasks, log it, and register it with its lineage."""
    settings = params.agent
    configure(params.tracking.experiment, root)
    world_model = resolve_world_model(settings.world_model, root)
    model, tokenizer = load_local(out_dir / "model")
    metrics = json.loads((out_dir / "train.json").read_text())
    started = time.monotonic()
    real, episodes = evaluate_real(model, tokenizer, params)
    transfer, replays = evaluate_wm2real(model, tokenizer, params, world_model)
    evaluated = {**{f"real.{k}": v for k, v in real.items()}, **{f"wm2real.{k}": v for k, v in transfer.items()},
                 "eval_wall_s": time.monotonic() - started}
    (out_dir / "real_episodes.jsonl").write_text("".join(json.dumps(e.as_record()) + "\n" for e in episodes))
    (out_dir / "wm2real_episodes.jsonl").write_text("".join(json.dumps(row) + "\n" for row in replays))
    version = None
    with mlflow.start_run(run_id=run_id):
        mlflow.log_metrics(evaluated)
        mlflow.log_artifact(str(out_dir / "real_episodes.jsonl"), artifact_path="eval")
        mlflow.log_artifact(str(out_dir / "wm2real_episodes.jsonl"), artifact_path="eval")
        if register:
            version_tags = {"world_model": world_model.label, "rl_env": settings.rl.env, "domain": settings.domain,
                            "init": "model_path" if settings.model_path else settings.init, "run_id": run_id,
                            "real.success_rate": f"{real['success_rate']:.4f}", **lineage_tags(root)}
            if world_model.registered:
                version_tags["world_model_version"] = world_model.registered.version
            version = log_and_register(model, tokenizer, settings.registered_model, version_tags)
    log.info("%s: real success %.3f, steps %.2f, invalid %.3f; WM2Real: simulator says %.3f, the same actions "
             "really succeed %.3f", run_name(params), real["success_rate"], real["mean_steps"],
             real["invalid_action_rate"], transfer["sim_success_rate"], transfer["real_success_rate"])
    return {"run_id": run_id, "name": run_name(params), "version": version, "world_model": world_model.label,
            "metrics": {**metrics, **evaluated}}


def train_agent(params: Params, root: Path, out_dir: Path, *, parent_run_id: str | None = None,
                demos: tuple[Sequence[Demo], int] | None = None, start_from: Path | None = None,
                register: bool = True, tags: dict[str, str] | None = None) -> dict[str, Any]:
    """BC -> RL (agent.rl.env) -> real evaluation, as one MLflow run; returns its metrics and version."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_id = start_agent_run(params, root, parent_run_id=parent_run_id, tags=tags)
    train_in_environment(params, root, out_dir, run_id, demos=demos, start_from=start_from)
    return evaluate_and_register(params, root, out_dir, run_id, register=register)

