"""What the simulated recorded systems (`serve mcp`, `serve http`) share: the exact-match cache of
StableToolBench (a session whose calls so far replay a recorded session, call for call from the
start, gets the recorded answer), the world model asked with the recording's own prompt and the
run's controls, and counts of which path answered."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentworld.data.prompts import WorldModelExample, parse_observation, system_prompt
from agentworld.data.recording.recording import Recording
from agentworld.data.schema import Transition, group_trajectories
from agentworld.models.backends import Backend
from agentworld.simulation.env import Control

Answer = TypeVar("Answer")


class RecordedCache:
    """Exact-match answers of a recording: (the session's earlier calls, this call) -> the row."""

    def __init__(self, rows: Sequence[Transition]) -> None:
        self.answers: dict[tuple[tuple[str, ...], str], Transition] = {}
        for turns in group_trajectories(list(rows)).values():
            earlier: list[str] = []
            for row in turns:
                self.answers.setdefault((tuple(earlier), row.action), row)
                earlier.append(row.action)

    def lookup(self, earlier: Sequence[str], action: str) -> Transition | None:
        return self.answers.get((tuple(earlier), action))


class RecordedSystem:
    """A recording served: the cache (off when a control steers the simulation, since replayed
    reality would ignore it), the world model, per-session histories and per-path counts."""

    #: The paths that can answer a call, in report order.
    PATHS: tuple[str, ...] = ("cache", "model", "malformed", "unanswered")

    def __init__(self, recording: Recording, backend: Backend | None, *, control: Control | None = None,
                 cache: bool = True, retries: int = 2, retry_temperature: float = 0.7) -> None:
        self.recording, self.backend, self.control = recording, backend, control or Control()
        self.domain = recording.domain().name
        self.redactor = recording.redactor()
        self.cache = RecordedCache(recording.rows()) if cache and not self.control.system_suffix() else None
        self.retries, self.retry_temperature = retries, retry_temperature
        self.sessions: dict[str, list[tuple[str, str]]] = {}
        self.counts: Counter[str] = Counter()
        self._generate_lock = threading.Lock()  # one generation at a time on the shared model

    def cached(self, history: Sequence[tuple[str, str]], action: str) -> Transition | None:
        return self.cache.lookup([a for a, _ in history], action) if self.cache is not None else None

    def generate(self, history: list[tuple[str, str]], action: str,
                 parse: Callable[[str], Answer | None]) -> tuple[str, Answer | None]:
        """The world model's observation for `action` after `history` and what `parse` makes of it;
        greedy first, then `retries` samples at `retry_temperature`; None when none parses."""
        assert self.backend is not None
        example = WorldModelExample(id=f"{self.domain}:serve", domain=self.domain,
                                    system=system_prompt(self.domain, "") + self.control.system_suffix(),
                                    history=history, action=action)
        observation = ""
        with self._generate_lock:
            for attempt in range(self.retries + 1):
                temperature = 0.0 if attempt == 0 else self.retry_temperature
                observation, well_formed = parse_observation(self.backend.generate([example], temperature)[0])
                answer = parse(observation) if well_formed else None
                if answer is not None:
                    return observation, answer
        return observation, None

    def report(self) -> dict[str, Any]:
        total = sum(self.counts.values())
        return {"calls": total, **{k: self.counts.get(k, 0) for k in self.PATHS},
                "cache_share": round(self.counts.get("cache", 0) / total, 4) if total else None,
                "model_share": round(self.counts.get("model", 0) / total, 4) if total else None}
