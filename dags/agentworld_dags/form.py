"""The trigger form: Airflow Params generated from the params schema (types, bounds, choices,
descriptions), with params.yaml's values as defaults, and the form's values as overrides."""

from __future__ import annotations

from typing import Any

from agentworld.config import KNOWN_DOMAINS, Params, load_params, parse_params
from agentworld.tracking.runs import project_root

#: Trigger-form field -> (params.yaml key path, what it does). Types, bounds and choices come from
#: the pydantic schema of that key; the default shown is params.yaml's value.
FORM_FIELDS: dict[str, tuple[str, str]] = {
    "domains": ("collect.domains", "Domains to collect from (unavailable ones are skipped with their reason)."),
    "episodes_per_domain": ("collect.episodes_per_domain",
                            "Episodes collected per selected domain. Changing it applies the new count to EVERY "
                            "selected domain (the per-domain counts of `episodes` are then dropped), unless you "
                            "also edit `episodes`."),
    "episodes": ("collect.episodes",
                 "Per-domain episode counts that win over episodes_per_domain for the domains listed "
                 "(params.yaml's collect.episodes). Set {} to give every domain episodes_per_domain."),
    "max_steps": ("collect.max_steps", "Steps per collected episode at most."),
    "hidden_size": ("model.hidden_size", "Width of the from-scratch world model."),
    "num_layers": ("model.num_layers", "Transformer layers of the from-scratch world model."),
    "num_experts": ("model.num_experts", "MoE experts per layer."),
    "moe_intermediate_size": ("model.moe_intermediate_size", "Hidden size of each expert."),
    "cpt_steps": ("cpt.max_steps", "Optimiser steps of continual pre-training."),
    "sft_steps": ("sft.max_steps", "Optimiser steps of supervised fine-tuning."),
    "rl_steps": ("rl.max_steps", "GRPO steps of the RL stage."),
    "eval_examples": ("evaluate.max_examples", "Held-out records the evaluate stage scores."),
    "synth_domains": ("synthesize.domains", "Domains simulated by the world model."),
    "synth_episodes": ("synthesize.episodes_per_domain", "Simulated episodes per domain."),
    "synth_max_steps": ("synthesize.max_steps", "Steps per simulated episode at most."),
    "synth_stage": ("synthesize.stage", "Which trained stage's model (models/<stage> of the project) simulates."),
    "faults": ("synthesize.control.faults", "Faults the simulator injects (e.g. timeouts, permission denied)."),
    "fault_rate": ("synthesize.control.fault_rate", "Share of steps that get a fault."),
    "perturbation": ("synthesize.control.perturbation", "A change to the initial state, in words (empty: none)."),
    "fiction": ("synthesize.control.fiction", "A fictional world to simulate consistently (empty: none)."),
    "agent_world_model": ("agent.world_model", "The world model the agent trains in (registry URI or directory)."),
    "agent_init": ("agent.init", "scratch: fresh weights; world_model: the world model's weights (warm-up)."),
    "agent_rl_env": ("agent.rl.env", "Where agent RL runs: sim (the world model), real, or none (BC only)."),
    "agent_rl_budget_s": ("agent.rl.budget_s", "Wall-clock budget of agent RL, seconds."),
    "agent_bc_steps": ("agent.bc.max_steps", "Behaviour-cloning optimiser steps."),
    "agent_eval_episodes": ("agent.eval_episodes", "Held-out real tasks the agent is evaluated on."),
    "agent_seed": ("agent.seed", "Seed of the agent's initialisation and training."),
    "agent_test_suite": ("agent_test.suite", "The agent test suite file (YAML), relative to the project."),
    "agent_test_agent": ("agent_test.agent", "The agent under test (models:/NAME@ALIAS or models:/NAME/VERSION)."),
}


def _section_and_leaf(params: Params, key: str) -> tuple[Any, str]:
    obj: Any = params
    *sections, leaf = key.split(".")
    for part in sections:
        obj = getattr(obj, "validate_" if part == "validate" else part)
    return obj, leaf


def field_schema(params: Params, key: str) -> dict[str, Any]:
    """The JSON schema of one params.yaml key (type, bounds, choices), in the shape Airflow's form reads."""
    section, leaf = _section_and_leaf(params, key)
    schema = dict(type(section).model_json_schema()["properties"][leaf])
    for drop in ("title", "default"):
        schema.pop(drop, None)
    if "anyOf" in schema:  # Optional[X]: the form takes a type list, with null allowed
        options = schema.pop("anyOf")
        schema["type"] = [o["type"] for o in options if "type" in o]
        for option in options:
            schema.update({k: v for k, v in option.items() if k != "type"})
    if leaf == "domains":
        schema["items"] = {"type": "string", "enum": list(KNOWN_DOMAINS)}
    return schema


def trigger_params(names: list[str] | None = None) -> dict[str, Any]:
    """Airflow Params of the trigger form: params.yaml's values as defaults, the schema's bounds.

    Read when the DAG file is parsed, so the form shows what a run would use now; a value
    outside the schema is refused by the form (and the REST API) before any task starts.
    """
    from airflow.sdk import Param

    params = load_params(project_root() / "params.yaml")
    out: dict[str, Any] = {}
    for name in names or list(FORM_FIELDS):
        key, description = FORM_FIELDS[name]
        section, leaf = _section_and_leaf(params, key)
        default = getattr(section, leaf)
        default = default.model_dump(mode="json") if hasattr(default, "model_dump") else default
        out[name] = Param(default, description=f"{description} (params.yaml: {key})", title=name,
                          section=key.split(".")[0], **field_schema(params, key))
    return out


def overrides_from_form(form: dict[str, Any], base: Params) -> dict[str, Any]:
    """Trigger-form values -> params.yaml key paths. A changed `episodes_per_domain` with
    untouched per-domain `episodes` applies to every selected domain (what the user asked for)."""
    overrides = {FORM_FIELDS[k][0]: v for k, v in form.items() if k in FORM_FIELDS and v is not None}
    per_domain_given = "episodes" in form and form["episodes"] != base.collect.episodes
    if (form.get("episodes_per_domain") not in (None, base.collect.episodes_per_domain)
            and not per_domain_given):
        overrides["collect.episodes"] = {}
    return overrides


def apply_overrides(params: Params, overrides: dict[str, Any], source: str) -> Params:
    """Replace (not merge) each dotted key's value, then validate the whole again."""
    raw = params.model_dump(mode="json", by_alias=True)
    for key, value in overrides.items():
        target = raw
        *sections, leaf = key.split(".")
        for part in sections:
            target = target[part]
        target[leaf] = value
    return parse_params(raw, source)

