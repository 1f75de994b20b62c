"""Per-domain Great Expectations rules, on top of the common transition suite.

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


DOMAIN_RULES: tuple[DomainRule, ...] = (
    DomainRule("mcp", "every answer is a JSON tool result", "json"),
    DomainRule("mcp", "a tool result says whether it is an error", "regex", r'^\{.*"isError":(?:true|false)'),
    DomainRule("search", "a search answers with a ranked result list, 'No results' or the engine's error", "regex",
               r"^(?:Results \d+-\d+ of \d+ for \"|No results for \"|Error: )", verbs=("search",)),
    DomainRule("search", "an opened page starts with its id and a page marker", "regex",
               r"^(?:\[[a-z]+:[^\]]+\] .*\n\[page \d+/\d+\]|Error: )", verbs=("open",)),
    DomainRule("os", "ending the episode (answer, submit, exit) prints nothing", "regex", r"^$",
               verbs=("answer", "submit", "exit", "logout")),
    DomainRule("swe", "a test run ends with pytest's pass/fail counts (or the timeout marker); a misused "
               "action gets one usage error line", "regex",
               r"(?:\d+ (?:passed|failed|errors?|skipped|deselected|warnings?|no tests ran)[^\n]*|"
               r"\[command timed out after [^\]]*\]|no tests ran[^\n]*)\s*$|^error: [^\n]+$",
               verbs=("run_tests", "submit")),
    DomainRule("web", "a browser action answers with the page's accessibility tree or one error line", "regex",
               r"^(?:URL: /\S*|Error: [^\n]+$)", verbs=("click", "type", "select", "goto", "back", "scroll")),
    DomainRule("web", "stop ends the episode", "regex", r"^(?:Episode ended\.|Error: [^\n]+)$", verbs=("stop",)),
    DomainRule("textworld", "the game answers every command with some text", "non_empty"),
    DomainRule("scienceworld", "the simulator answers every action with some text", "non_empty"),
)


def domain_expectations(domains: Sequence[str], gxe: Any) -> list[Any]:
    """The expectations of every rule whose domain is in `domains`."""
    return [rule.expectation(gxe) for rule in DOMAIN_RULES if rule.domain in domains]
