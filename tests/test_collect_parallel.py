"""Parallel collection gives the same episodes as one worker (seeded by episode index)."""

from __future__ import annotations

from agentworld.config import CollectParams, SandboxParams
from agentworld.data.collect import collect_parallel


def _content(rows):
    return [(r.id, r.task_id, r.policy, r.action, r.observation, r.reward, r.done) for r in rows]


def test_two_workers_match_one_worker():
    params = CollectParams(episodes_per_domain=6, max_steps=4, workers=1)
    sandbox = SandboxParams(command_timeout_s=3)
    serial = collect_parallel("terminal", params, sandbox, progress=False)
    parallel = collect_parallel("terminal", params.model_copy(update={"workers": 2}), sandbox, progress=False)
    assert len({r.trajectory_id for r in parallel}) == 6
    assert _content(parallel) == _content(serial)
