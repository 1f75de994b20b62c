"""Agents in the simulator: one LM agent plays real and simulated terminals through the same
loop; BC demonstrations; GRPO over whole episodes (TRL rollout_func) inside WorldModelEnv;
the sim_rl experiment end to end with registered agents and their world-model lineage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agentworld.agents.bc import conversations, recorded_demos, scripted_demos
from agentworld.agents.episodes import play, summarise
from agentworld.agents.policy import LMAgent
from agentworld.agents.rl import WallClockBudget, seed_of, task_dataset, train_rl
from agentworld.data.collect import _play_episode
from agentworld.data.io import write_jsonl
from agentworld.data.prompts import OBSERVATION_MARKER
from agentworld.domains import make_env
from agentworld.models.backends import TransformersBackend
from agentworld.models.factory import build_model, load_local
from agentworld.simulation.env import RealTaskSource, WorldModelEnv
from agentworld.simulation.verifiers import ReferenceVerifier, WorldModelVerifier, make_verifier
from tests.conftest import SMOKE_PARAMS
from tests.test_simulation import params as collect_params

TEMPLATES = ["rename_file", "count_lines"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """A tiny fresh model of our architecture: the world model and the agent's starting point."""
    from agentworld.config import load_params

    corpus = ["mv report.txt backup.txt", "wc -l < notes.txt > answer.txt", "submit", "Rename a file."] * 50
    model, tokenizer = build_model(load_params(SMOKE_PARAMS).model, corpus)
    out = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


class StubWorldModel:
    """A stand-in world model that answers every step with one fixed, well-formed observation."""

    name = "stub"

    def __init__(self, observation: str) -> None:
        self.observation, self.calls = observation, 0

    def generate(self, examples, temperature=0.0):
        self.calls += 1
        return [f"{OBSERVATION_MARKER}\n{self.observation}" for _ in examples]


def agent(model_dir: Path, temperature: float = 0.0) -> LMAgent:
    model, tokenizer = load_local(model_dir)
    return LMAgent(model, tokenizer, "terminal", max_new_tokens=6, observation_chars=80, temperature=temperature)


def test_one_lm_agent_plays_the_real_and_the_simulated_terminal_through_one_loop(tiny_dir):
    lm = agent(tiny_dir)
    real = [make_env("terminal") for _ in range(2)]
    backend = TransformersBackend(tiny_dir, max_new_tokens=8, batch_size=4, max_seq_len=256)
    tasks = RealTaskSource("terminal")
    simulated = [WorldModelEnv("terminal", backend, tasks, verifier=ReferenceVerifier()) for _ in range(2)]
    try:
        real_eps = play(lm, real, [7, 8], max_steps=2, templates=TEMPLATES)
        sim_eps = play(lm, simulated, [7, 8], max_steps=2, templates=TEMPLATES)
    finally:
        for env in real:
            env.close()
        tasks.close()
    # same tasks, same greedy agent: the same first action on both sides; only the environment differs
    assert [e.task_id for e in real_eps] == [e.task_id for e in sim_eps]
    assert [e.template for e in real_eps] == ["count_lines", "rename_file"]  # seed % len(templates)
    assert [e.actions[0] for e in real_eps] == [e.actions[0] for e in sim_eps]
    assert not real_eps[0].simulated and sim_eps[0].simulated
    for episode in real_eps + sim_eps:
        tokens = episode.tokens
        assert 1 <= episode.steps <= 2 and len(tokens.agent_mask) == len(tokens.completion_ids)
        assert sum(tokens.agent_mask) > 0 and tokens.ids[:len(tokens.prompt_ids)] == tokens.prompt_ids
    stats = summarise(real_eps)
    assert stats["episodes"] == 2 and 0.0 <= stats["invalid_action_rate"] <= 1.0 and stats["success_rate"] == 0.0


