"""The episode's opening state (what the reset showed) reaches the world model the same way in
training, in the AgentWorldBench export, and in the simulator: real TextWorld games."""

from __future__ import annotations

import os

import pytest

from agentworld.config import BuildParams, PolicyMix
from agentworld.data.awbench import BenchRecord
from agentworld.data.build import agentworldbench_records, episode_examples
from agentworld.data.copying import COPY_PREVIOUS
from agentworld.data.episodes import episode_seed, play_episodes
from agentworld.data.prompts import OPENING_MARKER, opening_of, task_of
from agentworld.data.schema import FIRST_OBSERVATION, first_observation, group_trajectories
from agentworld.domains.textworld.env import TextWorldEnv, probe
from agentworld.envs.vector import TextVectorEnv
from agentworld.evaluation.baselines import copy_previous
from agentworld.evaluation.rollout import GenerateBackend, RecordedStart
from agentworld.simulation.env import RealTaskSource, WorldModelEnv
from agentworld.training.cpt import transition_stream

AVAILABLE, REASON = probe()
needs_textworld = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"TextWorld unavailable: {REASON}")

FAST_TYPES = ("tw-treasure_hunter",)  # the quickest games to generate
BASE_SEED, INDEX = 0, 6


@needs_textworld
def test_opening_state_is_recorded_trained_on_and_simulated_alike(tmp_path):
    make = lambda: TextWorldEnv(cache_dir=tmp_path, game_types=FAST_TYPES)  # noqa: E731
    vector = TextVectorEnv([make()], max_episode_steps=3)
    try:
        rows = list(play_episodes(vector, [INDEX], base_seed=BASE_SEED, policy_mix=PolicyMix(),
                                  trajectory_prefix="textworld"))
        reset_text = vector.envs[0].reset(seed=episode_seed(BASE_SEED, INDEX))[0]
    finally:
        vector.close()
    [turns] = group_trajectories(rows).values()
    instruction = turns[0].instruction

    # Collection: the first row keeps what the reset showed, and only the first row.
    assert first_observation(turns) == reset_text and "-= " in reset_text  # a room heading
    assert all(FIRST_OBSERVATION not in row.info for row in turns[1:])

    # Training: every example's system prompt states the task, then the room it starts in.
    examples = episode_examples(turns, BuildParams(history_turns=2))
    system = examples[0].system
    opening = opening_of(system)
    assert {e.system for e in examples} == {system} and OPENING_MARKER in system
    assert task_of(system) == instruction
    assert opening and opening in reset_text and not opening.startswith(instruction)
    # It is context, not a previous turn: the first turn has nothing to copy as "previous".
    assert copy_previous(examples[:1]) == [""] and COPY_PREVIOUS not in examples[0].copy_sources()
    assert opening in transition_stream(examples)  # continual pre-training sees it too

    # AgentWorldBench export: the same system prompt; the task and opening read back from it.
    [record, *_] = [BenchRecord.model_validate(r.model_dump()) for r in agentworldbench_records(turns, BuildParams())]
    assert record.system_str == system and record.instruction == instruction
    assert RecordedStart(record).start(None, None)[1] == opening

    # Simulator: a WorldModelEnv started by the real task source on the same seed writes the
    # system prompt the model was trained on (its backend is never asked during reset).
    backend = GenerateBackend("unused", lambda examples: [])
    simulator = WorldModelEnv("textworld", backend, RealTaskSource("textworld", make_env=make))
    try:
        first, _ = simulator.reset(seed=episode_seed(BASE_SEED, INDEX))
        assert first == reset_text
        assert simulator.example(turns[0].action).system == system
    finally:
        simulator.tasks.close()
