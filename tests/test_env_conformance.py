"""Every domain and the simulator keep the same environment contract, checked as Gymnasium's
`check_env` does: made through `gymnasium.make`, reset/seed determinism (Gymnasium's own
checkers), step return types, observations inside the observation space, termination, and a
`close` that may be called twice, and Gymnasium's step limit (`TimeLimit`, registered per domain).
Real envs and simulators also step together behind the same `gymnasium.vector.VectorEnv`
interface (`TextVectorEnv`), which applies the same step limits to batched steps."""

from __future__ import annotations

import os
import random

import gymnasium
import pytest
from gymnasium.utils import env_checker
from gymnasium.wrappers import TimeLimit

from agentworld.domains import all_domains, list_envs, make_env, make_policy
from agentworld.envs.base import TextEnv
from agentworld.envs.engine import ReplayPolicy, run_episodes
from agentworld.envs.process import EnvWorkerError, ProcessEnv
from agentworld.envs.vector import TextVectorEnv
from agentworld.models.backends import TransformersBackend
from agentworld.simulation.env import WorldModelEnv

AVAILABLE = {env.name for env in list_envs() if env.available}
RUNNABLE = sorted(name for name in all_domains() if name != "android")  # android: listed, never faked
STEPS = 4


def _skip_unless_available(domain: str) -> None:
    if domain not in AVAILABLE and not os.environ.get("CI"):  # CI installs every domain: it must run there
        pytest.skip(f"{domain} unavailable here")


def _gymnasium_checks(env: TextEnv) -> None:
    env_checker.check_reset_return_type(env)
    env_checker.check_reset_seed_determinism(env)
    env_checker.check_reset_options(env)