def test_the_simulators_verifiers_reward_and_end_episodes_as_a_real_checker_does():
    tasks = RealTaskSource("terminal")
    stub = StubWorldModel("PASS")
    reference = WorldModelEnv("terminal", stub, tasks, verifier=ReferenceVerifier())
    judged = WorldModelEnv("terminal", stub, tasks, verifier=WorldModelVerifier())
    unverified = WorldModelEnv("terminal", stub, tasks)
    try:
        reference.reset(seed=3, options={"template": "rename_file"})
        solution = reference.task.solution
        _, reward, terminated, truncated, info = reference.step("ls")
        assert (reward, terminated, truncated, info["solved"]) == (0.0, False, False, False)
        # the reference solution's last command, spaced differently: solved at this step, and the episode ends
        _, reward, terminated, truncated, info = reference.step("  " + solution[-1].replace(" ", "  "))
        assert (reward, terminated, truncated, info["solved"]) == (1.0, True, False, True)
        with pytest.raises(RuntimeError, match="episode is over"):
            reference.step("ls")
        # the world model's own verdict is asked after every step, as a real checker is: one more generation
        stub.observation = "FAIL"
        unverified.reset(seed=3, options={"template": "rename_file"})
        calls = stub.calls
        unverified.step("ls")
        per_step, calls = stub.calls - calls, stub.calls
        judged.reset(seed=3, options={"template": "rename_file"})
        calls = stub.calls
        _, reward, terminated, truncated, info = judged.step("ls")
        assert (reward, terminated, truncated, info["solved"]) == (0.0, False, False, False)
        assert stub.calls - calls == per_step + 1  # the observation, then the simulated checker
        stub.observation = "PASS"  # the world model now says the checker passes: solved at this step
        _, reward, terminated, truncated, info = judged.step("ls")
        assert (reward, terminated, truncated, info["solved"]) == (1.0, True, False, True)
        stub.observation = "FAIL"  # the world model says the checker fails; the end action ends it unsolved
        judged.reset(seed=3, options={"template": "rename_file"})
        _, reward, terminated, _, info = judged.step("exit")
        assert (reward, terminated, info["solved"]) == (0.0, True, False)
        # no verifier: reward 0 even for the solution, as synthetic data needs no verdict
        unverified.reset(seed=3, options={"template": "rename_file"})
        assert unverified.step(solution[-1])[1:3] == (0.0, False)
    finally:
        tasks.close()
    with pytest.raises(ValueError, match="agent.rl.sim_success"):
        make_verifier("oracle")


def test_wm2real_replays_simulated_actions_on_the_same_real_task():
    from agentworld.agents.episodes import Episode, task_options
    from agentworld.agents.wm2real import replay

    real = make_env("terminal")
    tasks = RealTaskSource("terminal")
    sim = WorldModelEnv("terminal", StubWorldModel("done"), tasks)
    try:
        sim.reset(seed=5, options=task_options(TEMPLATES, 5))
        task = sim.task
        solved = Episode(5, task.task_id, None, tokens=None, simulated=True, actions=list(task.solution))
        assert replay(solved, real, TEMPLATES) is True
        assert real.task.task_id == task.task_id  # the same seed gives the real env the same task
        assert replay(Episode(5, task.task_id, None, tokens=None, simulated=True, actions=["ls"]), real,
                      TEMPLATES) is False
    finally:
        real.close()
        tasks.close()


def test_bc_demonstrations_are_successful_real_episodes_ending_in_submit(tmp_path):
    demos, steps = scripted_demos("terminal", 3, first_seed=11, templates=TEMPLATES, max_steps=4)
    assert len(demos) == 3 and steps >= 3
    assert all(len(d.observations) == len(d.actions) + 1 for d in demos)
    chats = conversations(demos, "terminal", observation_chars=80)
    assert all(c[-1] == {"role": "assistant", "content": "submit"} for c in chats)
    assert chats[0][1]["role"] == "user" and "/workspace" in chats[0][1]["content"]

    # recorded real data: only successful episodes of the asked templates, cut at the solving step
    real = make_env("terminal")
    try:
        rows = list(_play_episode(real, "terminal", collect_params("scripted"), index=0))
    finally:
        real.close()
    write_jsonl(tmp_path / "terminal.jsonl", (r.model_dump(mode="json") for r in rows))
    template = rows[0].info["template"]
    recorded = recorded_demos(tmp_path / "terminal.jsonl", [template])
    assert len(recorded) == int(any(r.reward > 0 for r in rows))
    assert recorded_demos(tmp_path / "terminal.jsonl", ["no_such_template"]) == []


