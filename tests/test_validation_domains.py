"""Per-domain Great Expectations rules: real rows pass, a row with its domain's shape broken is quarantined."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentworld.config import CollectParams, SandboxParams, ValidateParams
from agentworld.data.collect import collect_parallel
from agentworld.data.io import read_jsonl, write_jsonl
from agentworld.domains import list_envs
from agentworld.validation import validate_file
from agentworld.validation.domains import action_verb, domain_rules

DOMAIN_RULES = domain_rules()
AVAILABLE = {env.name for env in list_envs() if env.available}
PARAMS = ValidateParams(max_rejected_share=1.0)


def test_action_verb():
    assert action_verb("search(json dumps)") == "search"
    assert action_verb("  run_tests tests/test_x.py") == "run_tests"
    assert action_verb('{"tool": "get_order"}') == ""
    assert action_verb("Click [3]") == "click"


def _broken(domain: str, rows):
    """Index of a row a rule of `domain` covers, and that row with a shape no rule allows."""
    for index, row in enumerate(rows):
        for rule in DOMAIN_RULES:
            if rule.domain != domain:
                continue
            verb = action_verb(row.action)
            if (rule.verbs and verb not in rule.verbs) or verb in rule.skip_verbs:
                continue
            bad = "" if rule.kind == "non_empty" else "<<garbled output>> {"
            return index, row.model_copy(update={"observation": bad})
    raise AssertionError(f"no {domain} row is covered by a domain rule")


@pytest.mark.parametrize("domain", sorted({rule.domain for rule in DOMAIN_RULES}))
def test_real_rows_pass_and_a_broken_row_is_quarantined(domain: str, tmp_path: Path):
    if domain not in AVAILABLE and not os.environ.get("CI"):  # CI installs every domain: it must run there
        pytest.skip(f"{domain} unavailable here")
    params = CollectParams(domains=[domain], episodes_per_domain=4, max_steps=6, workers=1)
    rows = collect_parallel(domain, params, SandboxParams(), progress=False)
    source = tmp_path / "rows.jsonl"
    write_jsonl(source, rows)
    report = validate_file(source, tmp_path / "clean.jsonl", tmp_path / "q.jsonl", PARAMS, allowed_domains=[domain])
    assert report.rejected == 0, report.to_dict()

    index, bad = _broken(domain, rows)
    write_jsonl(source, [*rows[:index], bad, *rows[index + 1:]])
    report = validate_file(source, tmp_path / "clean.jsonl", tmp_path / "q.jsonl", PARAMS, allowed_domains=[domain])
    assert report.rejected == 1 and report.clean == len(rows) - 1
    (record,) = list(read_jsonl(tmp_path / "q.jsonl"))
    assert record["line"] == index + 1
    assert record["field"] == "observation", record
    assert domain in record["reason"], record  # the reason names the domain rule
