"""Agent logs in the OpenAI chat-completions layout become trajectories, one per conversation.

The input is JSON Lines, one conversation per line: `{"messages": [...]}` (the layout of OpenAI's
fine-tuning files; an `id` and any other keys are kept out of the way) or a bare list of
messages. Each tool call of an assistant message (`tool_calls[j].function.name` and its JSON
`arguments`) paired with the `tool` message answering its `tool_call_id` is one transition:
action `{"arguments": ..., "tool": ...}`, observation the tool message's content as it was
logged. The conversation's first user message is the trajectory's instruction.

A conversation that breaks the layout (a field missing, arguments that are not JSON, a tool
result for a call nobody made, a call nobody answered) is rejected whole, with its line and the
field; every valid conversation of the file is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentworld.data.recording.redact import Redactor
from agentworld.data.recording.store import DESCRIPTION_FILE, RecordingWriter


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


Content = str | list[ContentPart]


class SystemMessage(_Message):
    role: Literal["system", "developer"]
    content: Content


class UserMessage(_Message):
    role: Literal["user"]
    content: Content


class FunctionCall(BaseModel):
    name: str = Field(min_length=1)
    arguments: str


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall


class AssistantMessage(_Message):
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolMessage(_Message):
    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1)
    content: Content


ROLES = ("system", "developer", "user", "assistant", "tool")
Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]


class Conversation(BaseModel):
    model_config = ConfigDict(extra="allow")
    messages: list[Message] = Field(min_length=1)


@dataclass(frozen=True)
class Rejection:
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: Any
    observation: str


def text_of(content: Content | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text or "" for part in content)


def _location(loc: tuple[Any, ...]) -> str:
    """pydantic's error location as a path: ('messages', 1, 'tool', 'x') -> messages[1].x (the
    discriminator's tag after a list index adds nothing)."""
    out, previous = "", None
    for part in loc:
        if isinstance(previous, int) and part in ROLES:
            previous = part
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        previous = part
    return out


def conversation_calls(conversation: Conversation, line: int) -> list[Call] | Rejection:
    """The conversation's calls in order, each with its answer, or why it cannot be used."""
    pending: dict[str, tuple[str, Any, str]] = {}
    order: list[str] = []
    answers: dict[str, str] = {}
    for i, message in enumerate(conversation.messages):
        if isinstance(message, AssistantMessage):
            for j, call in enumerate(message.tool_calls):
                where = f"messages[{i}].tool_calls[{j}]"
                try:
                    arguments = json.loads(call.function.arguments) if call.function.arguments.strip() else {}
                except ValueError as exc:
                    return Rejection(line, f"{where}.function.arguments", f"not valid JSON ({exc})")
                if call.id in pending:
                    return Rejection(line, f"{where}.id", f"call id {call.id!r} is used twice")
                pending[call.id] = (call.function.name, arguments, where)
                order.append(call.id)
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in pending or message.tool_call_id in answers:
                return Rejection(line, f"messages[{i}].tool_call_id",
                                 f"{message.tool_call_id!r} answers no open tool call")
            answers[message.tool_call_id] = text_of(message.content)
    for call_id in order:
        if call_id not in answers:
            return Rejection(line, pending[call_id][2], f"no tool message answers call {call_id!r}")
    return [Call(pending[c][0], pending[c][1], answers[c]) for c in order]


def parse_line(text: str, line: int) -> tuple[Conversation, list[Call]] | Rejection:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return Rejection(line, "(line)", f"not valid JSON ({exc})")
    if isinstance(raw, list):
        raw = {"messages": raw}
    try:
        conversation = Conversation.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        return Rejection(line, _location(first["loc"]) or "(line)", first["msg"])
    calls = conversation_calls(conversation, line)
    if isinstance(calls, Rejection):
        return calls
    if not calls:
        return Rejection(line, "messages", "no tool calls: nothing of the environment to learn")
    return conversation, calls


def import_openai_chat(path: Path, name: str, directory: Path, *,
                       redactor: Redactor | None = None) -> tuple[int, int, list[Rejection]]:
    """Append the file's valid conversations to the recording; (conversations, transitions, rejections)."""
    rejections: list[Rejection] = []
    valid: list[tuple[int, Conversation, list[Call]]] = []
    with Path(path).open(encoding="utf-8") as fh:
        for line_no, text in enumerate(fh, start=1):
            if text.strip():
                parsed = parse_line(text, line_no)
                if isinstance(parsed, Rejection):
                    rejections.append(parsed)
                else:
                    valid.append((line_no, *parsed))
    if not valid:
        return 0, 0, rejections
    writer = RecordingWriter(directory, name, recorder="openai-chat-import", redactor=redactor,
                             provenance={"imported_from": str(path)})
    # Tools of earlier imports into the same recording stay listed.
    earlier = directory / DESCRIPTION_FILE
    known = {t["name"] for t in json.loads(earlier.read_text()).get("tools", [])} if earlier.exists() else set()
    tools = sorted(known | {call.tool for _, _, calls in valid for call in calls})
    writer.describe({"kind": "openai-chat", "tools": [{"name": tool} for tool in tools]})
    for k, (line_no, conversation, calls) in enumerate(valid):
        instruction = next((text_of(m.content) for m in conversation.messages if isinstance(m, UserMessage)), "")
        trajectory = writer.trajectory_id(k)
        for j, call in enumerate(calls):
            writer.record(trajectory, action={"tool": call.tool, "arguments": call.arguments},
                          observation=call.observation, instruction=instruction,
                          info={"tool": call.tool, "source_line": line_no}, done=j == len(calls) - 1)
    return len(valid), sum(len(calls) for _, _, calls in valid), rejections