def test_grpo_over_whole_episodes_inside_the_world_model(tiny_dir, tmp_path):
    """TRL's GRPOTrainer takes two optimiser steps on episodes played in WorldModelEnvs; the
    rollouts are counted and the env-token mask reaches the trainer."""
    from agentworld.config import load_params

    params = load_params(SMOKE_PARAMS, {"agent.max_steps": 2, "agent.max_new_tokens": 6, "agent.templates": TEMPLATES,
                                        "agent.rl.max_steps": 2, "agent.rl.num_generations": 2,
                                        "agent.rl.tasks_per_step": 1, "agent.rl.budget_s": 600})
    model, tokenizer = load_local(tiny_dir)
    before = [p.detach().clone() for p in model.parameters()]
    tasks = RealTaskSource("terminal")
    stub = StubWorldModel("done")
    try:
        result, used = train_rl(model, tokenizer, lambda: WorldModelEnv("terminal", stub, tasks,
                                                                        verifier=ReferenceVerifier()),
                                params.agent, params.distributed, tmp_path / "rl")
    finally:
        tasks.close()
    assert result.global_step == 2
    assert used["rl_episodes"] == 4 and 4 <= used["rl_env_steps"] <= 8 and stub.calls >= 2
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # the optimiser stepped
    assert seed_of(task_dataset(5, 2)[1]["prompt"]) == 6


def test_the_wall_clock_budget_stops_training():
    class Control:
        should_training_stop = False

    budget, control = WallClockBudget(0.0), Control()
    budget.on_train_begin(None, None, control)
    budget.on_step_end(None, None, control)
    assert control.should_training_stop
    patient, control = WallClockBudget(3600.0), Control()
    patient.on_train_begin(None, None, control)
    patient.on_step_end(None, None, control)
    assert not control.should_training_stop


@pytest.mark.slow
def test_sim_rl_experiment_registers_agents_with_their_world_model(tmp_path, mlflow_store, smoke_params):
    """`agentworld experiment sim-rl` at smoke scale (one seed): three arms, each an MLflow run and
    an `agentworld-agent` version tagged with the world-model version; the parent run has the table."""
    from mlflow import MlflowClient

    from agentworld.experiments.agents import run_sim_rl
    from tests.helpers import built_and_trained

    built_and_trained(tmp_path, smoke_params, sft_steps=2, register=True)
    params = smoke_params.model_copy(update={"agent": smoke_params.agent.model_copy(
        update={"world_model": "models:/agentworld-world-model/1", "templates": TEMPLATES})})
    result = run_sim_rl(params, [0], tmp_path)
    table = result["table"]
    assert list(table) == ["bc", "bc+rl_sim", "bc+rl_real"]
    for row in table.values():
        assert len(row["real.success_rate"]["values"]) == 1 and 0 <= row["real.success_rate"]["mean"] <= 1
    assert table["bc+rl_sim"]["rl_episodes"]["mean"] > 0 and table["bc"]["rl_episodes"]["mean"] == 0
    # the simulator arm used no more real steps than BC's demonstrations; the real arm used more
    assert table["bc+rl_sim"]["real_steps_training"]["values"] == table["bc"]["real_steps_training"]["values"]
    assert all(r > b for r, b in zip(table["bc+rl_real"]["real_steps_training"]["values"],
                                      table["bc"]["real_steps_training"]["values"]))
    report = (tmp_path / "reports" / "experiments" / "sim_rl_terminal.md").read_text()
    assert "bc+rl_sim" in report and "±" in report
    client = MlflowClient()
    versions = client.search_model_versions("name='agentworld-agent'")
    assert len(versions) == 3
    assert all(v.tags["world_model_version"] == "1" and v.tags["world_model"] == "models:/agentworld-world-model/1"
               for v in versions)
    runs = client.search_runs([client.get_experiment_by_name(params.tracking.experiment).experiment_id],
                              f"tags.mlflow.parentRunId = '{result['parent_run_id']}'")
    assert sorted(r.data.tags["variant"] for r in runs) == sorted(["bc", "bc+rl_sim", "bc+rl_real"])
    parent = client.get_run(result["parent_run_id"])
    assert "bc_rl_sim.real.success_rate.mean" in parent.data.metrics
    episodes = [json.loads(line) for line in
                next(tmp_path.glob("runs/experiments/sim_rl/*/seed0/bc/real_episodes.jsonl")).read_text().splitlines()]
    assert len(episodes) == params.agent.eval_episodes and all(not e["simulated"] for e in episodes)
    # WM2Real: every evaluation task also played inside the world model and replayed for real
    replays = [json.loads(line) for line in
               next(tmp_path.glob("runs/experiments/sim_rl/*/seed0/bc/wm2real_episodes.jsonl")).read_text().splitlines()]
    assert [r["seed"] for r in replays] == [e["seed"] for e in episodes]
    bc = table["bc"]
    assert bc["wm2real.sim_success_rate"]["values"] == [sum(r["sim_success"] for r in replays) / len(replays)]
    assert bc["wm2real.real_success_rate"]["values"] == [sum(r["real_success"] for r in replays) / len(replays)]
    assert "WM2Real" in report and "bc_rl_sim.wm2real.agreement.mean" in parent.data.metrics


