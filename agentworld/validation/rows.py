"""Step 1 of validation: turn a trajectory JSONL file into typed rows, line by line, as bytes.

Reading bytes (not text) means one line with invalid UTF-8 costs that line only, never the
file. Every line that cannot become a `Transition` is rejected with a `Problem` that names
the file, the 1-based line number and the field; nothing is dropped silently (blank lines
carry no data and are only counted).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentworld.data.schema import REQUIRED_FIELDS, Transition

#: Field name used when a problem concerns the whole line (encoding, JSON syntax, shape).
LINE = "<line>"
#: Integer fields must fit the 64-bit storage that pandas and Parquet use downstream.
INT64_FIELDS = ("turn", "seed")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FIELD_ORDER = {name: i for i, name in enumerate((*REQUIRED_FIELDS, "info"))}
_TRAJECTORY_ID_RE = re.compile(r'"trajectory_id"\s*:\s*("(?:[^"\\]|\\.)*")')


class EmptyInputError(ValueError):
    """The input file holds no rows at all (it is empty or only blank lines)."""


@dataclass(frozen=True)
class Problem:
    """One failed check on one line: which check, which field, and what was wrong."""

    check: str
    field: str
    detail: str


@dataclass(frozen=True)
class Rejection:
    """A rejected line, with everything needed to find, understand and recover it."""

    file: str
    line: int
    raw: bytes
    problems: tuple[Problem, ...]
    trajectory_id: str | None = None

    @property
    def fields(self) -> list[str]:
        return _unique(p.field for p in self.problems)

    @property
    def reason(self) -> str:
        """Self-contained message: file, line, field and what failed."""
        return "; ".join(f"{self.file}:{self.line}: field '{p.field}': {p.detail} [{p.check}]"
                         for p in self.problems)

    def to_record(self) -> dict[str, Any]:
        """The quarantine JSON record; `raw` is the original text, or base64 when not UTF-8."""
        try:
            raw, encoding = self.raw.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            raw, encoding = base64.b64encode(self.raw).decode("ascii"), "base64"
        return {
            "file": utf8_safe(self.file),
            "line": self.line,
            "field": utf8_safe(",".join(self.fields)),
            "check": ",".join(_unique(p.check for p in self.problems)),
            "reason": utf8_safe(self.reason),
            "raw": raw,
            "raw_encoding": encoding,
        }


@dataclass(frozen=True)
class ParsedRow:
    """A line that became a valid `Transition` (the suite may still reject it)."""

    file: str
    line: int
    raw: bytes
    transition: Transition


@dataclass
class ParseResult:
    """Rows and rejections of one or more files, plus what the turn-order check needs."""

    rows: list[ParsedRow] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    total_lines: int = 0
    blank_lines: int = 0

    def rejected_per_trajectory(self) -> tuple[Counter[str], int]:
        """Rejected lines attributed to a trajectory id, and the count that can't be attributed."""
        known: Counter[str] = Counter()
        unknown = 0
        for rej in self.rejections:
            if rej.trajectory_id is None:
                unknown += 1
            else:
                known[rej.trajectory_id] += 1
        return known, unknown

    def extend(self, other: ParseResult) -> None:
        self.rows += other.rows
        self.rejections += other.rejections
        self.total_lines += other.total_lines
        self.blank_lines += other.blank_lines


