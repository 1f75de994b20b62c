"""Step 1 of evaluation, infer: each system's prediction for each record, appended batch by batch.

Predictions go to one JSONL file per system, flushed and fsynced after every batch. A rerun
reads what is there and generates only the missing ids, so a crash mid-file redoes at most one
batch; a line cut off by the crash is dropped and regenerated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agentworld.data.awbench import BenchRecord
from agentworld.data.prompts import WorldModelExample, parse_observation

#: Raw assistant turns (think block, marker, observation) for a batch of examples.
Generate = Callable[[Sequence[WorldModelExample]], list[str]]


def read_done(path: Path) -> dict[str, dict[str, Any]]:
    """Rows already written, by id; a truncated or garbled line (the crash point) is ignored."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and "id" in row:
                done[row["id"]] = row
    return done


def rewrite_clean(path: Path, rows: dict[str, dict[str, Any]]) -> None:
    """Drop a cut-off last line before appending, so the file stays valid JSONL."""
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows.values()), encoding="utf-8")


def append_durably(fh: Any, rows: list[dict[str, Any]], done: dict[str, dict[str, Any]]) -> None:
    """Append a finished batch and force it to disk: a crash later loses nothing of it."""
    for row in rows:
        done[row["id"]] = row
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def prediction_row(record: BenchRecord, generation: str) -> dict[str, Any]:
    prediction, well_formed = parse_observation(generation)
    return {"id": record.key, "task": record.domain, "turn_idx": record.turn_idx, "generation": generation,
            "prediction": prediction, "well_formed": well_formed}


def infer(system: str, generate: Generate, records: Sequence[BenchRecord], out_file: Path,
          batch_size: int, progress: bool = True) -> list[dict[str, Any]]:
    """Predictions of `system` for every record, in record order, resuming from `out_file`."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    done = read_done(out_file)
    rewrite_clean(out_file, done)
    todo = [r for r in records if r.key not in done]
    with out_file.open("a", encoding="utf-8") as fh, tqdm(
        total=len(records), initial=len(records) - len(todo), desc=f"infer {system}", unit="rec", disable=not progress
    ) as bar:
        for start in range(0, len(todo), batch_size):
            batch = todo[start: start + batch_size]
            generations = generate([r.to_example() for r in batch])
            if len(generations) != len(batch):
                raise RuntimeError(f"{system}: backend returned {len(generations)} generations for {len(batch)} prompts")
            append_durably(fh, [prediction_row(r, g) for r, g in zip(batch, generations)], done)
            bar.update(len(batch))
    return [done[r.key] for r in records]
