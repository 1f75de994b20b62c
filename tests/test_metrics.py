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


def test_rollout_replays_recorded_actions_in_the_simulator_with_self_fed_history():
    """Rollouts run through the one episode loop: each recorded episode is a WorldModelEnv
    started from its own system prompt, its actions replayed; the system sees its own earlier
    predictions (never the real observations) and each episode stops at its length or the horizon."""
    from agentworld.data.awbench import BenchRecord
    from agentworld.evaluation.rollout import rollout
    from agentworld.evaluation.run import observations_as_turns, retrieval_lookup

    def record(domain: str, name: str, actions: list[str]) -> BenchRecord:
        return BenchRecord.from_episode(domain, name, f"system of {name}", actions,
                                        [f"{name} saw {a}" for a in actions], turn_idx=len(actions))

    episodes = [record("terminal", "t1", ["ls", "pwd", "whoami"]), record("mcp", "m1", ["a", "b"]),
                record("terminal", "t2", ["date", "ls", "uptime", "id"])]
    seen = []

    def generate(examples):
        seen.extend(examples)
        return observations_as_turns([f"{e.action} after {[o for _, o in e.history]}" for e in examples])

    rows = rollout(generate, episodes, horizon=3, name="echo")
    assert sorted((r["task"], r["step"], r["action"]) for r in rows) == sorted(
        [("terminal", s, a) for s, a in enumerate(["ls", "pwd", "whoami"])]
        + [("mcp", 0, "a"), ("mcp", 1, "b")]
        + [("terminal", s, a) for s, a in enumerate(["date", "ls", "uptime"])])
    whoami = next(r for r in rows if r["action"] == "whoami")
    assert whoami["prediction"] == "whoami after ['ls after []', \"pwd after ['ls after []']\"]"
    assert whoami["reference"] == "t1 saw whoami" and whoami["exact_match"] == 0.0
    assert {e.system for e in seen if e.action == "b"} == {"system of m1"}
    assert all(" saw " not in o for e in seen for _, o in e.history)
    # Without a training split (a downloaded benchmark) retrieval is leave-episode-out: a
    # simulated turn still maps to its recorded episode, so `ls` in t1 finds t2's answer.
    every_turn = [BenchRecord.from_episode(ep.domain, ep.model_extra["episode_id"], ep.system_str, ep.prompt,
                                           ep.observations, turn_idx=k + 1) for ep in episodes for k in range(len(ep.prompt))]
    lookup = retrieval_lookup(every_turn, None)
    ls_turns = [e for e in seen if e.action == "ls"]
    assert [e.system for e in ls_turns] == ["system of t1", "system of t2"] or \
        [e.system for e in ls_turns] == ["system of t2", "system of t1"]
    answers = dict(zip([e.system for e in ls_turns], lookup(ls_turns)))
    assert answers == {"system of t1": "t2 saw ls", "system of t2": "t1 saw ls"}
