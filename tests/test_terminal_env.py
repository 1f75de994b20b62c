"""Terminal env, task templates, behaviour policies, registry and collector on the real sandbox."""

from __future__ import annotations

import os
import random

import pytest

from agentworld.config import CollectParams, PolicyMix, SandboxParams
from agentworld.data.collect import collect_episodes
from agentworld.data.episodes import choose_policy, episode_seed, trajectory_id_for, transition
from agentworld.data.schema import Transition
from agentworld.domains import EnvUnavailable, list_envs, make_env
from agentworld.domains.terminal.behaviour import POLICY_NAMES, make_policy
from agentworld.domains.terminal.env import TerminalEnv
from agentworld.domains.terminal.tasks import TEMPLATES, available_templates, generate_task
from agentworld.envs.base import Task
from agentworld.envs.sandbox import sandbox_available

AVAILABLE, REASON = sandbox_available()
needs_sandbox = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"sandbox unavailable: {REASON}")
PARAMS = SandboxParams(command_timeout_s=3)


@pytest.fixture(scope="module")
def env():
    terminal = TerminalEnv(PARAMS)
    yield terminal
    terminal.close()


# ---------------------------------------------------------------- task generator (no sandbox)
def test_many_templates_across_categories():
    assert len(TEMPLATES) >= 25
    categories = {tpl.category for tpl in TEMPLATES.values()}
    assert {"files", "text", "scripts", "env", "redirection", "permissions", "archives", "errors"} <= categories
    assert len(available_templates()) >= 25


def test_tasks_are_deterministic_and_diverse():
    assert generate_task(123) == generate_task(123)
    tasks = [generate_task(seed) for seed in range(300)]
    assert len({t.task_id for t in tasks}) >= 290  # a few templates have small parameter spaces
    assert len({t.setup["template"] for t in tasks}) >= 25
    for task in tasks[:50]:
        assert task.domain == "terminal" and task.instruction and task.solution and task.setup["check"]


def test_unknown_template_is_named():
    with pytest.raises(KeyError, match="no_such_template"):
        generate_task(0, "no_such_template")


# ---------------------------------------------------------------- the environment
@needs_sandbox
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_scripted_solution_solves_each_template(env, name):
    if name not in available_templates():
        pytest.skip(f"{name}: tools missing here")
    task = generate_task(7, name)
    observation, info = env.reset(seed=7, options={"task": task})
    assert observation.startswith(task.instruction) and observation.endswith("agent@sandbox:/workspace$")
    assert not env.check(), f"{name} is solved before any step"
    for action in task.solution:
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and not truncated and info["timed_out"] is False
        if terminated:
            break
    assert terminated and reward == 1.0 and info["solved"], f"{name}: solution did not solve it"


@needs_sandbox
def test_same_seed_same_episode():
    listings = []
    for _ in range(2):
        with_env = TerminalEnv(PARAMS)
        try:
            observation, info = with_env.reset(seed=4242)
            listing = with_env.step("ls -laR --time-style=full-iso /workspace ~ /tmp /etc; "
                                   "ls -la --time-style=full-iso / | grep -v -e ' dev$' -e ' proc$'; "
                                   "find /workspace -type f | sort | xargs md5sum")[0]
            listings.append((observation, info["task_id"], listing))
        finally:
            with_env.close()
    assert listings[0] == listings[1]
    assert "2024-01-15 09:30:00" in listings[0][2]


