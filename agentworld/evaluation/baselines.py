"""Baselines that every score is reported next to, so learning is told apart from memorising."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from agentworld.data.prompts import WorldModelExample


def retrieval_context(example: WorldModelExample, history_turns: int = 1) -> str:
    """What the retriever compares: the action (weighted twice) and the latest turns of history."""
    recent = example.history[-history_turns:] if history_turns else []
    past = " ".join(f"{a} {o}" for a, o in recent)
    return f"{example.action} {example.action} {past}"


class RetrievalBaseline:
    """Nearest-neighbour world model: the observation of the most similar training context."""

    def __init__(self, train: Sequence[WorldModelExample], history_turns: int = 1) -> None:
        if not train:
            raise ValueError("retrieval baseline needs at least one training example")
        self.history_turns = history_turns
        self.vectorizer = TfidfVectorizer(token_pattern=r"[^\s]+", sublinear_tf=True, lowercase=False)
        self.index = self.vectorizer.fit_transform([retrieval_context(e, history_turns) for e in train])
        self.observations = [e.observation for e in train]

    def predict(self, examples: Sequence[WorldModelExample]) -> list[str]:
        queries = self.vectorizer.transform([retrieval_context(e, self.history_turns) for e in examples])
        best = (queries @ self.index.T).toarray().argmax(axis=1)
        return [self.observations[i] for i in best]


class LeaveEpisodeOutRetrieval(RetrievalBaseline):
    """Retrieval when no training split exists (a downloaded benchmark): the index is the
    evaluated records themselves, and a query never retrieves from its own episode."""

    def __init__(self, pool: Sequence[WorldModelExample], episodes: Sequence[str], history_turns: int = 1) -> None:
        super().__init__(pool, history_turns)
        self.pool_episodes = list(episodes)

    def predict_excluding(self, examples: Sequence[WorldModelExample], episodes: Sequence[str]) -> list[str]:
        queries = self.vectorizer.transform([retrieval_context(e, self.history_turns) for e in examples])
        scores = (queries @ self.index.T).toarray()
        pool = np.array(self.pool_episodes)
        for row, episode in enumerate(episodes):
            scores[row, pool == episode] = -1.0
        return [self.observations[i] if scores[row, i] >= 0 else "" for row, i in enumerate(scores.argmax(axis=1))]


def copy_previous(examples: Sequence[WorldModelExample]) -> list[str]:
    """The last observation of the history (empty on the first turn): the 'nothing changes' floor."""
    return [e.history[-1][1] if e.history else "" for e in examples]
