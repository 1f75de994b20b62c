"""The AgentWorldBench layout, both ways: files written exactly to the published specification
read as the official scorer reads them, and our export is what the official scorer expects."""

from __future__ import annotations

import json

import pytest

import stages.build
from agentworld.data.awbench import (
    BenchFormatError,
    BenchRecord,
    final_records,
    read_bench,
    write_bench,
)
from agentworld.data.io import write_jsonl
from agentworld.data.prompts import parse_observation
from stages.paths import StagePaths
from tests.helpers import make_transitions

OFFICIAL_FIELDS = {"task", "id", "prompt", "response", "current_prompt", "system_str", "turn_idx", "total_turns"}
SYSTEM = "# Role and Objective\n\nYou are a **Tool World Model** of an issue tracker."


def official_prompt(turn: int, call: dict) -> str:
    return f"### Turn {turn}\n**Action:**\n```json\n{json.dumps(call)}\n```"


CALLS = [{"tool": "list_issues", "arguments": {}}, {"tool": "get_issue", "arguments": {"id": 7}},
         {"tool": "close_issue", "arguments": {"id": 7}}]
OBSERVATIONS = ['{"isError":false,"result":[{"id":7,"state":"open"}]}', '{"isError":false,"result":{"id":7}}',
                '{"isError":false,"result":{"id":7,"state":"closed"}}']


def official_record(turn_idx: int, record_id: int = 145256090131919) -> dict:
    """A record exactly as the official README specifies it: integer id, 1-indexed turn, every turn in the lists."""
    prompts = [official_prompt(i + 1, c) for i, c in enumerate(CALLS)]
    return {"task": "mcp", "id": record_id, "prompt": prompts,
            "response": [f"**Environment Observation:**\n{o}" for o in OBSERVATIONS],
            "current_prompt": prompts[turn_idx - 1], "system_str": SYSTEM, "turn_idx": turn_idx, "total_turns": 3}


