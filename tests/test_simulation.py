"""WorldModelEnv: the real envs' protocol, answered by a world model; one agent runs against both."""

from __future__ import annotations

import pytest

from agentworld.config import CollectParams, PolicyMix
from agentworld.data.collect import _play_episode
from agentworld.data.prompts import assistant_turn
from agentworld.domains import make_env
from agentworld.models.backends import TransformersBackend
from agentworld.models.factory import build_model
from agentworld.simulation.env import ERROR_OBSERVATION, Control, WorldModelEnv


@pytest.fixture(scope="module")
def untrained_dir(tmp_path_factory, ) -> str:
    """A tiny fresh world model of our architecture (it never writes the observation marker)."""
    from agentworld.config import load_params
    from tests.conftest import SMOKE_PARAMS

    params = load_params(SMOKE_PARAMS).model
    model, tokenizer = build_model(params, ["ls -la", "cat notes.txt", "hello world"] * 50)
    out = tmp_path_factory.mktemp("untrained")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


class Counting:
    """A real transformers backend that counts calls and their temperatures."""

    def __init__(self, model_dir: str) -> None:
        self.inner = TransformersBackend(model_dir, max_new_tokens=8, batch_size=4, max_seq_len=256)
        self.name, self.temperatures = "counting", []

    def generate(self, examples, temperature=0.0):
        self.temperatures.append(temperature)
        return self.inner.generate(examples, temperature)


def params(policy: str) -> CollectParams:
    mix = PolicyMix(**{name: float(name == policy) for name in ("scripted", "exploratory", "erroneous")})
    return CollectParams(episodes_per_domain=1, max_steps=3, policy_mix=mix, seed=0)


def test_one_agent_runs_unchanged_against_the_real_and_the_simulated_terminal(untrained_dir):
    real = make_env("terminal")
    backend = Counting(untrained_dir)
    simulated = WorldModelEnv("terminal", backend, control=Control(faults=("permission denied",), fault_rate=0.2))
    try:
        real_rows = list(_play_episode(real, "terminal", params("scripted"), index=0))
        sim_rows = list(_play_episode(simulated, "terminal", params("scripted"), index=0))
    finally:
        real.close()
        simulated.close()
    # same task, same agent, same first action: only the environment differs
    assert real_rows[0].task_id == sim_rows[0].task_id and real_rows[0].action == sim_rows[0].action
    assert {r.source for r in real_rows} == {"real"} and {r.source for r in sim_rows} == {"synthetic"}
    assert sim_rows[0].info["control"]["faults"] == ["permission denied"]
    # an untrained model never writes the marker: greedy, then two sampled retries, then a marked error
    assert sim_rows[0].observation == ERROR_OBSERVATION.format(attempts=3) and sim_rows[0].info["wm_error"]
    assert backend.temperatures[:3] == [0.0, 0.8, 0.8]
    assert "Simulation control:" in simulated.example("ls").system and "permission denied" in simulated.example("ls").system


class Scripted:
    """A backend that answers from a fixed list of generations (a stand-in for a trained model)."""

    name = "scripted"

    def __init__(self, generations):
        self.generations = list(generations)

    def generate(self, examples, temperature=0.0):
        return [self.generations.pop(0) for _ in examples]


def test_world_model_env_keeps_history_retries_and_ends_on_the_domain_end_action():
    env = WorldModelEnv("terminal", Scripted(["no marker", assistant_turn("a.txt\nb.txt"), assistant_turn("")]))
    first, info = env.reset(seed=3)
    assert info["simulated"] and env.task is not None and env.task.instruction in first
    obs, reward, terminated, truncated, info = env.step("ls")
    assert obs == "a.txt\nb.txt" and info["attempts"] == 2 and not info["wm_error"] and not terminated
    obs, *_ = env.step("cat a.txt")
    assert env.example("wc -l a.txt").history == [("ls", "a.txt\nb.txt"), ("cat a.txt", "")]
    _, _, terminated, _, info = env.step("submit")
    assert terminated and info["ended_by_agent"]
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("ls")
    env.close()


class Batches(Scripted):
    """Scripted, and remembers the size and temperature of each batch."""

    def __init__(self, generations):
        super().__init__(generations)
        self.calls = []

    def generate(self, examples, temperature=0.0):
        self.calls.append((len(examples), temperature))
        return super().generate(examples, temperature)


def test_many_episodes_step_in_one_batch_and_retry_together():
    from agentworld.simulation.env import RealTaskSource, step_many

    backend = Batches([assistant_turn("one"), "broken", assistant_turn("three"), assistant_turn("two, retried")])
    tasks = RealTaskSource("terminal")
    envs = [WorldModelEnv("terminal", backend, tasks, retries=1) for _ in range(4)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    tasks.close()
    results = step_many(envs, ["ls", "pwd", "cat x", "submit"])
    assert backend.calls == [(3, 0.0), (1, 0.8)]  # one batch for three episodes, one retry for the broken one
    assert [r[0] for r in results] == ["one", "two, retried", "three", ""]
    assert [r[4]["attempts"] for r in results] == [1, 2, 1, 0] and results[3][2]  # submit ends its episode
