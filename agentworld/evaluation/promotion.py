"""Champion/challenger: a newly evaluated world model takes the registry alias only if it is better.

The challenger is promoted when (1) it holds every per-domain floor of `promote.floors`,
(2) it beats every baseline of `promote.beat_baselines` (retrieval, copy-previous, untrained)
on `promote.primary_metric` over all domains, scored on the same records in the same evaluation,
and (3) it beats the current champion on that metric by at least `promote.margin`, both scored
on the same records. Without a champion, (1) and (2) decide.
Either way the decision and its reason are tags on the challenger's version, so the registry
tells why a version is, or is not, the champion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentworld.config import PromoteParams


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str
    challenger_score: float
    champion_score: float | None


def floor_violations(table: Mapping[str, Mapping[str, float]], floors: Mapping[str, float]) -> list[str]:
    """`domain metric value < floor` for every domain (not `all`) below a floor."""
    return [f"{domain} {metric} {row[metric]:.4f} < floor {floor}"
            for domain, row in table.items() if domain != "all"
            for metric, floor in floors.items() if row[metric] is not None and row[metric] < floor]


def baseline_losses(summary: Mapping[str, Any], metric: str, baselines: list[str]) -> list[str]:
    """`metric value <= baseline value` for every required baseline the world model does not beat.
    A required baseline missing from the summary is a configuration error, not a pass."""
    systems = summary["systems"]
    missing = [b for b in baselines if b not in systems]
    if missing:
        raise ValueError(f"promote.beat_baselines needs {', '.join(missing)} in the evaluation; add them to "
                         "evaluate.baselines (or remove them from promote.beat_baselines)")
    score = float(systems["world_model"]["all"][metric])
    return [f"{metric} {score:.4f} <= baseline {name} {float(systems[name]['all'][metric]):.4f}"
            for name in baselines if not score > float(systems[name]["all"][metric])]


def decide(challenger: Mapping[str, Any], champion: Mapping[str, Any] | None, params: PromoteParams) -> Decision:
    """Compare two evaluation summaries (`run.evaluate`) of the same records."""
    metric = params.primary_metric
    mine = challenger["systems"]["world_model"]
    score = float(mine["all"][metric])
    violations = floor_violations(mine, params.floors)
    if violations:
        return Decision(False, "below floor: " + "; ".join(violations), score, None)
    losses = baseline_losses(challenger, metric, params.beat_baselines)
    if losses:
        return Decision(False, "does not beat the baselines: " + "; ".join(losses), score, None)
    beaten = f", beats {', '.join(params.beat_baselines)}" if params.beat_baselines else ""
    if champion is None:
        return Decision(True, f"no {params.alias} yet; {metric} {score:.4f} holds every floor{beaten}", score, None)
    if champion["data"]["md5"] != challenger["data"]["md5"]:
        raise ValueError("champion and challenger were scored on different records; evaluate both on the same data")
    best = float(champion["systems"]["world_model"]["all"][metric])
    if score >= best + params.margin:
        return Decision(True, f"{metric} {score:.4f} >= {params.alias} {best:.4f} + margin {params.margin}{beaten}", score, best)
    return Decision(False, f"{metric} {score:.4f} < {params.alias} {best:.4f} + margin {params.margin}", score, best)


def apply(client: Any, name: str, challenger_version: str, champion_version: str | None,
          decision: Decision, params: PromoteParams) -> None:
    """Record the decision on the challenger and move the alias when it wins."""
    tags = {"promotion": "promoted" if decision.promote else "refused", "promotion_reason": decision.reason,
            "promotion_metric": params.primary_metric, "compared_with": champion_version or "none"}
    for key, value in tags.items():
        client.set_model_version_tag(name, challenger_version, key, value)
    if decision.promote:
        client.set_registered_model_alias(name, params.alias, challenger_version)