def official_messages(job: dict) -> list[dict[str, str]]:
    """The official inference's chat (eval.py `run_inference`), transcribed."""
    t = job["turn_idx"] - 1
    messages = [{"role": "system", "content": job["system_str"]}]
    for prompt, response in zip(job["prompt"][:t], job["response"][:t]):
        messages += [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    return messages + [{"role": "user", "content": job["prompt"][t]}]


def write_official(tmp_path, rows: list[dict]) -> None:
    (tmp_path / "mcp_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_official_records_read_at_a_final_a_middle_and_a_first_turn(tmp_path):
    write_official(tmp_path, [official_record(3, 1), official_record(2, 2), official_record(1, 3)])
    final, middle, first = read_bench(tmp_path)
    assert final.id == 1 and final.turn_idx == 3
    assert final.reference == OBSERVATIONS[2]  # the marker cleaned off, as the official scorer does
    assert middle.reference == OBSERVATIONS[1] and first.reference == OBSERVATIONS[0]
    assert middle.current_prompt == middle.prompt[1]
    for record, raw in zip((final, middle, first), (official_record(3), official_record(2), official_record(1))):
        assert record.to_example().prompt_messages() == official_messages(raw)
    assert middle.to_example().history == [(official_prompt(1, CALLS[0]), OBSERVATIONS[0])]
    assert first.to_example().history == []
    # one trajectory, whichever turn a record evaluates; its final record holds every turn
    assert final.episode == middle.episode == first.episode
    assert final_records([first, middle, final]) == [final]


def test_a_model_answer_in_the_official_tag_is_parsed_like_the_official_scorer():
    generation = "<think>the issue closes</think>\n<predicted_observation>\n**Environment Observation:**\n" \
                 f"{OBSERVATIONS[2]}\n</predicted_observation>"
    assert parse_observation(generation) == (OBSERVATIONS[2], True)


def test_an_exact_answer_scores_exact_match_on_official_records(tmp_path):
    from agentworld.scoring.metrics import exact_match

    write_official(tmp_path, [official_record(3)])
    record = read_bench(tmp_path)[0]
    generation = f"**Environment Observation:**\n{OBSERVATIONS[2]}"
    assert exact_match(parse_observation(generation)[0], record.reference) == 1.0


def test_extra_fields_are_kept_and_a_missing_current_prompt_is_the_turns_prompt(tmp_path):
    row = official_record(2)
    row.pop("current_prompt")
    row["difficulty"] = "hard"
    write_official(tmp_path, [row])
    record = read_bench(tmp_path)[0]
    assert record.current_prompt == row["prompt"][1]
    write_bench([record], tmp_path / "out")
    back = json.loads((tmp_path / "out" / "mcp_test.jsonl").read_text())
    assert back["difficulty"] == "hard" and back["id"] == row["id"]


def episode(domain: str, name: str, turns: int) -> list[BenchRecord]:
    actions = [f"cmd {name} {i}" for i in range(turns)]
    observations = [f"out {name} {i}\n" for i in range(turns)]
    return [BenchRecord.from_episode(domain, name, f"world model of {domain}\n\nThe agent's task: do {name}",
                                     actions, observations, t + 1) for t in range(turns)]


def test_our_export_is_the_official_layout(tmp_path):
    records = episode("terminal", "ep1", 3) + episode("mcp", "ep2", 2)
    counts = write_bench(records, tmp_path)
    assert counts == {"terminal": 3, "mcp": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp_test.jsonl", "terminal_test.jsonl"]
    rows = [json.loads(line) for line in (tmp_path / "terminal_test.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        assert OFFICIAL_FIELDS <= set(row) and set(row) - OFFICIAL_FIELDS == {"episode_id", "transition_id"}
        assert isinstance(row["id"], int) and row["turn_idx"] == i + 1 and row["total_turns"] == 3
        assert len(row["prompt"]) == len(row["response"]) == 3  # every turn, as the official files
        assert row["current_prompt"] == row["prompt"][row["turn_idx"] - 1]
        assert all(r.startswith("**Environment Observation:**\n") for r in row["response"])
    assert len({row["id"] for row in rows}) == 3
    # what the official inference would send for each record is what our model is sent
    assert [BenchRecord.model_validate(r).to_example().prompt_messages() for r in rows] == \
        [official_messages(r) for r in rows]
    back = read_bench(tmp_path)
    assert sorted(back, key=lambda r: r.key) == sorted(records, key=lambda r: r.key)


def test_record_becomes_the_example_of_its_current_turn():
    record = episode("terminal", "ep", 3)[1]
    example = record.to_example()
    assert example.action == "cmd ep 1" and example.observation == "out ep 1\n"
    assert example.history == [("cmd ep 0", "out ep 0\n")]  # earlier turns only, byte for byte
    assert record.instruction == "do ep" and record.reference == "out ep 1"
    assert [r.transition_id for r in final_records(episode("terminal", "a", 3) + episode("os", "b", 1))] == ["a:002"]


def test_build_exports_the_held_out_split_in_the_layout(tmp_path, smoke_params):
    paths = StagePaths(tmp_path)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=30))
    stages.build.run(smoke_params, tmp_path)
    records = read_bench(paths.agentworldbench)
    assert records and {r.task for r in records} == {"terminal"}
    held_out = {json.loads(line)["id"] for line in paths.sft_test.read_text().splitlines()}
    assert {r.transition_id for r in records} == held_out  # exactly the held-out turns, nothing from training
    assert all(len(r.prompt) == r.total_turns for r in records)


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.pop("response"), r"mcp_test.jsonl:2: field response: Field required"),
    (lambda r: r.update(response=r["response"][:1]), r":2: field \(record\): .*turn_idx 2 .* past the 1 entries of response"),
    (lambda r: r.update(turn_idx=4), r":2: field \(record\): .*turn_idx 4 .* past the 3 entries of prompt"),
    (lambda r: r.update(turn_idx=0), r":2: field turn_idx: Input should be greater than or equal to 1"),
    (lambda r: r.update(total_turns=1), r":2: field \(record\): .*turn_idx 2 is above total_turns 1"),
    (lambda r: r.update(turn_idx="x"), r":2: field turn_idx: "),
    (lambda r: r.update(id=[1]), r":2: field id"),
])
def test_malformed_record_names_file_line_and_field(tmp_path, mutate, message):
    rows = [official_record(1, 1), official_record(2, 2)]
    mutate(rows[1])
    write_official(tmp_path, rows)
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
    (tmp_path / "os_test.jsonl").unlink()
    write_official(tmp_path, [official_record(2, 9), official_record(2, 9)])
    with pytest.raises(BenchFormatError, match="id 9 at turn_idx 2 also in"):
        read_bench(tmp_path)
