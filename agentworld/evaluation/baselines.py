"""Baselines that every score is reported next to, so learning is told apart from memorising."""

from __future__ import annotations

from collections.abc import Sequence

from agentworld.data.prompts import WorldModelExample
from agentworld.data.retrieval import MemoryEntry, RetrievalMemory


class RetrievalBaseline:
    """Nearest-neighbour world model: the observation of the most similar training transition.

    It is the plain lookup the world model's retrieval memory starts from
    (agentworld/data/retrieval.py: the same action first, then TF-IDF over action and previous
    turn), so a hand-made improvement of the lookup raises this floor too. The memory's learnt
    ranking of that lookup's pool is part of the world model and is reported on its own as
    `ranked_memory` (agentworld/evaluation/run.py)."""

    def __init__(self, train: Sequence[WorldModelExample]) -> None:
        if not train:
            raise ValueError("retrieval baseline needs at least one training example")
        self.memory = RetrievalMemory.from_examples(train, k=1)

    def first(self, example: WorldModelExample, exclude_episode: str | None = None) -> str:
        found = self.memory.lookup(example.domain, example.action, example.previous(), exclude_episode)
        return found[0].observation if found else ""

    def predict(self, examples: Sequence[WorldModelExample]) -> list[str]:
        return [self.first(e) for e in examples]


class LeaveEpisodeOutRetrieval(RetrievalBaseline):
    """Retrieval when no training split exists (a downloaded benchmark): the index is the
    evaluated records themselves, and a query never retrieves from its own episode."""

    def __init__(self, pool: Sequence[WorldModelExample], episodes: Sequence[str]) -> None:
        if not pool:
            raise ValueError("retrieval baseline needs at least one record")
        entries = [MemoryEntry(domain=e.domain, episode=episode, action=e.action, observation=e.observation,
                               previous_action=(e.previous() or ("", ""))[0],
                               previous_observation=(e.previous() or ("", ""))[1])
                   for e, episode in zip(pool, episodes, strict=True)]
        self.memory = RetrievalMemory(entries, k=1)

    def predict_excluding(self, examples: Sequence[WorldModelExample], episodes: Sequence[str]) -> list[str]:
        return [self.first(e, episode) for e, episode in zip(examples, episodes, strict=True)]


def episode_first(examples: Sequence[WorldModelExample], lookup: Sequence[str]) -> list[str]:
    """The episode-aware lookup: a repeated action gets the answer it had earlier in this
    episode, any other action the lookup's (`lookup[i]` for `examples[i]`).

    Two rules a small world model can learn from the repeat note in its prompt, so it is the
    floor that tells whether a model does more than look things up."""
    return [earlier[1] if (earlier := e.earlier()) else found for e, found in zip(examples, lookup, strict=True)]


def copy_previous(examples: Sequence[WorldModelExample]) -> list[str]:
    """The last observation of the history (empty on the first turn): the 'nothing changes' floor."""
    return [previous[1] if (previous := e.previous()) else "" for e in examples]
