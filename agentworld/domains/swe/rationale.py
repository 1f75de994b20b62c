"""What a swe step did, from the env's recorded `info` (see `agentworld.envs.rationale`)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from agentworld.envs.rationale import as_int, as_str, describe_generic, flag, join_sentences, outcome, quote

_PYTEST_CODES = {
    0: "exit status 0 means all selected tests pass",
    1: "exit status 1 means some tests fail",
    2: "exit status 2 means the test run is interrupted (e.g. a collection error)",
    3: "exit status 3 means pytest hits an internal error",
    4: "exit status 4 means pytest is misused (e.g. the test path is not found)",
    5: "exit status 5 means no tests are collected",
}


def _swe_args(action: str) -> list[str]:
    try:
        return shlex.split(action)[1:]
    except ValueError:
        return action.split()[1:]


def _edit_path(action: str) -> str | None:
    payload = action.strip()
    if payload.startswith("edit"):
        payload = payload[4:].strip()
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return as_str(data.get("path")) if isinstance(data, dict) else None


def describe_swe(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """swe: what the repository action does, and what its exit status means."""
    kind = as_str(info.get("action_type"))
    project = as_str(info.get("project"))
    code = as_int(info.get("exit_code"))
    timed_out = flag(info, "timed_out")
    args = _swe_args(action) if kind in ("view", "ls", "search", "run_tests") else []
    of = f" of {project}" if project else ""
    if kind == "invalid":
        return join_sentences("not a valid action; the environment rejects it with an error and nothing runs")
    if kind == "run_tests":
        first = f"runs the tests{of}" + (f" selected by {quote(args[0], 60)}" if args else "")
        if timed_out:
            return join_sentences(f"{first}; the run times out")
        meaning = _PYTEST_CODES.get(code) if code is not None else None
        if meaning is None and code is not None:
            meaning = f"it exits with status {code}"
        return join_sentences(f"{first}; {meaning}" if meaning else first)
    if kind == "submit":
        first = f"submits the fix; the full test suite{of} runs and the episode ends"
        if timed_out:
            return join_sentences(first, "the test run times out; the task is not solved")
        verdict = (
            "the tests pass (exit status 0): the task is solved"
            if flag(info, "solved")
            else f"the tests fail (exit status {code}): the task is not solved"
            if code is not None
            else outcome(info)
        )
        return join_sentences(first, verdict)
    failed = code is not None and code != 0
    if kind == "view":
        path = quote(args[0], 60) if args else "a file"
        lines = f"lines {args[1]} of " if len(args) > 1 else ""
        first = f"views {lines}{path}"
        return join_sentences(f"{first}; the file cannot be read (exit status {code})" if failed else first)
    if kind == "edit":
        path = _edit_path(action)
        first = f"edits {quote(path, 60)}" if path else "edits a file"
        if failed:
            return join_sentences(f"{first}; the edit is rejected (exit status {code}) and the file is unchanged")
        return join_sentences(f"{first}; the edit applies" if code == 0 else first)
    if kind == "ls":
        path = quote(args[0], 60) if args else "the repository root"
        return join_sentences(
            f"lists {path}; the path cannot be listed (exit status {code})" if failed else f"lists {path}"
        )
    if kind == "search":
        pattern = f" for '{quote(args[0], 40)}'" if args else ""
        inside = f" in {quote(args[1], 40)}" if len(args) > 1 else ""
        return join_sentences(f"searches the repository{pattern}{inside} with grep")
    if kind == "git_diff":
        return join_sentences("shows the git diff of the changes made so far")
    return describe_generic(action, info, prev)
