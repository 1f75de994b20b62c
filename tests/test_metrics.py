"""Single-step metrics and the retrieval baseline on hand-checked cases."""

from __future__ import annotations

import pytest

from agentworld.data.prompts import WorldModelExample
from agentworld.evaluation.baselines import RetrievalBaseline
from agentworld.scoring.metrics import exact_match, score, token_f1


def test_exact_match_ignores_trailing_whitespace_only():
    assert exact_match("a b\n", "a b") == 1.0
    assert exact_match("a  b", "a b") == 0.0
    assert exact_match("", "\n") == 1.0


@pytest.mark.parametrize(
    ("pred", "ref", "expected"),
    [("a b c", "a b c", 1.0), ("a b", "a b c d", 2 * (1 * 0.5) / 1.5), ("x", "y", 0.0), ("", "", 1.0), ("", "y", 0.0)],
)
def test_token_f1(pred, ref, expected):
    assert token_f1(pred, ref) == pytest.approx(expected)


def test_score_per_domain_and_overall():
    result = score(["a", "b", "c"], ["a", "x", "c"], ["terminal", "terminal", "os"])
    assert result["terminal"]["exact_match"] == 0.5
    assert result["os"]["exact_match"] == 1.0
    assert result["all"]["exact_match"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        score(["a"], [], ["terminal"])


def _ex(action: str, observation: str) -> WorldModelExample:
    return WorldModelExample(id=action, domain="terminal", system="s", action=action, observation=observation)


def test_retrieval_returns_observation_of_most_similar_context():
    train = [_ex("ls /workspace", "notes.txt"), _ex("cat notes.txt", "hello"), _ex("pwd", "/workspace")]
    baseline = RetrievalBaseline(train)
    assert baseline.predict([_ex("cat notes.txt", "?"), _ex("pwd", "?")]) == ["hello", "/workspace"]
    # It can only recall: an unseen echo gets a recalled observation, never the new word.
    assert baseline.predict([_ex("echo zebra", "zebra")]) != ["zebra"]


def test_rollout_crossing_is_the_first_step_below_each_baseline():
    from agentworld.evaluation.rollout import crossings, describe_crossings

    def points(*f1s):
        return [{"step": i, "token_f1": f, "exact_match": 0.0, "n": 4} for i, f in enumerate(f1s)]

    curves = {"world_model": points(0.6, 0.5, 0.2, 0.4), "retrieval": points(0.5, 0.5, 0.3, 0.3),
              "copy_previous": points(0.1, 0.1, 0.1, 0.1), "untrained": points(0.7, 0.0, 0.0, 0.0)}
    found = crossings(curves)
    assert found == {"retrieval": 3, "copy_previous": None, "untrained": 1}  # a tie (step 2) is not below
    assert describe_crossings(found, 4) == ("Free-running over 4 steps, the world model is below retrieval from "
                                            "step 3; never below copy_previous; below untrained from step 1.")
