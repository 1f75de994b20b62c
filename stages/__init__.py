"""Pipeline stages: the only code that DVC (via `agentworld stage NAME`) and Airflow call.

Each stage is `run(params, root, parent_run_id=None) -> summary dict` (per-domain stages also
take `domains`), reads its section of
params.yaml, writes its declared outputs under `root`, and logs one MLflow run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentworld.config import Params

STAGE_ORDER = ("collect", "validate", "corpora", "build", "tokenizer", "cpt", "sft", "rl", "evaluate", "promote", "synthesize")
#: The world model's staged training, in order (each starts from the model of the one before).
TRAINING_STAGES = ("cpt", "sft", "rl")
#: Stages that run once per domain (dvc.yaml `foreach`, Airflow dynamic task mapping).
PER_DOMAIN_STAGES = ("collect", "validate")

StageFn = Callable[[Params, Path, str | None], dict[str, Any]]


def get_stage(name: str) -> StageFn:
    if name not in STAGE_ORDER:
        raise KeyError(f"unknown stage {name!r}; stages are {', '.join(STAGE_ORDER)}")
    return importlib.import_module(f"stages.{name}").run
