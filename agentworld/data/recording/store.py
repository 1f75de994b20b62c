"""A recording of a user's system on disk: `data/recordings/<name>/`.

- `description.json`: what the system offers (an MCP server's `tools/list`, with the server's
  name and version), written once per recording; its hash is every row's `env_version`, so rows
  recorded against a changed tool list are told apart;
- `trajectories.jsonl`: one Transition row per recorded call, grouped into trajectories by client
  session (MCP) or conversation (imported logs), `source: real`, provenance in `info`
  (`recorder`, the server command or upstream, `description_sha256`). Rows are appended and
  flushed as each call completes, so a killed recorder loses at most the call in flight.

Everything passes the recording's Redactor before it is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentworld.data.recording.redact import Redactor
from agentworld.data.schema import Transition, transition_id, utc_now

RECORDINGS_DIR = Path("data/recordings")
DESCRIPTION_FILE = "description.json"
TRAJECTORIES_FILE = "trajectories.jsonl"


def canonical_json(value: Any) -> str:
    """The one JSON form of actions and observations: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def recording_dir(name: str, root: Path | None = None) -> Path:
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"recording name {name!r}: use letters, digits, - and _ only")
    return (root or RECORDINGS_DIR) / name


class RecordingWriter:
    """Appends redacted Transition rows of one recording; safe to call from several tasks."""

    def __init__(self, directory: Path, name: str, *, recorder: str, provenance: dict[str, Any],
                 redactor: Redactor | None = None) -> None:
        self.directory, self.name, self.recorder = Path(directory), name, recorder
        self.redactor = redactor or Redactor()
        self.provenance = self.redactor.value(provenance)
        self.description_sha256 = "none"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / TRAJECTORIES_FILE
        self._lock = threading.Lock()
        self._turns: dict[str, int] = {}
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        self._prefix = f"{name}-{stamp}-{os.getpid()}"

    def describe(self, description: dict[str, Any]) -> str:
        """Write what the system offers (redacted) and return its hash."""
        # The user's own redaction patterns are kept, so the simulator redacts incoming calls alike.
        description = {**self.redactor.value(description), "redaction": dict(self.redactor.extra)}
        text = json.dumps(description, indent=2, sort_keys=True, ensure_ascii=False)
        (self.directory / DESCRIPTION_FILE).write_text(text + "\n", encoding="utf-8")
        self.description_sha256 = hashlib.sha256(text.encode()).hexdigest()
        return self.description_sha256

    def trajectory_id(self, session: int) -> str:
        return f"{self._prefix}-{session:04d}"

    def record(self, trajectory_id: str, *, action: Any, observation: Any, instruction: str = "",
               info: dict[str, Any] | None = None, done: bool = False) -> Transition:
        """Append one call: `action` and `observation` are JSON values or text (redacted here).
        `done` where the recorder knows the episode ended with it (an imported conversation's last
        call); a live proxy cannot know which call of a session is the last."""
        with self._lock:
            turn = self._turns.get(trajectory_id, 0)
            self._turns[trajectory_id] = turn + 1
            row = Transition(
                id=transition_id(trajectory_id, turn), trajectory_id=trajectory_id, turn=turn, domain=self.name,
                env_id=self.name, task_id=trajectory_id, instruction=self.redactor.text(instruction),
                action=self._text(action), observation=self._text(observation), reward=0.0, done=done,
                source="real", policy="recorded", env_version=self.description_sha256[:12], seed=0,
                timestamp=utc_now(),
                info={"recorder": self.recorder, **self.provenance, "description_sha256": self.description_sha256,
                      **self.redactor.value(info or {})})
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row.model_dump(mode="json"), ensure_ascii=False) + "\n")
                fh.flush()
            return row

    def _text(self, value: Any) -> str:
        return self.redactor.text(value) if isinstance(value, str) else canonical_json(self.redactor.value(value))
