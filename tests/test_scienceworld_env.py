"""The ScienceWorld env against the real simulator (one Java server for the whole module)."""

from __future__ import annotations

import os
import random
import subprocess

import pytest

from agentworld.domains import list_envs
from agentworld.domains.scienceworld.env import (
    REFUSAL,
    TASK_TYPES,
    ScienceWorldTextEnv,
    _erroneous_action,
    _exploratory_action,
    _SWVocabulary,
    parse_task_id,
    probe,
    scienceworld_policy,
)
from agentworld.envs.base import Task

AVAILABLE, REASON = probe()
# Outside CI a machine without Java skips; in CI ScienceWorld must run, so it fails there instead.
pytestmark = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"ScienceWorld unavailable: {REASON}")


def _java_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-x", "java"], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


@pytest.fixture(scope="module")
def env():
    env = ScienceWorldTextEnv()
    yield env
    env.close()


def _play(env: ScienceWorldTextEnv, policy_name: str, seed: int, steps: int):
    observation, _ = env.reset(seed=seed)
    policy = scienceworld_policy(policy_name, env.task)
    rng, history, infos = random.Random(seed), [], []
    for _ in range(steps):
        action = policy.act(observation, history, rng)
        assert isinstance(action, str)
        observation, reward, terminated, truncated, info = env.step(action)
        history.append((action, observation))
        infos.append((reward, info))
        if terminated or truncated:
            break
    return history, infos


def test_registered_and_available():
    status = {env.name: env for env in list_envs()}["scienceworld"]
    assert status.available and AVAILABLE, status.reason


def test_reset_is_deterministic_for_a_seed(env):
    obs_a, info_a = env.reset(seed=7)
    task_a = env.task
    env.reset(seed=8)
    obs_b, info_b = env.reset(seed=7)
    assert obs_a == obs_b and info_a == info_b and env.task == task_a  # gold path included
    assert isinstance(task_a, Task) and task_a.domain == "scienceworld"
    name, variation = parse_task_id(task_a.task_id)
    assert name in TASK_TYPES and variation in env.train_variations(name)
    assert task_a.instruction.startswith("Your task is") and obs_a.startswith(task_a.instruction)
    assert 0 < len(task_a.solution) <= 20
    assert len({env.reset(seed=s)[1]["task_id"] for s in range(6)}) > 1  # seeds spread over tasks


@pytest.mark.parametrize("seed", [0, 3])
def test_scripted_gold_path_completes(env, seed):
    history, infos = _play(env, "scripted", seed, steps=60)
    reward, info = infos[-1]
    assert info["completed"] and info["score"] == 100
    assert sum(r for r, _ in infos) == pytest.approx(1.0)
    assert len(history) >= len(env.task.solution)


def test_invalid_action_gets_real_refusal_and_no_reward(env):
    env.reset(seed=1)
    for action in ("dance wildly", "pick up unicorn", "opne door to kitchen"):
        observation, reward, terminated, truncated, info = env.step(action)
        assert observation == REFUSAL
        assert reward == 0.0 and not terminated and not truncated
        assert info["valid"] is False and info["score"] == 0 and info["valid_action_count"] > 0
    observation, *_ = env.step("inventory")
    assert observation.startswith("In your inventory")


@pytest.mark.parametrize("policy_name", ["exploratory", "erroneous"])
def test_noisy_policies_run_on_the_real_env(env, policy_name):
    history, infos = _play(env, policy_name, seed=2, steps=15)
    assert _play(env, policy_name, seed=2, steps=15)[0] == history  # same seed, same episode
    assert len(history) >= 5 and all(isinstance(a, str) for a, _ in history)
    observations = [o for _, o in history]
    if policy_name == "erroneous":
        assert REFUSAL in observations
    assert any(o != REFUSAL for o in observations)


@pytest.mark.parametrize("policy_name", ["scripted", "exploratory", "erroneous"])
def test_policies_are_deterministic_given_rng(env, policy_name):
    env.reset(seed=2)
    task = env.task
    observations = [env.step(a)[0] for a in ("look around", "inventory", "look at door", "dance")]

    def actions() -> list[str]:
        policy, rng, out = scienceworld_policy(policy_name, task), random.Random(11), []
        for observation in observations * 3:
            out.append(policy.act(observation, [(a, observation) for a in out], rng))
        return out

    assert actions() == actions()


def test_noisy_actions_are_never_blank():
    """A blank command is no transition (the schema refuses an empty action), so one blank
    mistake used to stop a whole collection (the 136th episode of a large run)."""
    task = Task("find-non-living-thing-v133", "scienceworld", "Your task is to find a(n) non-living thing. "
                "First, focus on the thing. Then, move it to the green box in the workshop.",
                solution=["open door to hallway", "go to hallway", "pick up drawing", "focus on drawing",
                          "move drawing to green box"])
    vocab, rng = _SWVocabulary(task), random.Random(0)
    actions = [draw(vocab, rng) for _ in range(3000) for draw in (_erroneous_action, _exploratory_action)]
    assert len({a for a in actions}) > 50 and all(a.strip() for a in actions)


def test_options_task_replays_a_task(env):
    env.reset(seed=4)
    task = env.task
    env.reset(seed=5)
    env.reset(options={"task": task})
    assert env.task == task


def _own_java_pids() -> set[int]:
    """Java processes started by this test process (other test workers may run their own JVMs)."""
    out = subprocess.run(["pgrep", "-x", "-P", str(os.getpid()), "java"], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


def test_close_leaves_no_java_process():
    before = _own_java_pids()
    local = ScienceWorldTextEnv()
    local.reset(seed=0)
    pid = local.java_process.pid
    assert pid in _java_pids() and pid in _own_java_pids() - before
    local.close()
    assert local.java_process is None
    assert pid not in _java_pids() and _own_java_pids() <= before
    local.close()  # idempotent
