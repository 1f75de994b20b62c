"""A learned ranking of the real observations a world model may copy at one turn.

TF-IDF finds transitions whose action and previous turn look like the current one; it cannot
tell which of them answered the way this episode will be answered. The candidates are the
best TF-IDF neighbours from the training split plus the episode's own turns (the answer to the
same action earlier, the previous observation), each neighbour or previous observation also
edited to the current action's arguments where that changes it, and a small gradient-boosted model predicts,
from cues about the candidate and the episode, how close each is to the real next observation
(token F1 plus exact match). The strongest cue is agreement: an observation that other
candidates repeat is usually the right one (self-consistency over retrieved neighbours).

The scorer is fitted on the training split only, each training turn ranking candidates that
exclude its own episode (as a held-out turn will see them), and it is saved next to the
retrieval memory, so every backend that loads a model ranks the memory the same way.
"""

from __future__ import annotations

import base64
import math
import pickle
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from agentworld.data.prompts import opening_of, task_of
from agentworld.scoring.metrics import bag_f1, exact_match, token_bag, token_f1

#: Where a candidate comes from; the scorer learns how far each kind can be trusted.
#: "adapted": a retrieved or previous observation edited to the current action's arguments
#: (agentworld/data/adapting.py).
KINDS = ("earlier", "retrieved", "previous", "adapted")
FEATURES = ("kind", "rank", "similarity", "same_action", "turns_ago", "previous_action_f1",
            "previous_observation_f1", "log_chars", "empty", "history_share", "action_share",
            "agreement_mean", "agreement_max", "domain", "turn", "has_earlier", "candidates", "f1_with_previous",
            "substitutions", "arguments_seen", "arguments_in_task", "arguments_in_latest")
_TOKEN = re.compile(r"\S+")
_WORD = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class Candidate:
    """One real observation the world model may copy, with what is known of how it was found."""

    kind: str                 # one of KINDS
    action: str               # the action it answered
    observation: str
    rank: int = 0             # TF-IDF rank among the retrieved (1 = most similar); 0 for the episode's own
    similarity: float = 0.0   # TF-IDF score (plus the same-action bonus); 0 for the episode's own
    turns_ago: int = 0        # for the episode's own turns
    previous_action: str = ""          # the turn before it, for retrieved transitions
    previous_observation: str = ""
    substitutions: int = 0    # for an adapted candidate: how many arguments were replaced


@dataclass(frozen=True)
class Turn:
    """What the scorer knows of the turn being predicted: nothing of its real observation."""

    domain: str
    action: str
    history: Sequence[tuple[str, str]]
    system: str = ""


def _tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text))


def _arguments_seen(turn: Turn, context: str) -> tuple[float, float, float]:
    """Share of the action's arguments (its words after the first) that the episode has mentioned
    at all (its history, the task, the opening state), that the task names, and that the latest
    state shows (the previous observation, or the opening state on the first turn): `take coin`
    is answered one way in a room described with a coin, another where none was ever seen, a
    third where the task asks for it. `context`: the history and system prompt as one text.
    -1 for an action without arguments (`look`)."""
    arguments = set(_WORD.findall(" ".join(turn.action.split()[1:]).lower()))
    if not arguments:
        return -1.0, -1.0, -1.0

    def share(text: str) -> float:
        return len(arguments & set(_WORD.findall(text.lower()))) / len(arguments)

    latest = turn.history[-1][1] if turn.history else (opening_of(turn.system) or "")
    return share(context), share(task_of(turn.system)), share(latest)


def _agreement(texts: Sequence[str]) -> np.ndarray:
    """`token_f1` of every pair of texts, each text tokenised once instead of once per pair."""
    bags = [token_bag(t) for t in texts]
    out = np.zeros((len(texts), len(texts)))
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            out[i, j] = out[j, i] = bag_f1(bags[i], bags[j])
    return out