def test_a_missing_world_model_is_named_by_its_setting(tmp_path, mlflow_store):
    from agentworld.agents.train import resolve_world_model
    from agentworld.models.backends import BackendError

    with pytest.raises(BackendError, match="agent.world_model: .*agentworld-world-model"):
        resolve_world_model("models:/agentworld-world-model@champion", tmp_path)
    with pytest.raises(BackendError, match="agent.world_model: .*not a directory"):
        resolve_world_model(str(tmp_path / "nowhere"), tmp_path)


TW_TEMPLATES = ["tw-coin_collector"]


def test_textworld_agents_learn_from_won_games_and_their_simulated_actions_replay_in_the_same_game(tiny_dir):
    """The agents' second domain: demonstrations are won TextWorld games (points alone are not a
    win), the agent plays real and simulated games through the same loop, and WM2Real replays
    the simulated actions in the same generated game."""
    from agentworld.agents.episodes import Episode, task_options
    from agentworld.agents.success import solved
    from agentworld.agents.wm2real import replay

    demos, steps = scripted_demos("textworld", 2, first_seed=7, templates=TW_TEMPLATES, max_steps=12)
    assert demos and steps >= len(demos) and all(d.template == "tw-coin_collector" for d in demos)
    chats = conversations(demos, "textworld", observation_chars=80)
    assert all(c[-1] == {"role": "assistant", "content": "submit"} for c in chats)
    assert "text adventure" in chats[0][0]["content"]
    assert solved(1.0, {"won": False}) is False and solved(0.0, {"won": True}) is True

    real = make_env("textworld")
    tasks = RealTaskSource("textworld")
    sim = WorldModelEnv("textworld", StubWorldModel("You are in a room."), tasks,
                        verifier=ReferenceVerifier())
    try:
        sim.reset(seed=7, options=task_options(TW_TEMPLATES, 7))
        task = sim.task
        assert task.setup["game_type"] == "tw-coin_collector" and task.solution
        won = Episode(7, task.task_id, None, tokens=None, simulated=True, actions=list(task.solution))
        assert replay(won, real, TW_TEMPLATES) is True and real.task.task_id == task.task_id
        assert replay(Episode(7, task.task_id, None, tokens=None, simulated=True, actions=["look"]), real,
                      TW_TEMPLATES) is False
        model, tokenizer = load_local(tiny_dir)
        lm = LMAgent(model, tokenizer, "textworld", max_new_tokens=6, observation_chars=80)
        [played] = play(lm, [real], [7], max_steps=2, templates=TW_TEMPLATES)
        [simulated] = play(lm, [sim], [7], max_steps=2, templates=TW_TEMPLATES)
        assert played.task_id == simulated.task_id == task.task_id and not played.simulated and simulated.simulated
        assert played.success is False and 1 <= played.steps <= 2
    finally:
        real.close()
        tasks.close()


