"""JSONL storage for transitions and other record files."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentworld.data.schema import Transition


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any] | Any]) -> int:
    """Write records atomically (temp file + rename) so a killed stage never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            if hasattr(record, "model_dump"):
                record = record.model_dump(mode="json")
            fh.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Read a trusted JSONL file (one written by a stage after validation)."""
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def read_transitions(path: str | Path) -> list[Transition]:
    return [Transition.model_validate(rec) for rec in read_jsonl(path)]


def claim_directory(directory: Path, fingerprint: dict[str, Any], *, discard: bool = False) -> bool:
    """Keep an interrupted run's files in `directory` only if they were made with the same
    `fingerprint` (whatever decides their content: data, model, settings), so the run resumes;
    otherwise, or with `discard`, start the directory afresh. Stamps it either way
    (`fingerprint.json`) and returns whether the old files were kept. Collection shards,
    training checkpoints and evaluation predictions all resume this way."""
    stamp = directory / "fingerprint.json"
    text = json.dumps(fingerprint, sort_keys=True, default=str)
    kept = directory.exists() and not discard and stamp.exists() and stamp.read_text() == text
    if directory.exists() and not kept:
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stamp.write_text(text)
    return kept