def features(turn: Turn, candidates: Sequence[Candidate], domains: Sequence[str]) -> np.ndarray:
    """One row of FEATURES per candidate (unknown domains are missing values)."""
    previous = turn.history[-1] if turn.history else ("", "")
    context_text = " ".join(f"{a} {o}" for a, o in turn.history) + " " + turn.system
    context = _tokens(context_text)
    action = _tokens(turn.action)
    domain = domains.index(turn.domain) if turn.domain in domains else math.nan
    has_earlier = any(c.kind == "earlier" for c in candidates)
    pairs = _agreement([c.observation for c in candidates])
    arguments = _arguments_seen(turn, context_text)
    rows = []
    for i, c in enumerate(candidates):
        words = _tokens(c.observation)
        agreement = np.delete(pairs[i], i)
        rows.append([
            KINDS.index(c.kind), c.rank, c.similarity, float(c.action == turn.action), c.turns_ago,
            token_f1(c.previous_action, previous[0]) if c.rank else 1.0,  # rank 0: the episode's own
            token_f1(c.previous_observation, previous[1]) if c.rank else 1.0,
            math.log1p(len(c.observation)), float(not c.observation.strip()),
            len(words & context) / max(1, len(words)), len(words & action) / max(1, len(action)),
            float(agreement.mean()) if agreement.size else 0.0, float(agreement.max()) if agreement.size else 0.0,
            domain, len(turn.history), float(has_earlier), len(candidates), token_f1(c.observation, previous[1]),
            c.substitutions, *arguments,
        ])
    return np.asarray(rows, dtype=float).reshape(len(candidates), len(FEATURES))


def closeness(candidate: str, observation: str) -> float:
    """What the scorer predicts: token F1 plus exact match with the real observation (0..2)."""
    return token_f1(candidate, observation) + exact_match(candidate, observation)


class CandidateScorer:
    """Predicts each candidate's closeness to the real next observation; ranks by it."""

    def __init__(self, model: HistGradientBoostingRegressor, domains: Sequence[str]) -> None:
        self.model, self.domains = model, list(domains)

    @classmethod
    def fit(cls, turns: Sequence[tuple[Turn, Sequence[Candidate], str]], seed: int = 0) -> CandidateScorer:
        """Fit on (turn, its candidates, the real observation) of the training split."""
        domains = sorted({turn.domain for turn, _, _ in turns})
        blocks = [(features(turn, cands, domains), [closeness(c.observation, real) for c in cands])
                  for turn, cands, real in turns if cands]
        if not blocks:
            raise ValueError("candidate scorer: no training turn has a candidate to rank")
        x = np.vstack([b[0] for b in blocks])
        y = np.concatenate([b[1] for b in blocks])
        model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, max_leaf_nodes=15,
                                              categorical_features=[FEATURES.index("kind"), FEATURES.index("domain")],
                                              random_state=seed)
        return cls(model.fit(x, y), domains)

    def rank(self, turns: Sequence[tuple[Turn, Sequence[Candidate]]]) -> list[list[Candidate]]:
        """Each turn's candidates, the most likely answer first (ties keep their given order);
        one prediction call for all of them (a call costs far more than a row)."""
        blocks = [features(turn, cands, self.domains) for turn, cands in turns]
        sizes = [len(b) for b in blocks]
        if not sum(sizes):
            return [[] for _ in turns]
        predicted = np.split(self.model.predict(np.vstack(blocks)), np.cumsum(sizes)[:-1])
        return [[cands[i] for i in np.argsort(-scores, kind="stable")]
                for (_, cands), scores in zip(turns, predicted, strict=True)]

    def dumps(self) -> str:
        """The scorer as text for the retrieval memory file's header (a base64 pickle)."""
        saved = {"model": self.model, "domains": self.domains, "features": FEATURES}
        return base64.b64encode(pickle.dumps(saved)).decode("ascii")

    @classmethod
    def loads(cls, text: str, where: str) -> CandidateScorer:
        """A scorer written by `dumps` (a pickle: load only memory files this pipeline wrote,
        as with any checkpoint); one fitted on other features is refused, naming `where`."""
        try:
            saved = pickle.loads(base64.b64decode(text))
        except (ValueError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as err:
            raise ValueError(f"{where}: not a candidate scorer ({err})") from err
        if not isinstance(saved, dict) or tuple(saved.get("features", ())) != FEATURES:
            raise ValueError(f"{where}: a candidate scorer for other features; rebuild it (agentworld stage build)")
        return cls(saved["model"], saved["domains"])
