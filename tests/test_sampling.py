"""Held-out samples balanced over domains: the RL gate and keep-parent check, the SFT curve and
the evaluation all compare models on turns where a large domain does not decide alone."""

from __future__ import annotations

from collections import Counter

from agentworld.data.prompts import WorldModelExample
from agentworld.data.sampling import domain_quotas
from agentworld.training.curve import held_out_sample


def _examples(domain: str, n: int) -> list[WorldModelExample]:
    return [WorldModelExample(id=f"{domain}-{i:03d}:000", domain=domain, system="s", action="a", observation="o")
            for i in range(n)]


def test_a_large_domain_gets_only_its_share_and_the_sample_is_fixed():
    examples = _examples("terminal", 90) + _examples("web", 6) + _examples("mcp", 30)
    sample = held_out_sample(examples, 30, seed=0)
    assert Counter(e.domain for e in sample) == {"terminal": 12, "web": 6, "mcp": 12}  # web's unused share moves
    assert [e.id for e in sample] == sorted(e.id for e in sample)
    assert held_out_sample(list(reversed(examples)), 30, seed=0) == sample   # input order does not matter
    assert held_out_sample(examples, 500, seed=0) == sorted(examples, key=lambda e: e.id)


def test_quotas_fill_the_limit_and_never_exceed_a_domain():
    assert domain_quotas({"a": 100, "b": 2, "c": 100}, 10) == {"a": 4, "b": 2, "c": 4}
    assert sum(domain_quotas({"a": 3, "b": 3}, 10).values()) == 6
