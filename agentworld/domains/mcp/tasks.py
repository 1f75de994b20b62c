"""Parametrised tasks of the MCP domain: the seed picks the application, the task kind and its
targets in that seed's data; the solution is the exact JSON tool calls that solve it."""

from __future__ import annotations

import random

from agentworld.domains.mcp.apps import APP_NAMES, app_module
from agentworld.domains.mcp.seed import seed_data
from agentworld.envs.base import Task

DOMAIN = "mcp"


def generate_task(seed: int, app: str | None = None, kind: str | None = None) -> Task:
    """The task episode `seed` stands for (deterministic); `app` / `kind` may pin the choice."""
    app = app or APP_NAMES[seed % len(APP_NAMES)]
    module = app_module(app)
    rng = random.Random(f"mcp-task:{app}:{seed}")
    kind = kind or rng.choice(module.KINDS)
    if kind not in module.KINDS:
        raise ValueError(f"unknown {app} task kind {kind!r}; choose one of {', '.join(module.KINDS)}")
    data = seed_data(app, seed)
    instruction, check, solution = module.make_task(kind, data, rng)
    entities = module.entities(data, random.Random(f"mcp-entities:{app}:{seed}"))
    return Task(task_id=f"mcp-{app}-{kind}-s{seed}", domain=DOMAIN, instruction=instruction,
                setup={"app": app, "kind": kind, "data_seed": seed, "check": check, "entities": entities},
                solution=solution)
