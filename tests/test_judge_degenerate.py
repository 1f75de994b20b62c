"""The local judge must score useless predictions far below the truth, on real records.

For each one-machine domain a few real episodes are collected, and every step after the first
is judged four times: the real observation, an empty prediction, a copy of the previous
observation and a random other observation of the same domain. A degenerate prediction that
happens to equal the real observation is left out (it is then not degenerate).
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from statistics import mean

import pytest

from agentworld.config import CollectParams, SandboxParams
from agentworld.data.collect import collect_parallel
from agentworld.data.prompts import assistant_turn
from agentworld.domains import list_envs
from agentworld.scoring.judge import JudgeInput, JudgeScores, LocalJudge

DOMAINS = ("terminal", "os", "mcp", "search", "swe", "web", "textworld", "scienceworld")
AVAILABLE = {env.name: env for env in list_envs()}
MARGIN = 25.0  # points out of 100 by which every degenerate prediction must lose


def judged_predictions(domain: str) -> dict[str, list[JudgeScores]]:
    """Judge scores of the reference and three degenerate predictions for one domain."""
    params = CollectParams(domains=[domain], episodes_per_domain=5, max_steps=6, workers=1)
    rows = collect_parallel(domain, params, SandboxParams(), progress=False)
    episodes = defaultdict(list)
    for row in rows:
        episodes[row.trajectory_id].append(row)
    observations = [row.observation for row in rows]
    rng = random.Random(0)
    inputs: dict[str, list[JudgeInput]] = {"reference": [], "empty": [], "copy": [], "random": []}
    for steps in episodes.values():
        steps.sort(key=lambda r: r.turn)
        for i, row in enumerate(steps[1:], start=1):
            history = tuple((s.action, s.observation) for s in steps[:i])
            other = rng.choice([o for o in observations if o.strip() != row.observation.strip()] or [""])
            for name, guess in (("reference", row.observation), ("empty", ""),
                                ("copy", steps[i - 1].observation), ("random", other)):
                if name != "reference" and guess.strip() == row.observation.strip():
                    continue
                inputs[name].append(JudgeInput(domain=domain, generation=assistant_turn(guess),
                                               reference=row.observation, action=row.action,
                                               history=history))
    judge = LocalJudge()
    return {name: judge.score(batch) for name, batch in inputs.items() if batch}


def dimension_mean(scores: list[JudgeScores], dimension: str) -> float | None:
    values = [s.normalised()[dimension] for s in scores if s.normalised()[dimension] is not None]
    return mean(values) if values else None


@pytest.mark.parametrize("domain", DOMAINS)
def test_degenerate_predictions_score_far_below_the_reference(domain):
    status = AVAILABLE[domain]
    if not status.available:
        if os.environ.get("CI"):
            pytest.fail(f"{domain} is unavailable in CI: {status.reason}")
        pytest.skip(f"{domain} unavailable: {status.reason}")
    judged = judged_predictions(domain)
    reference = judged["reference"]
    assert len(reference) >= 5, f"{domain}: too few judged steps ({len(reference)})"
    assert mean(s.overall for s in reference) >= 95, "the truth itself must score near the top"
    for name in ("empty", "copy", "random"):
        scores = judged.get(name, [])
        if not scores:
            continue
        overall = mean(s.overall for s in scores)
        assert overall <= mean(s.overall for s in reference) - MARGIN, (domain, name, overall)
        # Factuality and quality read content; each must see through every degenerate guess.
        for dimension in ("factuality", "quality"):
            got, best = dimension_mean(scores, dimension), dimension_mean(reference, dimension)
            if got is not None and best is not None:
                assert got <= best - MARGIN, (domain, name, dimension, got, best)
    # Saying nothing where the environment answered is neither well-formed nor realistic.
    empty = judged.get("empty", [])
    if empty:
        for dimension in ("format", "realism"):
            got = dimension_mean(empty, dimension)
            assert got is not None and got <= 50, (domain, dimension, got)
