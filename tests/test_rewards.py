"""Hybrid GRPO reward: rule components, rubric component, totals and the TRL adapters."""

from __future__ import annotations

import pytest

from agentworld.data.prompts import WorldModelExample, assistant_turn, system_prompt
from agentworld.scoring.judge import JudgeInput, LocalJudge
from agentworld.training.rewards import (
    COMPONENTS,
    RULE_COMPONENTS,
    HybridReward,
    observation_kind,
    rubric_reward,
    rule_reward,
    structural_match,
    trl_inputs,
)
from tests.test_judge import CASES, MCP_REF, _with


@pytest.mark.parametrize(("base", "faithful", "wrong"), CASES)
def test_faithful_beats_wrong_on_every_component(base, faithful, wrong):
    good, bad = HybridReward(judge=LocalJudge())([_with(base, faithful), _with(base, wrong)])
    assert set(good) == set(COMPONENTS) | {"total"}
    assert good == {name: 1.0 for name in good}
    for name in good:
        assert good[name] > bad[name], (name, bad)
        assert 0.0 <= bad[name] <= 1.0


@pytest.mark.parametrize(("base", "faithful", "wrong"), CASES)
def test_rewards_are_deterministic(base, faithful, wrong):
    reward = HybridReward(judge=LocalJudge())
    batch = [_with(base, faithful), _with(base, wrong)]
    assert reward(batch) == reward(batch) == HybridReward(judge=LocalJudge())(batch)


def test_missing_marker_gets_low_format_and_no_exact_match():
    row = rule_reward("hello", "hello", "terminal", "echo hello")
    assert row["format"] == 0.5 and row["exact_match"] == 0.0 and row["facts"] == 1.0
    assert rule_reward("result", MCP_REF, "mcp", "{}")["format"] == 0.0
    assert rule_reward(assistant_turn("hello"), "hello", "terminal")["format"] == 1.0


def test_structure_per_shape():
    # JSON: same key paths and types, other values -> full structure; another structure -> partial
    assert structural_match('{"isError":false,"result":{"id":2,"key":"X"}}', '{"isError":false,"result":{"id":1,"key":"Y"}}') == 1.0
    assert 0 < structural_match('{"isError":false,"result":{"id":2}}', '{"isError":false,"result":{"id":1,"key":"Y"}}') < 1
    assert structural_match("not json", '{"isError":false}') == 0.0
    # text: kind, line count and line templates
    assert structural_match("a.txt\nb.txt", "c.txt\nd.txt") == 1.0
    assert structural_match("a.txt", "c.txt\nd.txt") < 1.0
    assert observation_kind("Error: no document") == "error"
    assert observation_kind('URL: /\n[1] link "x"') == "page"
    assert observation_kind('Results 1-2 of 2 for "q":') == "results"
    assert observation_kind(".. [100%]\n2 passed in 0.01s") == "pytest"
    assert observation_kind('{"isError":true,"error":"x"}') == "json-error"


def test_deterministic_content_component():
    ref = "bash: foo: command not found"
    assert rule_reward(assistant_turn(ref), ref, "terminal", "foo")["facts"] == 1.0
    assert rule_reward(assistant_turn("bash: foo: No such file or directory"), ref, "terminal", "foo")["facts"] < 0.5
    ref = ".. [100%]\n2 passed in 0.03s"
    assert rule_reward(assistant_turn(".. [100%]\n2 passed in 0.50s"), ref, "swe", "run_tests")["facts"] == 1.0


def test_contradicting_history_lowers_rubric():
    base = JudgeInput(domain="terminal", generation="", reference="", action="cat notes.txt",
                      history=(("touch notes.txt", ""),))
    good, bad = rubric_reward(LocalJudge(), [_with(base, assistant_turn("")),
                                             _with(base, assistant_turn("cat: notes.txt: No such file or directory"))])
    assert good == 1.0 and bad < good


def test_total_is_the_weighted_mean():
    base, faithful, wrong = CASES[0].values
    reward = HybridReward(judge=LocalJudge(), exact_match=2.0, structure=0.0, format=1.0, facts=1.0, rubric=0.0)
    row = reward([_with(base, wrong)])[0]
    assert row["total"] == pytest.approx((2 * row["exact_match"] + row["format"] + row["facts"]) / 4)
    assert "rubric" in row and "structure" in row  # zero-weighted components are still logged
    rules_only = HybridReward()([_with(base, faithful)])[0]
    assert set(rules_only) == set(RULE_COMPONENTS) | {"total"} and rules_only["total"] == 1.0
    with pytest.raises(ValueError):
        HybridReward(exact_match=-1)
    with pytest.raises(ValueError):
        HybridReward(exact_match=0, structure=0, format=0, facts=0)


def _trl_batch():
    """Conversational GRPO inputs as TRL passes them: prompts, completions, dataset columns."""
    prompts, completions, observations, domains = [], [], [], []
    for case in CASES:
        base, faithful, wrong = case.values
        example = WorldModelExample(id=case.id, domain=base.domain, system=system_prompt(base.domain, base.instruction),
                                    history=list(base.history), action=base.action, observation=base.reference)
        for generation in (faithful, wrong):
            prompts.append(example.prompt_messages())
            completions.append([{"role": "assistant", "content": generation}])
            observations.append(base.reference)
            domains.append(base.domain)
    return prompts, completions, {"observation": observations, "domain": domains}


def test_trl_adapters_match_the_hybrid_reward():
    reward = HybridReward(judge=LocalJudge())
    prompts, completions, columns = _trl_batch()
    logged: dict[str, float] = {}
    kwargs = {**columns, "trainer_state": None, "log_extra": lambda *a: None,
              "log_metric": lambda name, value: logged.__setitem__(name, value)}
    inputs = trl_inputs(prompts, completions, **kwargs)
    # context recovered from the chat prompt: task, history, action
    originals = [c.values[0] for c in CASES for _ in range(2)]
    assert [(i.action, i.history, i.instruction) for i in inputs] == \
        [(o.action, o.history, o.instruction) for o in originals]
    expected = reward(inputs)

    funcs = reward.trl_reward_funcs()
    assert [f.__name__ for f in funcs] == [f"reward_{c}" for c in COMPONENTS]
    per_component = [f(prompts=prompts, completions=completions, completion_ids=None, **kwargs) for f in funcs]
    weights = reward.trl_reward_weights()
    assert sum(weights) == pytest.approx(1.0)
    for i, row in enumerate(expected):
        assert [values[i] for values in per_component] == [row[c] for c in COMPONENTS]
        assert sum(w * values[i] for w, values in zip(weights, per_component)) == pytest.approx(row["total"])

    total = reward.trl_total_reward()
    assert total.__name__ == "hybrid_reward"
    assert total(prompts=prompts, completions=completions, **kwargs) == [r["total"] for r in expected]
    assert set(logged) == {f"hybrid/{c}" for c in COMPONENTS}
    # faithful (even index) beats wrong (odd index) in every case
    totals = [r["total"] for r in expected]
    assert all(totals[i] > totals[i + 1] for i in range(0, len(totals), 2))


def test_trl_adapter_plain_text_and_renamed_columns():
    reward = HybridReward()
    func = reward.trl_reward_funcs(reference="real")[0]
    assert func(prompts=["p"], completions=[assistant_turn("x")], real=["x"], domain=["terminal"]) == [1.0]
    with pytest.raises(KeyError, match="'observation'"):
        reward.trl_total_reward()(prompts=["p"], completions=["x"], domain=["terminal"])

