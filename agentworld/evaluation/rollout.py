"""Long-horizon consistency (Word2World): roll a world model forward on an episode's recorded
actions, feeding its own predictions back as history, and compare with the real observations
step by step. Single-step scores condition on the real history; this shows how fast a model's
errors compound when nothing corrects it, which is how an agent trained in it would see it.

A rollout is the simulator itself: each recorded episode becomes a `WorldModelEnv` started
from its recorded system prompt, the recorded actions are replayed by a `ReplayPolicy`, and the
one episode loop (`run_episodes`) steps them, so what is scored here is what an agent in the
simulator is answered (a generation without the observation marker is the simulator's marked
error observation; no retries, so every system is scored greedily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentworld.data.awbench import BenchRecord
from agentworld.data.prompts import WorldModelExample, opening_of
from agentworld.envs.base import Task
from agentworld.envs.engine import ReplayPolicy, run_episodes
from agentworld.envs.vector import TextVectorEnv
from agentworld.evaluation.infer import Generate
from agentworld.scoring.metrics import exact_match, token_f1
from agentworld.simulation.env import WorldModelEnv


class GenerateBackend:
    """Any system of the evaluation (the world model or a baseline) as a simulator backend."""

    def __init__(self, name: str, generate: Generate) -> None:
        self.name, self._generate = name, generate

    def generate(self, examples: Sequence[WorldModelExample], temperature: float = 0.0) -> list[str]:
        return self._generate(examples)


class RecordedStart:
    """A simulated episode that starts where a recorded one did (its key as the task id, the
    opening state its system prompt carries as the first observation; empty in another layout)."""

    def __init__(self, episode: BenchRecord) -> None:
        self.task = Task(task_id=episode.key, domain=episode.domain, instruction=episode.instruction)
        self.first_observation = opening_of(episode.system_str) or ""

    def start(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Task, str, dict[str, Any]]:
        return self.task, self.first_observation, {}


def rollout(generate: Generate, episodes: Sequence[BenchRecord], horizon: int, name: str = "system"
            ) -> list[dict[str, Any]]:
    """One row per (episode, step): the prediction from self-fed history next to the real observation.

    `episodes` are final records (`awbench.final_records`): each holds its episode's every action
    and observation. The episodes of one domain step together, one batched generation per step.
    """
    backend = GenerateBackend(name, generate)
    rows: list[dict[str, Any]] = []
    for domain in sorted({ep.domain for ep in episodes}):
        group = [ep for ep in episodes if ep.domain == domain]
        lengths = [min(len(ep.prompt), len(ep.response), horizon) for ep in group]
        vector = TextVectorEnv([WorldModelEnv(domain, backend, RecordedStart(ep), system=ep.system_str, retries=0)
                                for ep in group], max_episode_steps=lengths)
        try:
            vector.reset(seed=0)
            replay = ReplayPolicy([ep.prompt[:n] for ep, n in zip(group, lengths)])
            for step in run_episodes(vector, replay):
                ep, reference = group[step.index], group[step.index].observations[step.turn]
                rows.append({"episode": ep.episode, "task": domain, "step": step.turn, "action": step.action,
                             "prediction": step.observation, "reference": reference,
                             "exact_match": exact_match(step.observation, reference),
                             "token_f1": token_f1(step.observation, reference)})
        finally:
            vector.close()
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
