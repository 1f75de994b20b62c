"""The public AgentWorldBench layout, read and written exactly as the official benchmark does.

One `<domain>_test.jsonl` per domain, one record per evaluated turn. A record carries the whole
trajectory: `prompt` holds every turn's action prompt and `response` every real observation
(each starting with `**Environment Observation:**`); `turn_idx` is the 1-indexed turn being
evaluated, so the current action is `prompt[turn_idx - 1]` and the ground truth is
`response[turn_idx - 1]` with the marker cleaned off. `id` is an integer in the official files.
The model sees what the official inference sends: `system_str`, then user/assistant pairs of
the earlier turns, then the current prompt.

Our build stage exports the held-out split in this layout; the fields it adds (`episode_id`,
`transition_id`) are ignored by official readers, and files without them read just as well.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentworld.data.prompts import OBSERVATION_MARKER, WorldModelExample, task_of

FILE_SUFFIX = "_test.jsonl"


class BenchFormatError(ValueError):
    """A file that is not in the AgentWorldBench layout; the message names file, line and field."""


def clean_response_marker(text: str) -> str:
    """The ground truth as the official scorer reads it: marker removed, surrounding whitespace stripped."""
    if text.startswith(OBSERVATION_MARKER):
        return text[len(OBSERVATION_MARKER):].strip()
    return text.replace(OBSERVATION_MARKER, "").strip()


def observation_text(response: str) -> str:
    """An earlier turn's observation for the model's history: the marker and its line break
    removed, the rest kept byte for byte (the model re-adds the marker when it sees it)."""
    if response.startswith(OBSERVATION_MARKER):
        rest = response[len(OBSERVATION_MARKER):]
        return rest[1:] if rest.startswith("\n") else rest.lstrip(" ")
    return response


def response_text(observation: str) -> str:
    """An observation as the official files hold it."""
    return f"{OBSERVATION_MARKER}\n{observation}"


def numeric_id(name: str) -> int:
    """A stable 15-digit integer id for one of our string ids (the official files use integers)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:6], "big") % 10**15


class BenchRecord(BaseModel):
    """One evaluated turn of a trajectory, in the public field names (extra fields are kept)."""

    model_config = ConfigDict(extra="allow")

    task: str = Field(min_length=1)
    id: int | str
    prompt: list[str] = Field(min_length=1)
    response: list[str] = Field(min_length=1)
    current_prompt: str = ""
    system_str: str = ""
    turn_idx: int = Field(ge=1)
    total_turns: int = Field(ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> BenchRecord:
        if self.turn_idx > len(self.prompt):
            raise ValueError(f"turn_idx {self.turn_idx} (1-indexed) is past the {len(self.prompt)} entries of prompt")
        if self.turn_idx > len(self.response):
            raise ValueError(f"turn_idx {self.turn_idx} (1-indexed) is past the {len(self.response)} entries of "
                             "response; each action needs its observation")
        if self.turn_idx > self.total_turns:
            raise ValueError(f"turn_idx {self.turn_idx} is above total_turns {self.total_turns}")
        if not self.current_prompt:
            self.current_prompt = self.prompt[self.turn_idx - 1]
        return self

    @property
    def domain(self) -> str:
        """The domain name (`task` may be a path such as `agentworld/mcp`, as the official scorer allows)."""
        return self.task.rsplit("/", 1)[-1]

    @property
    def turn(self) -> int:
        """0-based index of the current turn in `prompt` and `response`."""
        return self.turn_idx - 1

    @property
    def key(self) -> str:
        """Unique over a benchmark directory: prediction and judged files are keyed by it."""
        return f"{self.domain}:{self.id}:{self.turn_idx}"

    @property
    def episode(self) -> str:
        """What the records of one trajectory share: our `episode_id`, else the trajectory's start."""
        extra = self.model_extra or {}
        if extra.get("episode_id"):
            return f"{self.domain}:{extra['episode_id']}"
        start = json.dumps([self.domain, self.system_str, self.prompt[0], self.response[0]])
        return hashlib.sha256(start.encode()).hexdigest()[:16]

    @property
    def observations(self) -> list[str]:
        """Every turn's observation without the marker."""
        return [observation_text(r) for r in self.response]

    @property
    def history(self) -> list[tuple[str, str]]:
        """(action prompt, observation) of every turn before the current one."""
        return list(zip(self.prompt[: self.turn], self.observations[: self.turn]))

    @property
    def reference(self) -> str:
        """The real observation of the current turn, cleaned as the official scorer cleans it."""
        return clean_response_marker(self.response[self.turn])

    @property
    def instruction(self) -> str:
        return task_of(self.system_str)

    def to_example(self) -> WorldModelExample:
        """The world-model example of the current turn: the official inference's messages."""
        return WorldModelExample(id=self.key, domain=self.domain, system=self.system_str, history=self.history,
                                 action=self.prompt[self.turn], observation=self.observations[self.turn])

    @classmethod
    def from_episode(cls, domain: str, episode_id: str, system: str, actions: Sequence[str],
                     observations: Sequence[str], turn_idx: int, transition_id: str | None = None) -> BenchRecord:
        """The record of turn `turn_idx` (1-indexed) of an episode, with the whole episode in its lists."""
        transition_id = transition_id or f"{episode_id}:{turn_idx - 1:03d}"
        return cls(task=domain, id=numeric_id(transition_id), prompt=list(actions),
                   response=[response_text(o) for o in observations], current_prompt=actions[turn_idx - 1],
                   system_str=system, turn_idx=turn_idx, total_turns=len(actions),
                   episode_id=episode_id, transition_id=transition_id)


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
    """Every record of a directory in the AgentWorldBench layout, file by file; (task, id, turn_idx)
    must be unique, since predictions are keyed by it."""
    records: list[BenchRecord] = []
    seen: dict[str, Path] = {}
    for file in bench_files(path):
        for record in read_bench_file(file):
            if record.key in seen:
                raise BenchFormatError(f"{file}: id {record.id!r} at turn_idx {record.turn_idx} also in "
                                       f"{seen[record.key]}; each (task, id, turn_idx) must be unique")
            seen[record.key] = file
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
    """One record per episode, the one whose lists hold the most turns (in the official layout
    every record holds the whole trajectory), for episodes of at least `min_turns` turns."""
    best: dict[str, BenchRecord] = {}
    for record in records:
        held = best.get(record.episode)
        if held is None or (len(record.prompt), record.turn_idx) > (len(held.prompt), held.turn_idx):
            best[record.episode] = record
    return [r for r in best.values() if min(len(r.prompt), len(r.response)) >= min_turns]