@needs_sandbox
def test_step_semantics(env):
    task = generate_task(1, "create_file")
    env.reset(options={"task": task})
    obs, reward, terminated, truncated, info = env.step("cd /tmp && echo hi")
    assert (obs, reward, terminated, truncated) == ("hi\n", 0.0, False, False)
    assert info["exit_code"] == 0 and info["cwd"] == "/tmp" and info["task_id"] == task.task_id
    obs, reward, terminated, _, info = env.step("cat nothing")
    assert obs == "cat: nothing: No such file or directory\n" and info["exit_code"] == 1 and not terminated
    obs, reward, terminated, _, info = env.step("submit")
    assert terminated and reward == 0.0 and info["ended_by_agent"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("ls")


@needs_sandbox
def test_setup_exports_persist_into_the_episode(env):
    task = generate_task(3, "read_env_token")
    env.reset(options={"task": task})
    var = task.setup["commands"][0].split()[1].split("=")[0]
    obs, *_ = env.step(f"echo ${var}")
    assert obs.strip() == task.setup["commands"][0].split("=", 1)[1]


@needs_sandbox
def test_reset_rejects_foreign_tasks(env):
    with pytest.raises(ValueError, match="terminal Task"):
        env.reset(options={"task": Task(task_id="x", domain="web", instruction="click")})


# ---------------------------------------------------------------- policies
def test_policies_are_deterministic_given_rng():
    task = generate_task(11)
    for name in POLICY_NAMES:
        runs = []
        for _ in range(2):
            policy, rng, actions = make_policy(name, task), random.Random(5), []
            for turn in range(12):
                actions.append(policy.act(f"obs {turn} report_{turn}.txt", [("ls", "x")] * turn, rng))
            runs.append(actions)
        assert runs[0] == runs[1] and all(runs[0])


def test_policies_behave_differently():
    task = generate_task(12, "grep_count")
    actions = {}
    for name in POLICY_NAMES:
        policy, rng = make_policy(name, task), random.Random(0)
        actions[name] = [policy.act("", [], rng) for _ in range(40)]
    assert actions["scripted"][0] == task.solution[0]
    assert set(task.solution) <= set(actions["scripted"])
    assert len(set(actions["exploratory"])) > 10
    assert len(set(actions["erroneous"]) - set(actions["exploratory"])) > 5
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("random", task)


def test_policy_mix_is_respected():
    rng = random.Random(0)
    mix = PolicyMix(scripted=0.6, exploratory=0.4, erroneous=0.0)
    drawn = [choose_policy(mix, rng) for _ in range(2000)]
    assert "erroneous" not in drawn
    assert 0.55 < drawn.count("scripted") / len(drawn) < 0.65


# ---------------------------------------------------------------- registry and collector
def test_registry_lists_terminal():
    statuses = {s.name: s for s in list_envs()}
    assert statuses["terminal"].available == AVAILABLE
    if not AVAILABLE:
        assert "bubblewrap" in statuses["terminal"].reason or statuses["terminal"].reason
        with pytest.raises(EnvUnavailable):
            make_env("terminal")
    with pytest.raises(KeyError, match="unknown environment"):
        make_env("nope")


@needs_sandbox
def test_a_row_the_schema_refuses_names_its_episode_turn_and_policy(env):
    env.reset(seed=1)
    result = env.step("echo hi")
    with pytest.raises(ValueError, match=r"^terminal-s0-e000001 turn 2 \(terminal, erroneous policy, action ''\) "
                                         r"is not a valid transition: action: String should have at least 1"):
        transition(env, env.task, "terminal-s0-e000001", 2, "", result, last=False, policy="erroneous", seed=1,
                   info={})


@needs_sandbox
def test_collector_yields_valid_deterministic_rows():
    params = CollectParams(episodes_per_domain=6, max_steps=4, seed=3)

    def collect(indices=None):
        return list(collect_episodes("terminal", params, PARAMS, indices, progress=False))

    rows = collect()
    assert rows and all(isinstance(r, Transition) for r in rows)
    for row in rows:
        Transition.model_validate(row.model_dump())  # round-trips through the schema
        assert row.source == "real" and row.domain == "terminal" and row.env_id == "terminal-v1"
        assert row.policy in POLICY_NAMES and "exit_code" in row.info or row.action == "submit"
    by_traj: dict[str, list[Transition]] = {}
    for row in rows:
        by_traj.setdefault(row.trajectory_id, []).append(row)
    assert len(by_traj) == 6
    for index in range(6):
        turns = by_traj[trajectory_id_for("terminal", 3, index)]
        assert [t.turn for t in turns] == list(range(len(turns))) and len(turns) <= 4
        assert turns[-1].done and not any(t.done for t in turns[:-1])
        assert {t.seed for t in turns} == {episode_seed(3, index)}
    assert len({r.id for r in rows}) == len(rows)

    def stable(rs):
        return [(r.id, r.task_id, r.policy, r.action, r.observation, r.reward, r.done) for r in rs]

    again = collect([4, 1])  # any subset, any order: same episodes
    assert stable(again) == stable([r for r in rows if r.info["episode_index"] == 4]
                                   + [r for r in rows if r.info["episode_index"] == 1])
