"""Agent experiments over seeds, each one command and one MLflow group (a parent run):

- `sim_rl`: the BC agent vs BC + GRPO in the simulator (WorldModelEnv) vs BC + GRPO in the real
  environment, the two RL arms at the same wall-clock budget (`agent.rl.budget_s`), all measured
  on the same held-out REAL tasks. The real-environment interactions each used are counted.
- `warmup`: the agent initialised from the world model's weights vs from scratch (same
  architecture and tokenizer), the same downstream training (BC; `--rl sim` adds simulator RL),
  measured on the same held-out real tasks.

Table cells are mean ± 95% CI (Student's t) over seeds; each seed's agents share the seed's
demonstrations, and every agent is its own MLflow run and registered `agentworld-agent` version.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow

from agentworld.agents.train import collect_demos, train_agent
from agentworld.config import Params
from agentworld.experiments.stats import mean_ci
from agentworld.tracking.runs import configure, lineage_tags

REPORTED = ("real.success_rate", "real.verified_share", "real.mean_steps", "real.invalid_action_rate")
USAGE = ("real_steps_training", "rl_env_steps", "rl_episodes", "rl_wall_s", "rl_rollout_success", "rl_verified_share")
#: WM2Real on the evaluation tasks: success the simulator claims, real success of the same actions.
TRANSFER = ("wm2real.sim_success_rate", "wm2real.real_success_rate", "wm2real.agreement")


def seeded(params: Params, seed: int, **agent: Any) -> Params:
    """`params` with the agent (its init, BC and RL) seeded by `seed` and `agent` fields replaced."""
    settings = params.agent
    rl = settings.rl.model_copy(update={"seed": seed, **agent.pop("rl", {})})
    bc = settings.bc.model_copy(update={"seed": seed})
    return params.model_copy(update={"agent": settings.model_copy(update={"seed": seed, "bc": bc, "rl": rl, **agent})})


def summarise(per_seed: dict[int, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """{variant: {metric: {"mean", "ci95", "values"}}} over seeds."""
    variants = list(next(iter(per_seed.values())))
    table: dict[str, dict[str, Any]] = {}
    for variant in variants:
        runs = [r[variant]["metrics"] for r in per_seed.values()]
        row: dict[str, Any] = {}
        for metric in REPORTED + USAGE + TRANSFER:
            values = [m.get(metric, 0.0) for m in runs]
            mean, half = mean_ci(values)
            row[metric] = {"mean": mean, "ci95": half, "values": values}
        row["versions"] = [r[variant].get("version") for r in per_seed.values()]
        table[variant] = row
    return table


def render(title: str, table: dict[str, dict[str, Any]], seeds: Sequence[int], notes: Sequence[str]) -> str:
    def cell(row: dict[str, Any], metric: str, digits: int = 3) -> str:
        return f"{row[metric]['mean']:.{digits}f} ± {row[metric]['ci95']:.{digits}f}"

    lines = [f"{title}, seeds {', '.join(map(str, seeds))}: mean ± 95% CI over seeds", "",
             "| agent | real success | confirmed share | steps | invalid-action rate | real steps in training "
             "| RL env steps | RL episodes | RL wall s | RL rollout success | WM2Real: sim success "
             "| same actions, real success | sim-real agreement |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for variant, row in table.items():
        lines.append(f"| {variant} | {cell(row, 'real.success_rate')} | {cell(row, 'real.verified_share')} | "
                     f"{cell(row, 'real.mean_steps', 2)} | "
                     f"{cell(row, 'real.invalid_action_rate')} | {row['real_steps_training']['mean']:.0f} | "
                     f"{row['rl_env_steps']['mean']:.0f} | {row['rl_episodes']['mean']:.0f} | "
                     f"{row['rl_wall_s']['mean']:.0f} | {row['rl_rollout_success']['mean']:.3f} | "
                     f"{cell(row, 'wm2real.sim_success_rate')} | {cell(row, 'wm2real.real_success_rate')} | "
                     f"{cell(row, 'wm2real.agreement')} |")
    return "\n".join(lines + ["", "Confirmed share: of the real successes, those the checker confirmed afresh from "
                                    "the final state (reward-hacking check; 1.0 with no success)."] + list(notes))


def _experiment(name: str, params: Params, seeds: Sequence[int], root: Path,
                arms: Sequence[tuple[str, dict[str, Any], str | None]], notes: Sequence[str]) -> dict[str, Any]:
    """Run `arms` — (variant, agent overrides, variant whose model to start RL from) — for each seed."""
    if len(seeds) < 1:
        raise ValueError("--seeds: give at least one seed (three or more for a confidence interval)")
    configure(params.tracking.experiment, root)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = root / "runs" / "experiments" / name / stamp
    with mlflow.start_run(run_name=f"experiment:{name}:{stamp}") as parent_run:
        parent = parent_run.info.run_id
        mlflow.set_tags({"agentworld.kind": "experiment", "experiment": name, "seeds": ",".join(map(str, seeds)),
                         "domain": params.agent.domain, "world_model": params.agent.world_model, **lineage_tags(root)})
        mlflow.log_params({"agent.rl.budget_s": params.agent.rl.budget_s, "agent.bc.max_steps": params.agent.bc.max_steps,
                           "agent.eval_episodes": params.agent.eval_episodes, "agent.templates": ",".join(params.agent.templates)})
    demos = collect_demos(params, root)
    per_seed: dict[int, dict[str, dict[str, Any]]] = {}
    for seed in seeds:
        results: dict[str, dict[str, Any]] = {}
        for variant, overrides, base in arms:
            start_from = out / f"seed{seed}" / base / "model" if base else None
            results[variant] = train_agent(seeded(params, seed, **overrides), root, out / f"seed{seed}" / variant,
                                           parent_run_id=parent, demos=demos, start_from=start_from,
                                           tags={"experiment": name, "variant": variant})
        per_seed[seed] = results
    table = summarise(per_seed)
    text = render(name, table, seeds, notes)
    reports = root / "reports" / "experiments"
    reports.mkdir(parents=True, exist_ok=True)
    report = f"{name}_{params.agent.domain}"  # one table per experiment and domain
    (reports / f"{report}.json").write_text(json.dumps({"seeds": list(seeds), "table": table}, indent=2))
    (reports / f"{report}.md").write_text(text + "\n")
    with mlflow.start_run(run_id=parent):
        for variant, row in table.items():
            key = variant.replace("+", "_")  # MLflow metric names allow no "+"
            mlflow.log_metrics({f"{key}.{m}.mean": row[m]["mean"] for m in REPORTED + USAGE + TRANSFER})
        mlflow.log_artifact(str(reports / f"{report}.md"))
        mlflow.log_artifact(str(reports / f"{report}.json"))
    return {"table": table, "markdown": text, "parent_run_id": parent}


def run_sim_rl(params: Params, seeds: Sequence[int], root: Path) -> dict[str, Any]:
    settings = params.agent
    arms = [("bc", {"rl": {"env": "none"}}, None),
            ("bc+rl_sim", {"rl": {"env": "sim"}}, "bc"),
            ("bc+rl_real", {"rl": {"env": "real"}}, "bc")]
    notes = [f"Domain: {settings.domain}, templates {', '.join(settings.templates)}. "
             f"{settings.eval_episodes} held-out real tasks per agent (seeds from {settings.eval_seed}); "
             f"RL budget {settings.rl.budget_s:.0f} s wall clock per arm; simulator success: {settings.rl.sim_success}; "
             f"world model: {settings.world_model}.",
             "Real steps in training: the BC demonstrations' real steps (shared) plus RL's real-environment steps. "
             "The simulator's task set-up resets the real environment (no agent action reaches it)."]
    return _experiment("sim_rl", params, seeds, root, arms, notes)


def run_warmup(params: Params, seeds: Sequence[int], root: Path, rl: str = "none") -> dict[str, Any]:
    settings = params.agent
    arms = [("scratch", {"init": "scratch", "rl": {"env": rl}}, None),
            ("world_model_init", {"init": "world_model", "rl": {"env": rl}}, None)]
    notes = [f"Domain: {settings.domain}, templates {', '.join(settings.templates)}. Both arms: the world model's "
             f"architecture and tokenizer, BC {settings.bc.max_steps} steps on the same demonstrations"
             + ("" if rl == "none" else f", then GRPO ({rl}) for {settings.rl.budget_s:.0f} s")
             + f"; {settings.eval_episodes} held-out real tasks; world model: {settings.world_model}."]
    return _experiment("warmup", params, seeds, root, arms, notes)