def parse_file(path: str | Path) -> ParseResult:
    """Parse every line of `path`; raise FileNotFoundError / EmptyInputError for unusable input."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: input file not found")
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file")
    name = str(path)
    result = ParseResult()
    for lineno, raw in _lines(path):
        if not raw.strip():
            result.blank_lines += 1
            continue
        result.total_lines += 1
        outcome = parse_line(name, lineno, raw)
        if isinstance(outcome, Rejection):
            result.rejections.append(outcome)
        else:
            result.rows.append(outcome)
    if result.total_lines == 0:
        raise EmptyInputError(f"{path}: no rows (the file is empty or holds only blank lines)")
    return result


def parse_line(file: str, lineno: int, raw: bytes) -> ParsedRow | Rejection:
    """Bytes of one line -> a valid row, or a rejection naming the field that failed."""

    def reject(*problems: Problem, trajectory_id: str | None = None) -> Rejection:
        return Rejection(file, lineno, raw, problems, trajectory_id)

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        detail = f"invalid UTF-8 byte(s) {raw[err.start:err.end]!r} at byte offset {err.start}"
        return reject(Problem("utf8", LINE, detail), trajectory_id=_salvage_trajectory_id(raw))
    try:
        obj = json.loads(text, parse_constant=float, object_pairs_hook=_reject_duplicate_keys)
    except _DuplicateKey as dup:
        return reject(Problem("json", dup.key, "key appears more than once in the object"),
                      trajectory_id=_salvage_trajectory_id(raw))
    except json.JSONDecodeError as err:
        detail = f"broken JSON: {err.msg} at column {err.colno}"
        return reject(Problem("json", LINE, detail), trajectory_id=_salvage_trajectory_id(raw))
    except RecursionError:
        return reject(Problem("json", LINE, "JSON nested too deeply"))
    if not isinstance(obj, dict):
        return reject(Problem("json", LINE, f"expected a JSON object, got {_json_type(obj)}"))

    traj = obj.get("trajectory_id")
    traj = traj if isinstance(traj, str) else None
    problems = [Problem("finite", path, f"value {value!r} is not a finite number")
                for path, value in _non_finite(obj)]
    transition, schema_problems = _validate_schema(obj)
    problems += schema_problems
    problems += [Problem("int64", name, f"{obj[name]} is outside the 64-bit integer range")
                 for name in INT64_FIELDS
                 if isinstance(obj.get(name), int) and not _INT64_MIN <= obj[name] <= _INT64_MAX]
    if problems:
        return reject(*_dedupe(sort_problems(problems)), trajectory_id=traj)
    assert transition is not None  # no problems means pydantic accepted the row
    return ParsedRow(file, lineno, raw, transition)


def sort_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Schema field order, so a line's `field` reads the same whatever found the problems."""
    return sorted(problems, key=lambda p: _FIELD_ORDER.get(p.field.split(".")[0].split(",")[0],
                                                           len(_FIELD_ORDER)))


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based number, bytes without the line ending); a UTF-8 BOM on line 1 is dropped."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            yield lineno, raw.rstrip(b"\r\n")


def _validate_schema(obj: dict[str, Any]) -> tuple[Transition | None, list[Problem]]:
    """Pydantic's strict `Transition` checks, reworded per field (missing, unknown, type, empty)."""
    try:
        return Transition.model_validate(obj), []
    except ValidationError as err:
        return None, [_problem_from_error(item) for item in err.errors()]


def _problem_from_error(item: Any) -> Problem:
    loc = item["loc"]
    name = str(loc[0]) if loc else LINE
    kind = item["type"]
    if kind == "missing":
        return Problem("required", name, "required field is missing")
    if kind == "extra_forbidden":
        return Problem("unknown_field", name, "unknown field (not in the Transition schema)")
    if kind == "string_too_short":
        return Problem("non_empty", name, "must not be empty")
    if kind == "string_unicode":
        return Problem("utf8", name, "lone surrogate: the string is not valid UTF-8")
    got = item.get("input")
    shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
    return Problem("type", name, f"{item['msg']} (got {_json_type(got)} {shown})")


def _non_finite(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """NaN/Infinity anywhere in the row (json accepts them, and 1e999 overflows to inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path or LINE, value
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from _non_finite(sub, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _non_finite(sub, f"{path}[{i}]")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json silently keeps the last of two equal keys; a row like that is ambiguous."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _salvage_trajectory_id(raw: bytes) -> str | None:
    """Best effort: which trajectory a line that did not parse belonged to (for turn order)."""
    match = _TRAJECTORY_ID_RE.search(raw.decode("utf-8", errors="replace"))
    if not match:
        return None
    try:
        value = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
             float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    """One problem per (check, field): pydantic reports each branch of a union separately."""
    seen: set[tuple[str, str]] = set()
    out = []
    for p in problems:
        if (p.check, p.field) not in seen:
            seen.add((p.check, p.field))
            out.append(p)
    return out


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def utf8_safe(text: str) -> str:
    """`text` itself when it encodes as UTF-8, else a copy with lone surrogates -> U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text