def _episode(env: gymnasium.Env, seed: int, actions: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Observations of one episode from `seed`, playing `actions` or the domain's scripted policy
    (stepping `env` itself, wrappers included; its TextEnv's attributes read through `unwrapped`)."""
    inner: TextEnv = env.unwrapped  # type: ignore[assignment]
    observation, info = env.reset(seed=seed)
    assert isinstance(observation, str) and isinstance(info, dict)
    assert observation in env.observation_space, "first observation outside the observation space"
    assert inner.task is not None and inner.task.domain == inner.domain
    policy = None if actions is not None else make_policy(inner.domain, "scripted", inner.task)
    played, observations, rng = [], [observation], random.Random(seed)
    history: list[tuple[str, str]] = []
    for step in range(STEPS if actions is None else len(actions)):
        action = actions[step] if actions is not None else policy.act(observation, history, rng)  # type: ignore[union-attr]
        observation, reward, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str) and isinstance(info, dict)
        assert isinstance(reward, (int, float)) and not isinstance(reward, bool)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert observation in env.observation_space, f"step {step}: observation outside the observation space"
        played.append(action)
        observations.append(observation)
        history.append((action, observation))
        if terminated or truncated:
            assert inner.verify() in (True, False, None)
            break
    return played, observations


@pytest.mark.parametrize("domain", RUNNABLE)
def test_every_domain_keeps_the_environment_contract(domain: str):
    _skip_unless_available(domain)
    declared = all_domains()[domain]
    env = gymnasium.make(declared.gym_id)
    try:
        assert isinstance(env, TimeLimit) and env.spec.max_episode_steps == declared.max_episode_steps
        assert isinstance(env.unwrapped, TextEnv) and env.unwrapped.domain == domain
        _gymnasium_checks(env)
        actions, first = _episode(env, seed=7)
        _, again = _episode(env, seed=7, actions=actions)
        assert again == first, "the same seed and actions gave other observations"
    finally:
        env.close()
        env.close()  # closing twice is allowed


def test_android_is_listed_with_its_reason_and_never_faked():
    status = {env.name: env for env in list_envs()}["android"]
    assert not status.available and "emulator" in status.reason


@pytest.fixture(scope="module")
def tiny_world_model(tmp_path_factory) -> TransformersBackend:
    """A tiny fresh world model of our architecture, served by the real transformers backend."""
    from agentworld.config import load_params
    from agentworld.models.factory import build_model
    from tests.conftest import SMOKE_PARAMS

    model, tokenizer = build_model(load_params(SMOKE_PARAMS).model, ["ls -la", "cat notes.txt", "hello"] * 50)
    out = tmp_path_factory.mktemp("tiny-world-model")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return TransformersBackend(str(out), max_new_tokens=8, batch_size=4, max_seq_len=256)


def test_the_simulator_keeps_the_environment_contract(tiny_world_model):
    _skip_unless_available("terminal")
    env = WorldModelEnv("terminal", tiny_world_model, retries=0)
    try:
        _gymnasium_checks(env)
        actions, first = _episode(env, seed=7)
        _, again = _episode(env, seed=7, actions=actions)
        assert again == first, "greedy simulation of the same seed and actions gave other observations"
        _, _, terminated, _, _ = env.step("submit")
        assert terminated
    finally:
        env.close()
        env.close()


def test_a_real_env_in_a_worker_process_keeps_the_contract_and_answers_as_in_process():
    _skip_unless_available("terminal")
    env, local = make_env("terminal", process=True), make_env("terminal")
    try:
        assert isinstance(env, ProcessEnv) and env.domain == "terminal"
        _gymnasium_checks(env)
        actions, first = _episode(env, seed=7)
        _, here = _episode(local, seed=7, actions=actions)
        assert here == first, "the worker's env answered otherwise than the same env in this process"
        assert env.task == local.task and env.verify() == local.verify()
        env.reset(seed=7)
        env.step("submit")
        with pytest.raises(EnvWorkerError, match="call reset"):  # the worker's error, with its traceback
            env.step("ls")
        process = env._process
    finally:
        env.close()
        env.close()
        local.close()
    assert not process.is_alive()


class CountingBackend:
    """The real backend, counting its batched `generate` calls."""

    def __init__(self, backend: TransformersBackend) -> None:
        self.backend, self.calls = backend, 0

    def generate(self, examples, temperature=0.0):
        self.calls += 1
        return self.backend.generate(examples, temperature=temperature)


@pytest.mark.parametrize("kind", ["real", "processes", "simulated"])
def test_real_envs_and_simulators_step_together_behind_one_vector_interface(kind, tiny_world_model):
    _skip_unless_available("terminal")
    backend = CountingBackend(tiny_world_model)
    if kind == "real":
        envs = [gymnasium.make(all_domains()["terminal"].gym_id) for _ in range(2)]
    elif kind == "processes":  # real envs in worker processes, stepped in parallel
        envs = [make_env("terminal", process=True) for _ in range(2)]
    else:
        envs = [WorldModelEnv("terminal", backend, retries=0) for _ in range(2)]
    vector = TextVectorEnv(envs)
    try:
        observations, infos = vector.reset(seed=7)
        assert observations in vector.observation_space and infos["_step_info"].all()
        calls = backend.calls
        observations, rewards, terminated, truncated, infos = vector.step(["submit", "ls"])
        assert terminated.tolist() == [True, False] and vector.running.tolist() == [False, True]
        assert rewards.dtype.kind == "f" and infos["_step_info"].all()
        held = observations[0]
        observations, rewards, terminated, _, infos = vector.step(["ls", "pwd"])  # the finished one is held
        assert observations[0] == held and rewards[0] == 0.0 and terminated[0]
        assert infos["_step_info"].tolist() == [False, True]
        if kind == "simulated":  # one batched generation per vector step (the end action needs none)
            assert backend.calls - calls == 2
        vector.reset(seed=[9, None], options={"reset_mask": [True, False]})
        assert vector.running.all() and vector.envs[1].task is not None
    finally:
        vector.close()


def test_step_limits_are_gymnasiums_time_limit_for_single_and_batched_steps(tiny_world_model):
    """One step-limit rule everywhere: `TimeLimit` truncates the step that reaches the limit, and
    a vector applies each sub-env's limit (its TimeLimit, its registered one, or the vector's
    override) to batched steps, where wrappers are not stepped."""
    _skip_unless_available("terminal")
    terminal = all_domains()["terminal"]
    single = gymnasium.make(terminal.gym_id, max_episode_steps=2)
    try:
        single.reset(seed=7)
        assert single.step("ls")[2:4] == (False, False)
        assert single.step("ls")[2:4] == (False, True)
    finally:
        single.close()
    registered = make_env("terminal")
    assert registered.spec.max_episode_steps == terminal.max_episode_steps
    envs = [gymnasium.make(terminal.gym_id, max_episode_steps=2),
            TimeLimit(WorldModelEnv("terminal", tiny_world_model, retries=0), max_episode_steps=3), registered]
    vector = TextVectorEnv(envs)
    assert vector.max_episode_steps == (2, 3, terminal.max_episode_steps)
    assert TextVectorEnv(envs, max_episode_steps=[None, 1, 4]).max_episode_steps == (2, 1, 4)
    try:
        vector = TextVectorEnv(envs, max_episode_steps=[None, None, 4])
        vector.reset(seed=7)
        steps = list(run_episodes(vector, ReplayPolicy([["ls"] * 5] * 3)))
        ends = {step.index: step for step in steps if step.last}
        assert {k: step.turn + 1 for k, step in ends.items()} == {0: 2, 1: 3, 2: 4}
        assert all(step.result[3] and step.info["max_steps_reached"] for step in ends.values())
        assert not any(step.info.get("max_steps_reached") for step in steps if not step.last)
        with pytest.raises(ValueError, match="no step limit"):
            next(run_episodes(TextVectorEnv([WorldModelEnv("terminal", tiny_world_model)]), ReplayPolicy([["ls"]])))
    finally:
        vector.close()
