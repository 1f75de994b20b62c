"""Long-horizon consistency (Word2World): roll a world model forward on an episode's recorded
actions, feeding its own predictions back as history, and compare with the real observations
step by step. Single-step scores condition on the real history; this shows how fast a model's
errors compound when nothing corrects it, which is how an agent trained in it would see it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentworld.data.awbench import BenchRecord
from agentworld.data.prompts import WorldModelExample, parse_observation
from agentworld.evaluation.infer import Generate
from agentworld.scoring.metrics import exact_match, token_f1


def rollout(generate: Generate, episodes: Sequence[BenchRecord], horizon: int) -> list[dict[str, Any]]:
    """One row per (episode, step): the prediction from self-fed history next to the real observation.

    `episodes` are final records (`awbench.final_records`): each holds its episode's every action
    and observation. All episodes step together, one batch per step.
    """
    predicted: list[list[str]] = [[] for _ in episodes]
    observations = [ep.observations for ep in episodes]
    rows: list[dict[str, Any]] = []
    for step in range(horizon):
        active = [i for i, ep in enumerate(episodes) if step < min(len(ep.prompt), len(ep.response))]
        if not active:
            break
        examples = [
            WorldModelExample(id=f"{episodes[i].key}@{step}", domain=episodes[i].domain, system=episodes[i].system_str,
                              history=list(zip(episodes[i].prompt[:step], predicted[i])),
                              action=episodes[i].prompt[step], observation=observations[i][step])
            for i in active
        ]
        for i, example, generation in zip(active, examples, generate(examples)):
            prediction = parse_observation(generation)[0]
            predicted[i].append(prediction)
            rows.append({"episode": episodes[i].episode, "task": episodes[i].domain, "step": step, "action": example.action,
                         "prediction": prediction, "reference": example.observation,
                         "exact_match": exact_match(prediction, example.observation),
                         "token_f1": token_f1(prediction, example.observation)})
    return rows


def curve(rows: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Mean exact match and token F1 at each rollout step."""
    steps: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        steps.setdefault(int(row["step"]), []).append(row)
    return [
        {"step": step, "exact_match": sum(r["exact_match"] for r in group) / len(group),
         "token_f1": sum(r["token_f1"] for r in group) / len(group), "n": len(group)}
        for step, group in sorted(steps.items())
    ]


def crossings(curves: dict[str, list[dict[str, float]]], model: str = "world_model",
              metric: str = "token_f1") -> dict[str, int | None]:
    """Per baseline, the first rollout step (1-indexed) at which the free-running model scores
    below that baseline's own free-running curve on `metric`; None when it never does within the
    horizon. Where a teacher-forced win turns into a loss once errors compound, this says when."""
    ours = {int(p["step"]): p[metric] for p in curves.get(model, [])}
    out: dict[str, int | None] = {}
    for name, points in curves.items():
        if name == model:
            continue
        below = [int(p["step"]) for p in points if int(p["step"]) in ours and ours[int(p["step"])] < p[metric]]
        out[name] = min(below) + 1 if below else None
    return out


def describe_crossings(found: dict[str, int | None], horizon: int) -> str:
    """One sentence for reports: where the world model's rollout falls below each baseline's."""
    parts = [f"below {name} from step {step}" if step else f"never below {name}"
             for name, step in found.items()]
    return f"Free-running over {horizon} steps, the world model is " + "; ".join(parts) + "."
