"""build: split by episode, Qwen-AgentWorld chat layout, AgentWorldBench records."""

from __future__ import annotations

import re

from agentworld.config import BuildParams
from agentworld.data.build import build_datasets, load_examples
from agentworld.data.io import read_jsonl
from agentworld.data.prompts import OBSERVATION_MARKER, parse_observation
from tests.helpers import make_transitions

AWB_FIELDS = {"task", "id", "prompt", "response", "current_prompt", "system_str", "turn_idx", "total_turns",
              "episode_id", "transition_id"}


def test_split_by_episode_and_layouts(tmp_path):
    rows = make_transitions(episodes=60, turns=4)
    counts = build_datasets(rows, BuildParams(test_fraction=0.25, history_turns=2), tmp_path)
    train, test = load_examples(tmp_path / "sft/train.jsonl"), load_examples(tmp_path / "sft/test.jsonl")
    assert counts["train_examples"] + counts["test_examples"] == len(rows)
    episode = lambda e: e.id.rsplit(":", 1)[0]  # noqa: E731
    assert not {episode(e) for e in train} & {episode(e) for e in test}, "an episode straddles the split"
    assert 0.1 < len(test) / len(rows) < 0.45

    last = next(e for e in test if e.id.endswith(":003"))
    messages = last.prompt_messages()
    assert messages[0]["role"] == "system" and "Linux terminal" in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user", "assistant", "user"]  # 2 turns of history
    # The action, then the memory: the scorer's best candidate, a real training transition (as
    # it is or edited to this action's arguments) or one of this episode's turns.
    assert re.match(re.escape(last.action) + r"\n\n(Similar real transition(, adapted to this action)?"
                    r"|Earlier in this episode):\n>>> echo ",
                    messages[-1]["content"])
    completion = last.completion_messages()[0]["content"]
    assert completion.startswith(f"<think>{last.reasoning}</think>\n{OBSERVATION_MARKER}")  # grounded rationale first
    assert "exits with status 0" in last.reasoning
    assert parse_observation(completion) == (last.observation, True)

    bench = list(read_jsonl(tmp_path / "agentworldbench/terminal_test.jsonl"))
    assert len(bench) == len(test)
    for record in bench:
        assert set(record) == AWB_FIELDS
        assert record["task"] == "terminal"
        assert len(record["prompt"]) == len(record["response"]) == record["total_turns"] == 4
        assert 1 <= record["turn_idx"] <= 4 and isinstance(record["id"], int)
        assert record["current_prompt"] == record["prompt"][record["turn_idx"] - 1]


def test_split_is_stable_across_runs(tmp_path):
    rows = make_transitions(episodes=40)
    build_datasets(rows, BuildParams(), tmp_path / "a")
    build_datasets(list(reversed(rows)), BuildParams(), tmp_path / "b")
    assert (tmp_path / "a/sft/test.jsonl").read_bytes() == (tmp_path / "b/sft/test.jsonl").read_bytes()


def test_parse_observation_marks_format_errors():
    assert parse_observation("<think>cwd is /workspace</think>\n**Environment Observation:**\nfoo\n") == ("foo", True)
    assert parse_observation("just text") == ("just text", False)
