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

With a candidate scorer (agentworld/data/reranker.py, fitted on the training split by the
build stage and saved in the memory file's header), the block shows the scorer's best
`k` of a wider pool: the `pool` best TF-IDF neighbours, the episode's own earlier answer to
the same action and previous observation, and those edited to the current action's arguments
(agentworld/data/adapting.py). `lookup`, what the retrieval baseline uses, stays the
plain TF-IDF nearest neighbour.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from agentworld.data.adapting import adapt
from agentworld.data.prompts import WorldModelExample
from agentworld.data.reranker import Candidate, CandidateScorer, Turn

MEMORY_FILE = "retrieval_memory.jsonl"
#: Where a training stage's MLflow run keeps the memory of the version it registers.
MEMORY_ARTIFACT = "memory"
MEMORY_HEADER = "Similar real transition:"
#: The header of a candidate from the episode being predicted (its earlier or previous turn).
OWN_HEADER = "Earlier in this episode:"
#: The header of a candidate edited to the current action's arguments (agentworld/data/adapting.py).
ADAPTED_HEADER = "Similar real transition, adapted to this action:"
HEADERS = {"retrieved": MEMORY_HEADER, "earlier": OWN_HEADER, "previous": OWN_HEADER, "adapted": ADAPTED_HEADER}


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
    """Per-domain TF-IDF index over training transitions; `k` neighbours per lookup, or the
    scorer's best `k` of `pool` neighbours and the episode's own turns."""

    def __init__(self, entries: Sequence[MemoryEntry], k: int = 1, max_chars: int = 400, pool: int = 8,
                 scorer: CandidateScorer | None = None) -> None:
        if k < 1:
            raise ValueError("retrieval memory needs k >= 1 (build.retrieval_k)")
        self.entries, self.k, self.max_chars = list(entries), k, max_chars
        self.pool, self.scorer = max(pool, k), scorer
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
    def from_examples(cls, train: Sequence[WorldModelExample], k: int = 1, max_chars: int = 400,
                      pool: int = 8) -> RetrievalMemory:
        """The memory of a training split (never pass held-out examples here)."""
        entries = [MemoryEntry(domain=e.domain, episode=episode_of(e.id), action=e.action, observation=e.observation,
                               previous_action=(e.previous() or ("", ""))[0],
                               previous_observation=(e.previous() or ("", ""))[1])
                   for e in train]
        return cls(entries, k, max_chars, pool)

    @property
    def episodes(self) -> set[str]:
        return set(self._episodes.tolist())

    def _nearest(self, domain: str, action: str, previous: tuple[str, str] | None,
                 exclude_episode: str | None, n: int) -> list[tuple[MemoryEntry, float]]:
        """The `n` most similar transitions of `domain` with their scores (none from
        `exclude_episode`): the same action first, then TF-IDF similarity of action and
        previous turn; fewer when nothing shares a token with the query."""
        if domain not in self._index:
            return []
        vectorizer, matrix, rows = self._index[domain]
        scores = (vectorizer.transform([query_text(action, previous)]) @ matrix.T).toarray()[0]
        scores += SAME_ACTION_BONUS * (self._actions[rows] == action)
        if exclude_episode is not None:
            scores[self._episodes[rows] == exclude_episode] = -1.0
        best = np.argsort(-scores, kind="stable")[:n]
        return [(self.entries[rows[i]], float(scores[i])) for i in best if scores[i] > 0]

    def lookup(self, domain: str, action: str, previous: tuple[str, str] | None,
               exclude_episode: str | None = None) -> list[MemoryEntry]:
        """The `k` TF-IDF nearest transitions of `domain` (see `_nearest`); no scorer."""
        return [entry for entry, _ in self._nearest(domain, action, previous, exclude_episode, self.k)]

    def candidates(self, example: WorldModelExample, exclude_episode: str | None = None) -> list[Candidate]:
        """What the scorer ranks for `example`: the episode's own answer to the same action
        earlier and its previous observation, then the `pool` nearest training transitions,
        then those of them answering another action edited to this action's arguments."""
        previous = example.previous()
        own = []
        if (earlier := example.earlier()) is not None:
            own.append(Candidate("earlier", example.action, earlier[1], turns_ago=earlier[0]))
        if previous is not None:
            own.append(Candidate("previous", previous[0], previous[1], turns_ago=1))
        found = self._nearest(example.domain, example.action, previous, exclude_episode, self.pool)
        unedited = own + [Candidate("retrieved", e.action, e.observation, rank=rank, similarity=score,
                                    previous_action=e.previous_action, previous_observation=e.previous_observation)
                          for rank, (e, score) in enumerate(found, start=1)]
        adapted = [replace(c, kind="adapted", action=example.action, observation=edit[0], substitutions=edit[1])
                   for c in unedited if c.kind != "earlier" and c.action != example.action
                   and (edit := adapt(c.observation, c.action, example.action)) is not None]
        return unedited + adapted

    def shown(self, examples: Sequence[WorldModelExample], exclude_own_episode: bool = False
              ) -> list[list[Candidate]]:
        """The `k` candidates each example's memory block shows: the scorer's best distinct
        observations, or without a scorer the TF-IDF nearest transitions (from other episodes
        than the example's own with `exclude_own_episode`, as for training examples)."""
        if self.scorer is None:
            exclude = [episode_of(e.id) if exclude_own_episode else None for e in examples]
            return [[Candidate("retrieved", m.action, m.observation)
                     for m in self.lookup(e.domain, e.action, e.previous(), x)]
                    for e, x in zip(examples, exclude, strict=True)]
        return [self._distinct(cands)[: self.k] for cands in self.ranked(examples, exclude_own_episode)]

    def ranked(self, examples: Sequence[WorldModelExample], exclude_own_episode: bool = False
               ) -> list[list[Candidate]]:
        """Each example's whole candidate pool (`candidates`), the scorer's most likely answer first."""
        if self.scorer is None:
            raise ValueError("ranking the candidates needs a scorer (fit_scorer, or build.rerank)")
        exclude = [episode_of(e.id) if exclude_own_episode else None for e in examples]
        return self.scorer.rank([(Turn(e.domain, e.action, e.history, e.system), self.candidates(e, x))
                                 for e, x in zip(examples, exclude, strict=True)])

    @staticmethod
    def _distinct(candidates: Sequence[Candidate]) -> list[Candidate]:
        """The first candidate of each observation text (two copies would show one answer twice)."""
        first: dict[str, Candidate] = {}
        for candidate in candidates:
            first.setdefault(candidate.observation, candidate)
        return list(first.values())

    def fit_scorer(self, train: Sequence[WorldModelExample], seed: int = 0) -> CandidateScorer:
        """Fit the candidate scorer on the training split (each turn's candidates exclude its
        own episode, as a held-out turn's do) and use it from now on."""
        turns = [(Turn(e.domain, e.action, e.history, e.system), self.candidates(e, episode_of(e.id)), e.observation)
                 for e in train]
        self.scorer = CandidateScorer.fit(turns, seed)
        return self.scorer

    def render(self, shown: Sequence[Candidate], action: str | None = None) -> str:
        """The memory block a user turn carries after its action; a candidate of the same
        action says so in its header, a cue a small model cannot easily compute itself, and one
        from this episode or edited to this action says so."""
        return "\n".join(f"{HEADERS[c.kind]}"
                         f"{SAME_ACTION_NOTE if c.action == action and c.kind != 'adapted' else ''}\n>>> {c.action}\n"
                         f"{c.observation[: self.max_chars]}" for c in shown)

    def annotate(self, examples: Sequence[WorldModelExample], exclude_own_episode: bool = False
                 ) -> list[WorldModelExample]:
        """The examples with a memory block after their current action and the shown
        observations in full (what copy ops copy).

        Earlier turns show no memory: their real observations are already in the history, and
        the context window is better spent on more of it."""
        return [replace(e, memory=[self.render(shown, e.action)], retrieved=[c.observation for c in shown])
                for e, shown in zip(examples, self.shown(examples, exclude_own_episode), strict=True)]

    def save(self, directory: str | Path) -> Path:
        return self.save_or_none(self, directory, self.max_chars)

    @staticmethod
    def save_or_none(memory: RetrievalMemory | None, directory: str | Path, max_chars: int) -> Path:
        """Write the memory file (its header carries the scorer); with no memory, a file that
        says so (k 0), so the file is always there for pipelines that track it."""
        path = Path(directory) / MEMORY_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        scorer = memory.scorer if memory else None
        with path.open("w") as out:
            out.write(json.dumps({"k": memory.k if memory else 0, "max_chars": max_chars,
                                  "pool": memory.pool if memory else 0,
                                  "scorer": scorer.dumps() if scorer is not None else None}) + "\n")
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
        scorer = CandidateScorer.loads(header["scorer"], str(path)) if header.get("scorer") else None
        return cls(entries, int(header["k"]), int(header["max_chars"]), int(header.get("pool") or 0), scorer)
