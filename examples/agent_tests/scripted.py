"""Example agents under test for `agentworld agent test` (Python callables: the episode's
observations so far, the first holding the task, and its actions so far -> the next action).

`act` solves the terminal's "Rename A to B." tasks by reading the instruction, and gives up on
anything else; `act_with_retry` also repeats an action whose tool call failed (an error line such
as `bash: ... timed out`, `rate limit exceeded`), which makes it robust to injected faults.
"""

from __future__ import annotations

import re

RENAME = re.compile(r"Rename (\S+) to (\S+?)\.(?:\s|$)")
FAILED = re.compile(r"timed out|rate limit|internal error|permission denied|unavailable", re.IGNORECASE)


def act(observations: list[str], actions: list[str]) -> str:
    match = RENAME.search(observations[0])
    if match and not actions:
        return f"mv {match.group(1)} {match.group(2)}"
    return "submit"


def act_with_retry(observations: list[str], actions: list[str]) -> str:
    if actions and actions[-1] != "submit" and FAILED.search(observations[-1]):
        return actions[-1]
    match = RENAME.search(observations[0])
    if match and "mv" not in " ".join(actions):
        return f"mv {match.group(1)} {match.group(2)}"
    return "submit"
