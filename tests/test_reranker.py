"""The candidate scorer: fitted on the training split, it puts first the candidate that answers
like the real environment more often than TF-IDF order does, travels in the memory file, and
a damaged one is refused naming the file."""

from __future__ import annotations

import json

import pytest

from agentworld.config import BuildParams
from agentworld.data.build import build_datasets, load_examples
from agentworld.data.reranker import FEATURES, Candidate, Turn, features
from agentworld.data.retrieval import MEMORY_FILE, RetrievalMemory
from agentworld.evaluation.baselines import RetrievalBaseline
from agentworld.scoring.metrics import exact_match
from tests.test_copying import episode


def _built(tmp_path, rerank: bool):
    transitions = [row for i in range(40) for row in episode(i)]
    build_datasets(transitions, BuildParams(test_fraction=0.3, history_turns=3, retrieval_k=2, rerank=rerank),
                   tmp_path)
    return load_examples(tmp_path / "sft" / "train.jsonl"), load_examples(tmp_path / "sft" / "test.jsonl")


def _first_shown_exact_match(examples) -> float:
    return sum(exact_match(e.retrieved[0] if e.retrieved else "", e.observation) for e in examples) / len(examples)


def test_the_scorer_ranks_the_right_answer_first_more_often_than_tf_idf(tmp_path):
    """Each episode repeats `ls dirN`: TF-IDF finds other episodes' listings (wrong), the
    scorer learns from the training split that the episode's own earlier answer is right."""
    train, test = _built(tmp_path / "ranked", rerank=True)
    _, test_plain = _built(tmp_path / "plain", rerank=False)
    ranked, plain = _first_shown_exact_match(test), _first_shown_exact_match(test_plain)
    retrieval = sum(exact_match(p, e.observation) for p, e in zip(RetrievalBaseline(train).predict(test), test,
                                                                    strict=True)) / len(test)
    assert plain == pytest.approx(retrieval)  # without the scorer the memory starts with the baseline's pick
    assert ranked >= retrieval + 0.2, (ranked, retrieval)
    repeats = [e for e in test if e.earlier() is not None]
    assert repeats and all(e.retrieved[0] == e.observation for e in repeats)


def test_the_scorer_travels_in_the_memory_file_and_ranks_the_same_after_loading(tmp_path):
    train, test = _built(tmp_path, rerank=True)
    memory = RetrievalMemory.load(tmp_path / "sft")
    assert memory is not None and memory.scorer is not None and memory.pool == 8
    again = memory.annotate([e.__class__(**{**e.__dict__, "memory": None, "retrieved": None}) for e in test])
    assert [e.retrieved for e in again] == [e.retrieved for e in test]


def test_a_damaged_scorer_is_refused_naming_the_file(tmp_path):
    _built(tmp_path, rerank=True)
    path = tmp_path / "sft" / MEMORY_FILE
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["scorer"] = "bm90IGEgcGlja2xl"  # base64 of "not a pickle"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=f"{MEMORY_FILE}: not a candidate scorer"):
        RetrievalMemory.load(tmp_path / "sft")


def test_features_see_agreement_and_leave_an_unknown_domain_missing():
    turn = Turn("terminal", "ls", [("pwd", "/home")])
    candidates = [Candidate("retrieved", "ls", "a b", rank=1), Candidate("retrieved", "ls", "a b", rank=2),
                  Candidate("retrieved", "ls", "zzz", rank=3)]
    rows = features(turn, candidates, ["terminal"])
    agreement = FEATURES.index("agreement_max")
    assert rows[0, agreement] == 1.0 and rows[2, agreement] == 0.0
    assert rows[0, FEATURES.index("same_action")] == 1.0
    unknown = features(Turn("mars", "ls", []), candidates, ["terminal"])
    assert all(value != value for value in unknown[:, FEATURES.index("domain")])  # NaN: missing


def test_features_see_whether_the_state_shows_what_the_action_names():
    """`take coin` is answered one way where the room shows a coin, another where none was ever
    described, a third where the task asks for it; the opening state is the first turn's room."""
    system = "The agent's task: find the coin\n\nThe environment at the start:\nA kitchen. You see a lamp."
    candidates = [Candidate("retrieved", "take coin", "You pick up the coin.", rank=1)]

    def cues(action: str, history: list[tuple[str, str]]) -> list[float]:
        row = features(Turn("textworld", action, history, system), candidates, ["textworld"])[0]
        return [row[FEATURES.index(name)] for name in ("arguments_seen", "arguments_in_task", "arguments_in_latest")]

    assert cues("take lamp", []) == [1.0, 0.0, 1.0]                       # the opening shows it
    assert cues("take coin", []) == [1.0, 1.0, 0.0]                       # named by the task only
    assert cues("take coin", [("go west", "A den. You see a coin.")]) == [1.0, 1.0, 1.0]
    assert cues("take lamp", [("go west", "A den. You see a coin.")]) == [1.0, 0.0, 0.0]  # seen, not here
    assert cues("take kettle", [("go west", "A den.")]) == [0.0, 0.0, 0.0]
    assert cues("look", []) == [-1.0, -1.0, -1.0]                         # nothing named
