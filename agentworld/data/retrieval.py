"""Retrieval memory: real training transitions shown to the world model next to each action.

A small model that must recall every observation from its weights mostly forgets; one that
sees the most similar real transitions can copy and edit them. This is retrieval-augmented
simulation: DreamGym retrieves top-k past transitions per step, StableToolBench answers from
a cache of real responses before a model, R-WoM grounds rollouts in retrieved text.

The memory holds the training split only (`from_examples` takes the training examples; the
build stage never hands it a held-out one). A training example never retrieves from its own
episode, so the model learns to use neighbours as it will at inference, not to echo itself.
The memory is saved next to the model (`MEMORY_FILE` in the checkpoint directory and the
registry version's run), so every backend that loads the model shows it the same memory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from agentworld.data.prompts import WorldModelExample

MEMORY_FILE = "retrieval_memory.jsonl"
#: Where a training stage's MLflow run keeps the memory of the version it registers.
MEMORY_ARTIFACT = "memory"
MEMORY_HEADER = "Similar real transition:"


@dataclass(frozen=True)
class MemoryEntry:
    """One real training transition: its episode, the turn before it, the action, the answer."""

    domain: str
    episode: str
    action: str
    observation: str
    previous_action: str = ""
    previous_observation: str = ""


def episode_of(example_id: str) -> str:
    """The episode of a transition id `<episode>:<turn>`."""
    return example_id.rsplit(":", 1)[0]


def query_text(action: str, previous: tuple[str, str] | None) -> str:
    """What lookups compare: the action (weighted twice) and the turn before it."""
    before = f"{previous[0]} {previous[1]}" if previous else ""
    return f"{action} {action} {before}"


#: Added to the TF-IDF cosine (at most 1) of a transition whose action is the query's action
#: to the letter, so those rank first, ordered by how alike the turn before them is. Without
#: it a long previous observation outweighs the action: `echo $HOME` retrieved
#: `echo "$DB_PASSWORD" > token.txt` ahead of a real `echo $HOME`.
SAME_ACTION_BONUS = 1.0
SAME_ACTION_NOTE = " (same action)"


class RetrievalMemory:
    """Per-domain TF-IDF index over training transitions; `k` neighbours per lookup."""

    def __init__(self, entries: Sequence[MemoryEntry], k: int = 1, max_chars: int = 400) -> None:
        if k < 1:
            raise ValueError("retrieval memory needs k >= 1 (build.retrieval_k)")
        self.entries, self.k, self.max_chars = list(entries), k, max_chars
        self._index: dict[str, tuple[TfidfVectorizer, object, list[int]]] = {}
        for domain in sorted({e.domain for e in self.entries}):
            rows = [i for i, e in enumerate(self.entries) if e.domain == domain]
            vectorizer = TfidfVectorizer(token_pattern=r"[^\s]+", sublinear_tf=True, lowercase=False)
            texts = [query_text(self.entries[i].action, (self.entries[i].previous_action,
                                                         self.entries[i].previous_observation)) for i in rows]
            self._index[domain] = (vectorizer, vectorizer.fit_transform(texts), rows)
        self._episodes = np.array([e.episode for e in self.entries])
        self._actions = np.array([e.action for e in self.entries], dtype=object)

    @classmethod
    def from_examples(cls, train: Sequence[WorldModelExample], k: int = 1, max_chars: int = 400) -> RetrievalMemory:
        """The memory of a training split (never pass held-out examples here)."""
        entries = [MemoryEntry(domain=e.domain, episode=episode_of(e.id), action=e.action, observation=e.observation,
                               previous_action=e.history[-1][0] if e.history else "",
                               previous_observation=e.history[-1][1] if e.history else "")
                   for e in train]
        return cls(entries, k, max_chars)

    @property
    def episodes(self) -> set[str]:
        return set(self._episodes.tolist())

    def lookup(self, domain: str, action: str, previous: tuple[str, str] | None,
               exclude_episode: str | None = None) -> list[MemoryEntry]:
        """The `k` most similar transitions of `domain` (none from `exclude_episode`): the same
        action first, then TF-IDF similarity of action and previous turn; fewer when nothing
        shares a token with the query."""
        if domain not in self._index:
            return []
        vectorizer, matrix, rows = self._index[domain]
        scores = (vectorizer.transform([query_text(action, previous)]) @ matrix.T).toarray()[0]
        scores += SAME_ACTION_BONUS * (self._actions[rows] == action)
        if exclude_episode is not None:
            scores[self._episodes[rows] == exclude_episode] = -1.0
        best = np.argsort(-scores, kind="stable")[: self.k]
        return [self.entries[rows[i]] for i in best if scores[i] > 0]

    def render(self, entries: Sequence[MemoryEntry], action: str | None = None) -> str:
        """The memory block a user turn carries after its action; a transition of the same
        action says so in its header, a cue a small model cannot easily compute itself."""
        return "\n".join(f"{MEMORY_HEADER}{SAME_ACTION_NOTE if e.action == action else ''}\n>>> {e.action}\n"
                         f"{e.observation[: self.max_chars]}" for e in entries)

    def annotate(self, example: WorldModelExample, exclude_episode: str | None = None) -> WorldModelExample:
        """The example with a memory block after its current action, looked up from the action
        and the turn before it, and the retrieved observations in full (what copy ops copy).

        Earlier turns show no memory: their real observations are already in the history, and
        the context window is better spent on more of it."""
        previous = example.history[-1] if example.history else None
        found = self.lookup(example.domain, example.action, previous, exclude_episode)
        return replace(example, memory=[self.render(found, example.action)], retrieved=[e.observation for e in found])

    def save(self, directory: str | Path) -> Path:
        return self.save_or_none(self, directory, self.max_chars)

    @staticmethod
    def save_or_none(memory: RetrievalMemory | None, directory: str | Path, max_chars: int) -> Path:
        """Write the memory file; with no memory, a file that says so (k 0), so the file is
        always there for pipelines that track it."""
        path = Path(directory) / MEMORY_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            out.write(json.dumps({"k": memory.k if memory else 0, "max_chars": max_chars}) + "\n")
            for e in memory.entries if memory else ():
                out.write(json.dumps(e.__dict__) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> RetrievalMemory | None:
        """The memory saved with a model, or None for a model trained without one."""
        path = Path(directory) / MEMORY_FILE
        if not path.exists():
            return None
        lines = path.read_text().splitlines()
        try:
            header = json.loads(lines[0])
            entries = [MemoryEntry(**json.loads(line)) for line in lines[1:] if line.strip()]
        except (json.JSONDecodeError, TypeError, IndexError) as err:
            raise ValueError(f"{path}: not a retrieval memory file ({err})") from err
        if not int(header["k"]):
            return None
        return cls(entries, int(header["k"]), int(header["max_chars"]))
