"""Per-domain Great Expectations rules, on top of the common transition suite.

The rules themselves are declared by each domain (`Domain.shape_rules` in
`agentworld/domains/<name>/__init__.py`); the judge checks the same rules on predictions.

Each domain's observations have a shape a world model must learn (MCP answers are JSON tool
results, search answers are ranked lists, a SWE test run ends with pytest's counts, a web page
is an accessibility tree). A row that breaks its domain's shape is a collection bug, and it is
quarantined like any other bad row. Rules apply through GE's `row_condition` (pandas query
syntax) to the rows of their domain, and optionally only to one kind of action, named by the
helper column `action_verb` (the action's first word: `search`, `run_tests`, `click`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ACTION_VERB = "action_verb"
_VERB_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")


def action_verb(action: str) -> str:
    """`search(json)` -> `search`, `run_tests tests/x.py` -> `run_tests`, `{"tool": ..}` -> ``."""
    match = _VERB_RE.match(action)
    return match.group(1).lower() if match else ""


@dataclass(frozen=True)
class DomainRule:
    """One expectation on the observations of one domain (optionally of one action verb)."""

    domain: str
    why: str
    kind: str  # "json" | "regex" | "non_empty"
    regex: str | None = None
    verbs: tuple[str, ...] = ()  # only rows whose action_verb is one of these
    skip_verbs: tuple[str, ...] = ()  # never rows whose action_verb is one of these

    def row_condition(self) -> str:
        parts = [f'domain == "{self.domain}"']
        if self.verbs:
            parts.append(f"{ACTION_VERB} in {list(self.verbs)!r}")
        if self.skip_verbs:
            parts.append(f"{ACTION_VERB} not in {list(self.skip_verbs)!r}")
        return " and ".join(parts)

    def expectation(self, gxe: Any) -> Any:
        common = {"column": "observation", "row_condition": self.row_condition(), "condition_parser": "pandas",
                  "meta": {"field": "observation", "notes": f"{self.domain}: {self.why}", "domain": self.domain}}
        if self.kind == "json":
            return gxe.ExpectColumnValuesToBeJsonParseable(**common)
        if self.kind == "regex":
            return gxe.ExpectColumnValuesToMatchRegex(regex=self.regex, **common)
        if self.kind == "non_empty":
            return gxe.ExpectColumnValueLengthsToBeBetween(min_value=1, **common)
        raise ValueError(f"unknown rule kind {self.kind!r}")


def domain_rules(domains: Sequence[str] | None = None) -> tuple[DomainRule, ...]:
    """The shape rules (`Domain.shape_rules`) of `domains` (default: every built-in domain), each
    tagged with its domain; a recorded system's domain is found by name."""
    from agentworld.domains import all_domains, find_domain

    declared = all_domains() if domains is None else {name: find_domain(name) for name in domains}
    return tuple(DomainRule(name, rule.why, rule.kind, rule.regex, rule.verbs, rule.skip_verbs)
                 for name, domain in declared.items() if domain is not None for rule in domain.shape_rules)


def domain_expectations(domains: Sequence[str], gxe: Any) -> list[Any]:
    """The expectations of every rule of `domains`."""
    return [rule.expectation(gxe) for rule in domain_rules(domains)]
