"""`agentworld import openai-chat`: chat-completions agent logs into trajectories; malformed
conversations are rejected by line and field and every valid one is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentworld.data.io import read_transitions
from agentworld.data.recording.openai_chat import import_openai_chat
from agentworld.data.recording.store import DESCRIPTION_FILE, TRAJECTORIES_FILE

SECRET = "sk-live-4fT9qLm2Xv8NwR6pZs1Kd3Hb"


def tool_call(call_id: str, name: str, arguments: dict | str) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def conversation(*, calls: list[dict], results: list[tuple[str, str]], goal: str = "find the open invoices") -> dict:
    return {"id": "conv", "messages": [
        {"role": "system", "content": "You are a billing agent."},
        {"role": "user", "content": goal},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": cid, "content": content} for cid, content in results),
        {"role": "assistant", "content": "Done."},
    ]}


GOOD_A = conversation(calls=[tool_call("c1", "list_invoices", {"status": "open"}),
                             tool_call("c2", "get_customer", {"id": 7, "api_key": SECRET})],
                      results=[("c1", '[{"id": 3, "total": 120.0}]'), ("c2", '{"name": "Ada"}')])
GOOD_B = [  # a bare list of messages is one conversation too; content as parts
    {"role": "user", "content": [{"type": "text", "text": "refund invoice 3"}]},
    {"role": "assistant", "tool_calls": [tool_call("x", "refund", {"invoice": 3})]},
    {"role": "tool", "tool_call_id": "x", "content": [{"type": "text", "text": "error: invoice 3 is paid"}]},
]
BAD = [
    ("{not json", "(line)", "not valid JSON"),
    (json.dumps(conversation(calls=[tool_call("c1", "list_invoices", "{status: open}")], results=[("c1", "[]")])),
     "messages[2].tool_calls[0].function.arguments", "not valid JSON"),
    (json.dumps(conversation(calls=[tool_call("c1", "list_invoices", {})], results=[("zz", "[]")])),
     "messages[3].tool_call_id", "answers no open tool call"),
    (json.dumps(conversation(calls=[tool_call("c1", "list_invoices", {})], results=[])),
     "messages[2].tool_calls[0]", "no tool message answers call 'c1'"),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}),
     "messages[1].tool_call_id", "Field required"),
    (json.dumps({"messages": [{"role": "robot", "content": "hi"}]}), "messages[0]", "tag 'robot'"),
]


def write_log(path: Path) -> Path:
    lines = [json.dumps(GOOD_A), BAD[0][0], BAD[1][0], json.dumps(GOOD_B), *[text for text, _, _ in BAD[2:]], ""]
    path.write_text("\n".join(lines))
    return path


def test_import_keeps_valid_conversations_and_names_each_rejection(tmp_path: Path) -> None:
    log = write_log(tmp_path / "agent.jsonl")
    conversations, transitions, rejections = import_openai_chat(log, "billing", tmp_path / "rec")
    assert (conversations, transitions) == (2, 3)
    got = [(r.line, r.field) for r in rejections]
    assert got == [(2, BAD[0][1]), (3, BAD[1][1]), (5, BAD[2][1]), (6, BAD[3][1]), (7, BAD[4][1]), (8, BAD[5][1])]
    for rejection, (_, _, message) in zip(rejections, BAD, strict=True):
        assert message in rejection.message, rejection

    rows = read_transitions(tmp_path / "rec" / TRAJECTORIES_FILE)
    assert len(rows) == 3 and len({r.trajectory_id for r in rows}) == 2
    first, second, third = rows
    assert json.loads(first.action) == {"tool": "list_invoices", "arguments": {"status": "open"}}
    assert first.observation == '[{"id": 3, "total": 120.0}]' and first.instruction == "find the open invoices"
    assert (first.turn, second.turn, third.turn) == (0, 1, 0)
    assert json.loads(second.action)["arguments"] == {"id": 7, "api_key": "<REDACTED:api_key>"}
    assert third.observation == "error: invoice 3 is paid" and third.instruction == "refund invoice 3"
    assert all(r.source == "real" and r.info["recorder"] == "openai-chat-import" for r in rows)
    assert [r.info["source_line"] for r in rows] == [1, 1, 4]
    assert [r.done for r in rows] == [False, True, True]  # each conversation's last call ends it
    description = json.loads((tmp_path / "rec" / DESCRIPTION_FILE).read_text())
    assert [t["name"] for t in description["tools"]] == ["get_customer", "list_invoices", "refund"]
    again = tmp_path / "more.jsonl"  # a second import into the same recording keeps the tools listed
    again.write_text(json.dumps(conversation(calls=[tool_call("z", "void_invoice", {"id": 3})],
                                             results=[("z", "ok")])) + "\n")
    assert import_openai_chat(again, "billing", tmp_path / "rec")[:2] == (1, 1)
    description = json.loads((tmp_path / "rec" / DESCRIPTION_FILE).read_text())
    assert [t["name"] for t in description["tools"]] == ["get_customer", "list_invoices", "refund", "void_invoice"]
    assert all(SECRET not in p.read_text() for p in (tmp_path / "rec").iterdir())


def test_import_command_reports_rejections_by_file_line_and_field(tmp_path: Path) -> None:
    log = write_log(tmp_path / "agent.jsonl")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "agentworld.cli", "import", "openai-chat", str(log),
                           "--name", "billing", "--out", str(tmp_path / "rec")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{log}: line 3: messages[2].tool_calls[0].function.arguments: not valid JSON" in done.stderr
    assert "2 conversations (3 transitions)" in done.stderr and "6 rejected" in done.stderr
    empty = tmp_path / "bad.jsonl"
    empty.write_text(BAD[0][0] + "\n")
    done = subprocess.run([sys.executable, "-m", "agentworld.cli", "import", "openai-chat", str(empty), "--name", "x",
                           "--out", str(tmp_path / "none")], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and "0 conversations" in done.stderr and not (tmp_path / "none").exists()