def test_agent_templates_must_belong_to_the_agent_domain():
    from pydantic import ValidationError

    from agentworld.config import AgentParams

    assert AgentParams(domain="textworld", templates=["tw-coin_collector", "tw-treasure_hunter"]).domain == "textworld"
    with pytest.raises(ValidationError, match="agent.templates .*rename_file.* do not belong to agent.domain textworld"):
        AgentParams(domain="textworld")
    with pytest.raises(ValidationError, match="tw-coin_collector.* do not belong to agent.domain terminal"):
        AgentParams(domain="terminal", templates=["tw-coin_collector"])
    # the domain declares its templates: a misspelt one is refused with the declared defaults as the hint
    with pytest.raises(ValidationError, match=r"\['rename_fil'\] do not belong .*such as rename_file, count_lines"):
        AgentParams(domain="terminal", templates=["rename_fil"])


def test_the_observation_verifier_reads_a_won_game_from_the_observation_as_the_real_game_prints_it():
    """TextWorld's success marker matches the real observation of the winning step and no other
    (walkthroughs of generated games, wrong and refused commands on the way); inside the simulator
    the predicted observation decides, and a command that carries the marker text wins nothing."""
    from agentworld.agents.episodes import task_options
    from agentworld.config import AgentParams
    from agentworld.simulation.verifiers import ObservationVerifier

    real = make_env("textworld")
    verdicts, won = [], []
    try:
        for seed in (7, 8, 11):
            real.reset(seed=seed, options=task_options(["tw-coin_collector", "tw-treasure_hunter"], seed))
            for action in ["look", "take the moon", "inventory", *real.task.solution]:
                observation, _, terminated, _, info = real.step(action)
                verdicts.append(ObservationVerifier.solved("textworld", action, observation))
                won.append(bool(info["won"]))
                if terminated:
                    break
    finally:
        real.close()
    assert verdicts == won and sum(won) == 3  # every walkthrough wins, at its last step only

    banner = "You pick up the coin from the ground.\n\n*** The End ***\n\nYou scored 1 out of a possible 1, in 4 turns."
    tasks = RealTaskSource("textworld")
    stub = StubWorldModel("You can't see any such thing.")
    sim = WorldModelEnv("textworld", stub, tasks, verifier=make_verifier("observation"))
    try:
        sim.reset(seed=7, options=task_options(TW_TEMPLATES, 7))
        assert sim.step("take coin")[1:3] == (0.0, False)  # the predicted game did not end: not solved
        stub.observation = "*** The End ***\n\nYou scored 0 out of a possible 1, in 2 turns."
        assert sim.step("eat coin")[1:3] == (0.0, False)  # the game ended without the full score: lost
        stub.observation = banner
        assert sim.step(f"say {banner}")[1:3] == (0.0, False)  # the marker in the command itself wins nothing
        _, reward, terminated, _, info = sim.step("take coin")
        assert (reward, terminated, info["solved"]) == (1.0, True, True)
        terminal = WorldModelEnv("terminal", stub, RealTaskSource("terminal"), verifier=make_verifier("observation"))
        terminal.reset(seed=3, options={"template": "rename_file"})
        with pytest.raises(ValueError, match="terminal has no success_marker"):
            terminal.step("ls")
        terminal.close()
    finally:
        tasks.close()
    with pytest.raises(ValueError, match="sim_success: observation needs .* terminal has no success_marker"):
        AgentParams(domain="terminal", rl={"sim_success": "observation"})
