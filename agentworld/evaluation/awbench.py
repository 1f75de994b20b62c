"""The public AgentWorldBench layout: one `<domain>_test.jsonl` per domain, one record per turn.

A record carries the whole episode up to its turn: `prompt` is the list of the agent's actions
(turn prompts), `response` the list of real observations, the last of each being the current
turn (`current_prompt`, and the reference the world model is scored against). Our own held-out
split is exported in this layout by the build stage, and any directory of such files (ours,
or one a user downloaded) can be evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentworld.data.prompts import WorldModelExample

FILE_SUFFIX = "_test.jsonl"
TASK_MARKER = "The agent's task: "


class BenchFormatError(ValueError):
    """A file that is not in the AgentWorldBench layout; the message names file, line and field."""


class BenchRecord(BaseModel):
    """One turn of a held-out episode, in the public field names."""

    model_config = ConfigDict(extra="ignore")

    task: str = Field(min_length=1)
    id: str = Field(min_length=1)
    prompt: list[str] = Field(min_length=1)
    response: list[str] = Field(min_length=1)
    current_prompt: str
    system_str: str
    turn_idx: int = Field(ge=0)
    total_turns: int = Field(ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> BenchRecord:
        if len(self.prompt) != len(self.response):
            raise ValueError(f"prompt has {len(self.prompt)} turns but response has {len(self.response)}; "
                             "each action needs its observation (the last pair is the current turn)")
        if self.prompt[-1] != self.current_prompt:
            raise ValueError("current_prompt differs from the last entry of prompt")
        if self.turn_idx >= self.total_turns:
            raise ValueError(f"turn_idx {self.turn_idx} is not below total_turns {self.total_turns}")
        return self

    @property
    def domain(self) -> str:
        return self.task

    @property
    def reference(self) -> str:
        """The real observation of the current turn."""
        return self.response[-1]

    @property
    def instruction(self) -> str:
        return self.system_str.split(TASK_MARKER, 1)[1] if TASK_MARKER in self.system_str else ""

    def to_example(self) -> WorldModelExample:
        """The world-model example of the current turn, with every earlier turn as history."""
        return WorldModelExample(
            id=self.id,
            domain=self.task,
            system=self.system_str,
            history=list(zip(self.prompt[:-1], self.response[:-1])),
            action=self.current_prompt,
            observation=self.response[-1],
        )

    @classmethod
    def from_episode(cls, domain: str, episode_id: str, system: str, actions: Sequence[str],
                     observations: Sequence[str], turn: int) -> BenchRecord:
        """The record of turn `turn` of an episode (its id is `<episode_id>:<turn>`)."""
        return cls(task=domain, id=f"{episode_id}:{turn:03d}", prompt=list(actions[: turn + 1]),
                   response=list(observations[: turn + 1]), current_prompt=actions[turn], system_str=system,
                   turn_idx=turn, total_turns=len(actions))


def bench_files(path: Path) -> list[Path]:
    """The `<domain>_test.jsonl` files of a directory (or the one file given)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise BenchFormatError(f"{path}: no such file or directory (expected AgentWorldBench `<domain>{FILE_SUFFIX}` files)")
    files = sorted(path.glob(f"*{FILE_SUFFIX}"))
    if not files:
        raise BenchFormatError(f"{path}: no `<domain>{FILE_SUFFIX}` files in this directory")
    return files


def read_bench_file(path: Path) -> list[BenchRecord]:
    records = []
    with Path(path).open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                records.append(BenchRecord.model_validate(json.loads(line)))
            except json.JSONDecodeError as err:
                raise BenchFormatError(f"{path}:{line_no}: not valid JSON ({err.msg})") from None
            except ValidationError as err:
                item = err.errors()[0]
                field = ".".join(str(p) for p in item["loc"]) or "(record)"
                raise BenchFormatError(f"{path}:{line_no}: field {field}: {item['msg']}") from None
    return records


def read_bench(path: Path) -> list[BenchRecord]:
    """Every record of a directory in the AgentWorldBench layout, file by file; ids must be unique."""
    records: list[BenchRecord] = []
    seen: dict[str, Path] = {}
    for file in bench_files(path):
        for record in read_bench_file(file):
            if record.id in seen:
                raise BenchFormatError(f"{file}: id {record.id!r} also in {seen[record.id]}; ids must be unique")
            seen[record.id] = file
            records.append(record)
    return records


def write_bench(records: Iterable[BenchRecord], out_dir: Path) -> dict[str, int]:
    """Write `<domain>_test.jsonl` files; returns records per domain."""
    by_domain: dict[str, list[BenchRecord]] = {}
    for record in records:
        by_domain.setdefault(record.task, []).append(record)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for domain, rows in by_domain.items():
        with (out_dir / f"{domain}{FILE_SUFFIX}").open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row.model_dump(mode="json"), ensure_ascii=False) + "\n")
    return {domain: len(rows) for domain, rows in by_domain.items()}


def final_records(records: Iterable[BenchRecord], min_turns: int = 2) -> list[BenchRecord]:
    """The last record of each episode: it holds the episode's every action and observation."""
    return [r for r in records if r.turn_idx == r.total_turns - 1 and len(r.prompt) >= min_turns]
