"""Stage gates: the next training stage runs only if this one's held-out metric is finite and
within its floor (`gate` in params.yaml), so a diverged CPT never feeds SFT.

The RL gate reads held-out token F1 of the predicted against the real observation, which GRPO
does not optimise (its reward mixes exact match, structure, format, facts and the judge's
rubric). What it guarantees is only that much: the RL model still reproduces at least
`gate.rl.min_eval_token_f1` of the real observations' tokens on held-out turns, so a policy
that learnt to please the reward while drifting from the real environment is stopped. It does
not prove the model better than SFT or than a baseline; promotion checks that."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agentworld.config import GateParams


class GateFailed(RuntimeError):
    """A stage's held-out metric is missing, not finite or beyond its floor; the message says which."""


@dataclass(frozen=True)
class GateDecision:
    stage: str
    passed: bool
    reason: str


def check_gate(stage: str, report: dict[str, Any], gates: GateParams) -> GateDecision:
    """Judge a stage's report (`reports/train/<stage>.json`) against `gate.<stage>`."""
    gate = getattr(gates, stage)
    metrics = report.get("eval_metrics") or {}
    checks: list[tuple[str, float | None, str]] = []
    if gate.max_eval_loss is not None or stage in ("cpt", "sft"):
        checks.append(("eval_loss", gate.max_eval_loss, "max"))
    if gate.min_eval_token_f1 is not None or stage == "rl":
        checks.append(("eval_token_f1", gate.min_eval_token_f1, "min"))
    if gate.min_eval_reward is not None:
        checks.append(("eval_reward", gate.min_eval_reward, "min"))
    for name, floor, kind in checks:
        value = metrics.get(name)
        if value is None:
            return GateDecision(stage, False, f"{stage}: held-out {name} missing from the stage's report")
        if not math.isfinite(value):
            return GateDecision(stage, False, f"{stage}: held-out {name} is {value} (not finite)")
        if floor is not None and kind == "max" and value > floor:
            return GateDecision(stage, False, f"{stage}: held-out {name} {value:.4f} is above gate.{stage}.max_{name} {floor}")
        if floor is not None and kind == "min" and value < floor:
            return GateDecision(stage, False, f"{stage}: held-out {name} {value:.4f} is below gate.{stage}.min_{name} {floor}")
    shown = ", ".join(f"{name} {metrics[name]:.4f}" for name, _, _ in checks)
    return GateDecision(stage, True, f"{stage}: passed ({shown})")


def enforce_gate(stage: str, report: dict[str, Any], gates: GateParams) -> str:
    decision = check_gate(stage, report, gates)
    if not decision.passed:
        raise GateFailed(decision.reason)
    return decision.reason
