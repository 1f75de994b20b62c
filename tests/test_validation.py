"""Validation: real Great Expectations, real files, no mocks.

Speed: the malformed cases share ONE validation run (`combined`, module-scoped): each case
lives in its own trajectory of one file, so a case can only affect its own rows, and the
parametrised tests read their verdict from that run. Other tests run small files.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentworld.config import ValidateParams
from agentworld.data.io import read_jsonl, read_transitions, write_jsonl
from agentworld.data.schema import Transition
from agentworld.validation import (
    EmptyInputError,
    RejectedShareExceeded,
    ValidationReport,
    check_file,
    format_report,
    validate_file,
    validate_files,
)

TURNS = 4
PARAMS = ValidateParams(max_rejected_share=1.0, observation_max_chars=200, action_max_chars=50)


def make_rows(trajectory_id: str, turns: int = TURNS, domain: str = "terminal") -> list[Transition]:
    """`turns` valid transitions of one trajectory."""
    return [
        Transition(
            id=f"{trajectory_id}:{turn:03d}", trajectory_id=trajectory_id, turn=turn,
            domain=domain, env_id="terminal-v1", task_id="echo", instruction="print the words",
            action=f"echo w{turn}", observation=f"obs w{turn}", reward=float(turn == turns - 1),
            done=turn == turns - 1, source="real", policy="scripted", env_version="1", seed=7,
            timestamp="2025-01-01T00:00:00.000+00:00", info={"exit_code": 0})
        for turn in range(turns)
    ]


def make_valid_rows(n_trajectories: int, turns: int = TURNS) -> list[Transition]:
    return [row for i in range(n_trajectories) for row in make_rows(f"traj-{i}", turns)]


def line_of(row: Transition | dict[str, Any], **changes: Any) -> bytes:
    record = row.model_dump(mode="json") if isinstance(row, Transition) else dict(row)
    record.update(changes)
    return json.dumps(record).encode()  # default allow_nan=True writes NaN / Infinity


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _without(row: Transition, name: str) -> bytes:
    record = row.model_dump(mode="json")
    del record[name]
    return line_of(record)


@dataclass(frozen=True)
class Case:
    """One malformed line: how to break row `turn` of its trajectory, and what must be named."""

    name: str
    corrupt: Callable[[Transition], bytes]
    field: str
    check: str
    turn: int = 2


CASES = [
    Case("missing_field", lambda r: _without(r, "observation"), "observation", "required"),
    Case("turn_as_string", lambda r: line_of(r, turn="2"), "turn", "type"),
    Case("reward_as_string", lambda r: line_of(r, reward="0.5"), "reward", "type"),
    Case("empty_action", lambda r: line_of(r, action=""), "action", "non_empty"),
    Case("unknown_field", lambda r: line_of(r, colour="red"), "colour", "unknown_field"),
    Case("nan_reward", lambda r: line_of(r, reward=float("nan")), "reward", "finite"),
    Case("infinite_reward", lambda r: line_of(r, reward=float("inf")), "reward", "finite"),
    Case("bad_source", lambda r: line_of(r, source="scraped"), "source", "type"),
    Case("duplicate_key", lambda r: line_of(r)[:-1] + b', "action": "rm -rf /"}', "action", "json"),
    Case("broken_json", lambda r: line_of(r)[:60], "<line>", "json"),
    Case("invalid_utf8", lambda r: line_of(r).replace(b"obs w", b"obs \xff\xfe"), "<line>", "utf8"),
    Case("duplicate_id", lambda r: line_of(r, id=r.id.replace(":002", ":001")), "id",
         "expect_column_values_to_be_unique"),
    Case("duplicate_turn", lambda r: line_of(r, turn=1), "turn",
         "expect_compound_columns_to_be_unique"),
    Case("turn_jump", lambda r: line_of(r, turn=9), "turn",
         "expect_column_pair_values_a_to_be_greater_than_b", turn=3),
    Case("unknown_domain", lambda r: line_of(r, domain="web"), "domain",
         "expect_column_values_to_be_in_set"),
    Case("observation_too_long", lambda r: line_of(r, observation="x" * 201), "observation",
         "expect_column_value_lengths_to_be_between"),
    Case("action_too_long", lambda r: line_of(r, action="y" * 51), "action",
         "expect_column_value_lengths_to_be_between"),
    Case("reward_out_of_range", lambda r: line_of(r, reward=5000.0), "reward",
         "expect_column_values_to_be_between"),
    Case("lone_surrogate", lambda r: line_of(r, observation="bad \ud800 text"), "observation",
         "expect_column_values_to_be_in_set"),
    Case("lone_surrogate_in_info", lambda r: line_of(r, info={"note": "\udc00"}), "info",
         "expect_column_values_to_be_in_set"),
]


@dataclass
class Combined:
    path: Path
    report: ValidationReport
    clean: list[Transition]
    quarantine: dict[int, dict[str, Any]]  # line -> record
    bad_line: dict[str, int]  # case name -> line
    rows: dict[int, Transition]  # line -> original valid transition
    docs_dir: Path


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory) -> Combined:
    """One file: two clean trajectories, then one trajectory per malformed case."""
    tmp = tmp_path_factory.mktemp("combined")
    lines: list[bytes] = []
    rows: dict[int, Transition] = {}
    bad_line: dict[str, int] = {}
    for row in make_valid_rows(2):
        lines.append(line_of(row))
        rows[len(lines)] = row
    for case in CASES:
        for row in make_rows(f"case-{case.name}"):
            lines.append(case.corrupt(row) if row.turn == case.turn else line_of(row))
            rows[len(lines)] = row
            if row.turn == case.turn:
                bad_line[case.name] = len(lines)
    path = write_lines(tmp / "input.jsonl", lines)
    report = validate_file(path, tmp / "clean.jsonl", tmp / "quarantine.jsonl", PARAMS,
                           ["terminal"], docs_dir=tmp / "docs")
    quarantine = {rec["line"]: rec for rec in read_jsonl(tmp / "quarantine.jsonl")}
    return Combined(path, report, read_transitions(tmp / "clean.jsonl"), quarantine, bad_line,
                    rows, tmp / "docs")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_line_is_quarantined_with_line_and_field(combined: Combined, case: Case) -> None:
    line = combined.bad_line[case.name]
    record = combined.quarantine[line]
    assert record["file"] == str(combined.path)
    assert record["field"] == case.field
    assert record["check"] == case.check
    assert f"{combined.path}:{line}: field '{case.field}'" in record["reason"]
    # The valid neighbours of the bad row (same trajectory) all reached the clean file.
    trajectory = f"case-{case.name}"
    kept = [r for r in combined.clean if r.trajectory_id == trajectory]
    expected = [r for n, r in combined.rows.items() if r.trajectory_id == trajectory and n != line]
    assert kept == expected


def test_combined_run_loses_nothing(combined: Combined) -> None:
    bad = set(combined.bad_line.values())
    assert set(combined.quarantine) == bad
    assert combined.clean == [r for n, r in combined.rows.items() if n not in bad]
    report = combined.report
    assert (report.total_rows, report.clean, report.rejected) == (len(combined.rows),
                                                                  len(combined.rows) - len(bad),
                                                                  len(bad))
    assert report.clean + report.rejected == report.total_rows
    assert sum(report.reasons.values()) >= report.rejected
    assert report.reasons["expect_column_values_to_be_in_set:domain"] == 1


def test_quarantine_keeps_the_raw_line(combined: Combined) -> None:
    lines = combined.path.read_bytes().split(b"\n")
    for line, record in combined.quarantine.items():
        original = lines[line - 1]
        if record["raw_encoding"] == "base64":
            assert base64.b64decode(record["raw"]) == original
        else:
            assert record["raw"].encode() == original
    assert combined.quarantine[combined.bad_line["invalid_utf8"]]["raw_encoding"] == "base64"


def test_data_docs_show_the_failed_run(combined: Combined) -> None:
    assert combined.report.docs_index == combined.docs_dir / "index.html"
    (page,) = (combined.docs_dir / "validations").rglob("*.html")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))
    assert "Status: Failed" in text and "values must belong to this set: terminal" in text


def test_clean_file_passes_with_data_docs(tmp_path: Path) -> None:
    rows = make_valid_rows(3)
    source = tmp_path / "in.jsonl"
    write_jsonl(source, rows)
    report = validate_file(source, tmp_path / "clean.jsonl", tmp_path / "q.jsonl",
                           ValidateParams(max_rejected_share=0.0), ["terminal"],
                           docs_dir=tmp_path / "docs")
    assert (report.total_rows, report.clean, report.rejected) == (12, 12, 0)
    assert report.ok and report.reasons == {}
    assert read_transitions(tmp_path / "clean.jsonl") == rows
    assert (tmp_path / "q.jsonl").read_text() == ""
    assert (tmp_path / "docs" / "index.html").is_file()
    assert list((tmp_path / "docs" / "validations").rglob("*.html"))
    assert "PASSED (no rejected rows)" in format_report(report)


def _ten_rows_one_bad(tmp_path: Path) -> Path:
    rows = make_valid_rows(2, turns=5)
    lines = [line_of(r) for r in rows]
    lines[3] = line_of(rows[3], domain="web")
    return write_lines(tmp_path / "in.jsonl", lines)


def test_share_above_threshold_raises_after_writing_both_files(tmp_path: Path) -> None:
    source = _ten_rows_one_bad(tmp_path)
    clean, quarantine = tmp_path / "clean.jsonl", tmp_path / "q.jsonl"
    with pytest.raises(RejectedShareExceeded) as err:
        validate_file(source, clean, quarantine, ValidateParams(max_rejected_share=0.05),
                      ["terminal"])
    message = str(err.value)
    assert "10.00%" in message and "5.00%" in message and str(quarantine) in message
    assert "expect_column_values_to_be_in_set:domain" in message
    assert isinstance(err.value, ValueError) and err.value.report.rejected == 1
    assert len(read_transitions(clean)) == 9
    assert [r["line"] for r in read_jsonl(quarantine)] == [4]


def test_share_below_threshold_passes(tmp_path: Path) -> None:
    source = _ten_rows_one_bad(tmp_path)
    report = validate_file(source, tmp_path / "c.jsonl", tmp_path / "q.jsonl",
                           ValidateParams(max_rejected_share=0.2), ["terminal"])
    assert report.rejected == 1 and report.within_threshold and not report.ok
    assert "PASSED WITH REJECTIONS" in format_report(report)


def test_gap_from_unattributable_line_keeps_neighbours(tmp_path: Path) -> None:
    """A line that names no trajectory (not even as text) still counts as a possible turn."""
    rows = make_rows("t")
    lines = [line_of(r) for r in rows]
    lines[1] = b"[1, 2, 3]"
    report = validate_file(write_lines(tmp_path / "in.jsonl", lines), tmp_path / "c.jsonl",
                           tmp_path / "q.jsonl", PARAMS, ["terminal"])
    assert report.rejected == 1
    assert [r.turn for r in read_transitions(tmp_path / "c.jsonl")] == [0, 2, 3]


def test_missing_turn_without_rejected_line_is_a_gap(tmp_path: Path) -> None:
    """Turns 0, 2, 3 with no rejected line: 3 rows hold turns 0..2, so turn 3 is rejected."""
    rows = make_rows("t")
    del rows[1]
    source = tmp_path / "in.jsonl"
    write_jsonl(source, rows)
    report = check_file(source, PARAMS, ["terminal"])
    assert report.rejected == 1
    assert "field 'turn'" in report.examples[0] and f"{source}:3:" in report.examples[0]


def test_duplicate_ids_across_files_keep_the_first(tmp_path: Path) -> None:
    first = tmp_path / "a.jsonl"
    second = tmp_path / "b.jsonl"
    write_jsonl(first, make_rows("t"))
    write_jsonl(second, make_rows("t")[:1] + make_rows("u"))
    report = validate_files([first, second], tmp_path / "c.jsonl", tmp_path / "q.jsonl",
                            PARAMS, ["terminal"])
    (record,) = read_jsonl(tmp_path / "q.jsonl")
    assert (record["file"], record["line"], record["field"]) == (str(second), 1, "id,turn")
    assert f"first seen at {first}:1" in record["reason"]
    assert report.total_rows == 9 and report.clean == 8


def test_check_file_writes_nothing_and_does_not_raise(tmp_path: Path) -> None:
    source = _ten_rows_one_bad(tmp_path)
    report = check_file(source, ValidateParams(max_rejected_share=0.0), ["terminal"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    assert not report.ok and not report.within_threshold
    text = format_report(report)
    assert "FAILED" in text and f"{source}:4: field 'domain'" in text


def test_missing_and_empty_inputs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        check_file(tmp_path / "nope.jsonl", PARAMS)
    for content in (b"", b"\n  \n"):
        (tmp_path / "empty.jsonl").write_bytes(content)
        with pytest.raises(EmptyInputError, match="empty.jsonl"):
            validate_file(tmp_path / "empty.jsonl", tmp_path / "c.jsonl", tmp_path / "q.jsonl",
                          PARAMS)
    assert not (tmp_path / "c.jsonl").exists()
