"""The AgentWorldBench layout: round trip, our build's export, and errors that name file, line and field."""

from __future__ import annotations

import json

import pytest

import tasks.build
from agentworld.data.io import write_jsonl
from agentworld.evaluation.awbench import (
    BenchFormatError, BenchRecord, final_records, read_bench, write_bench,
)
from tasks.paths import StagePaths
from tests.helpers import make_transitions

FIELDS = {"task", "id", "prompt", "response", "current_prompt", "system_str", "turn_idx", "total_turns"}


def episode(domain: str, name: str, turns: int) -> list[BenchRecord]:
    actions = [f"cmd {name} {i}" for i in range(turns)]
    observations = [f"out {name} {i}\n" for i in range(turns)]
    return [BenchRecord.from_episode(domain, name, f"world model of {domain}\n\nThe agent's task: do {name}",
                                     actions, observations, t) for t in range(turns)]


def test_round_trip_keeps_every_record_and_field(tmp_path):
    records = episode("terminal", "ep1", 3) + episode("mcp", "ep2", 2)
    counts = write_bench(records, tmp_path)
    assert counts == {"terminal": 3, "mcp": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp_test.jsonl", "terminal_test.jsonl"]
    for line in (tmp_path / "terminal_test.jsonl").read_text().splitlines():
        assert set(json.loads(line)) == FIELDS
    back = read_bench(tmp_path)
    assert sorted(back, key=lambda r: r.id) == sorted(records, key=lambda r: r.id)


def test_record_becomes_the_example_of_its_current_turn():
    record = episode("terminal", "ep", 3)[2]
    example = record.to_example()
    assert example.action == "cmd ep 2" and example.observation == "out ep 2\n"
    assert example.history == [("cmd ep 0", "out ep 0\n"), ("cmd ep 1", "out ep 1\n")]
    assert record.instruction == "do ep" and record.reference == "out ep 2\n"
    # the last record of each episode of two or more turns holds the whole episode
    assert [r.id for r in final_records(episode("terminal", "a", 3) + episode("os", "b", 1))] == ["a:002"]


def test_build_exports_the_held_out_split_in_the_layout(tmp_path, smoke_params):
    paths = StagePaths(tmp_path)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=30))
    tasks.build.run(smoke_params, tmp_path)
    records = read_bench(paths.agentworldbench)
    assert records and {r.task for r in records} == {"terminal"}
    held_out = {json.loads(line)["id"] for line in paths.sft_test.read_text().splitlines()}
    assert {r.id for r in records} == held_out  # exactly the held-out turns, nothing from training
    last = final_records(records)
    assert all(len(r.prompt) == r.total_turns for r in last)


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.pop("response"), r"terminal_test.jsonl:2: field response: Field required"),
    (lambda r: r.update(response=r["response"][:-1]), r":2: field \(record\): .*prompt has 2 turns but response has 1"),
    (lambda r: r.update(current_prompt="other"), r":2: field \(record\): .*current_prompt differs"),
    (lambda r: r.update(turn_idx="x"), r":2: field turn_idx: "),
])
def test_malformed_record_names_file_line_and_field(tmp_path, mutate, message):
    rows = [r.model_dump() for r in episode("terminal", "ep", 2)]
    mutate(rows[1])
    (tmp_path / "terminal_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(BenchFormatError, match=message):
        read_bench(tmp_path)


def test_not_json_empty_dir_and_duplicate_ids_are_named(tmp_path):
    with pytest.raises(BenchFormatError, match="no `<domain>_test.jsonl` files"):
        read_bench(tmp_path)
    with pytest.raises(BenchFormatError, match="no such file or directory"):
        read_bench(tmp_path / "missing")
    (tmp_path / "os_test.jsonl").write_text('{"task": "os"\n')
    with pytest.raises(BenchFormatError, match=r"os_test.jsonl:1: not valid JSON"):
        read_bench(tmp_path)
    write_bench(episode("os", "ep", 1), tmp_path)
    write_bench(episode("terminal", "ep", 1), tmp_path)
    with pytest.raises(BenchFormatError, match="id 'ep:000' also in"):
        read_bench(tmp_path)
