"""Grounded rationales for the world model's SFT target: what a step does to the environment state.

The SFT stage trains the assistant turn ``<think>RATIONALE</think>\\n**Environment Observation:**\\n...``.
Rationales are usually written by a large teacher model, but none runs here, and a teacher would
also make up state it never saw. Instead each rationale is built from facts the environment
adapters themselves recorded: the ``info`` dict of the step (stored in every transition row), the
previous step's ``info`` (to state changes: working directory, URL, score, room) and the action's
own text. So every claim in a rationale is true of the environment by construction.

Rules every describer keeps:
- only ``info`` / ``previous_info`` / the action text are used; the observation is never copied
  (``rationale`` also drops any sentence that would contain a long observation verbatim);
- missing or odd-typed keys never raise, the describer just says less;
- deterministic, short (1-3 sentences, usually < 300 characters); "" means "no rationale".
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

#: Hard cap on a rationale's length; trailing sentences are dropped to fit.
MAX_CHARS = 300
#: Longest piece of action text quoted in a rationale.
MAX_QUOTE = 60
#: An observation at least this long must never appear verbatim in its rationale.
MIN_LEAK_CHARS = 20

from agentworld.domains.base import Describer  # noqa: E402  (re-exported for describers)


# ----------------------------------------------------------------------------- small helpers
def as_int(value: Any) -> int | None:
    """An int (not a bool), or an int-valued float; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def flag(info: Mapping[str, Any], key: str) -> bool:
    return info.get(key) is True


def quote(text: str, limit: int = MAX_QUOTE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def join_sentences(*sentences: str | None) -> str:
    """Sentences joined, each ending with a period, trailing ones dropped to stay under MAX_CHARS."""
    out: list[str] = []
    total = 0
    for sentence in sentences:
        if not sentence:
            continue
        sentence = sentence.strip()
        sentence = sentence[0].upper() + sentence[1:]
        if sentence[-1] not in ".!?":
            sentence += "."
        if out and total + 1 + len(sentence) > MAX_CHARS:
            break
        out.append(sentence)
        total += len(sentence) + (1 if len(out) > 1 else 0)
    return " ".join(out)


def episode_end(info: Mapping[str, Any]) -> str | None:
    if flag(info, "max_steps_reached"):
        return "the step limit is reached and the episode ends"
    return None


def outcome(info: Mapping[str, Any], what: str = "the task") -> str:
    """'the task is solved' / 'the task is not solved' (only called where `solved` is meaningful)."""
    return f"{what} is solved" if flag(info, "solved") else f"{what} is not solved"


def count_of(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def score_change(info: Mapping[str, Any], prev: Mapping[str, Any] | None, of: int | None) -> str | None:
    score, before = as_int(info.get("score")), as_int((prev or {}).get("score"))
    total = f" of {of}" if of else ""
    if score is None:
        return None
    if before is None:
        return f"the score is {score}{total}"
    if score != before:
        return f"the score goes from {before} to {score}{total}"
    return f"the score stays {score}{total}"


# ----------------------------------------------------------------------------- terminal / os
_SIGNALS = {9: "SIGKILL", 15: "SIGTERM", 2: "SIGINT", 6: "SIGABRT", 11: "SIGSEGV", 13: "SIGPIPE"}


def _program(command: str) -> str | None:
    """Program of the last pipeline stage of a shell command (for grep's 'no match' status)."""
    last = re.split(r"\|\|?|&&|;", command)[-1].strip()
    try:
        words = shlex.split(last)
    except ValueError:
        words = last.split()
    while words and re.match(r"^\w+=", words[0]):  # VAR=value prefixes
        words = words[1:]
    return words[0].rsplit("/", 1)[-1] if words else None


def _exit_meaning(code: int, command: str) -> str:
    if code == 0:
        return "exits with status 0 (success)"
    if code == 127:
        return "exits with status 127 (command not found)"
    if code == 126:
        return "exits with status 126 (command not executable)"
    if code == 1 and _program(command) in ("grep", "egrep", "fgrep", "rg"):
        return "exits with status 1: the search finds no matching line"
    if code > 128 and code - 128 in _SIGNALS:
        return f"exits with status {code} (killed by {_SIGNALS[code - 128]})"
    return f"exits with status {code} (failure)"


def describe_shell(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """terminal / os: exit status, timeout, truncation and working-directory change."""
    cwd, before = as_str(info.get("cwd")), as_str((prev or {}).get("cwd"))
    code = as_int(info.get("exit_code"))
    if flag(info, "ended_by_agent") and code is None:
        answer = as_str(info.get("answer"))
        first = f"the agent submits the answer '{quote(answer, 40)}'" if answer else "the agent ends the episode"
        return join_sentences(f"{first}; no command runs", outcome(info) if "solved" in info else None)
    where = f" in {before}" if before else (f" in {cwd}" if cwd and not prev else "")
    if flag(info, "timed_out"):
        first = f"the command runs{where} and times out after the time limit; it is killed"
    elif code is not None:
        first = f"the command runs{where} and {_exit_meaning(code, action)}"
    else:
        first = f"the command runs{where}" if where else ""
    move = f"the working directory changes from {before} to {cwd}" if cwd and before and cwd != before else None
    trunc = "the output is long and gets truncated" if flag(info, "truncated") else None
    solved = "this completes the task" if flag(info, "solved") else None
    if first and move:
        first, move = f"{first}; {move}", None
    return join_sentences(first, move, trunc, solved, episode_end(info))


# ----------------------------------------------------------------------------- generic
def describe_generic(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """Any domain: from the common keys error / is_error / exit_code / solved; '' when none."""
    parts: list[str] = []
    code = as_int(info.get("exit_code"))
    if info.get("error") is True or info.get("is_error") is True:
        parts.append("the action fails with an error")
    elif code is not None:
        parts.append(f"the action exits with status {code}" + (" (success)" if code == 0 else " (failure)"))
    elif info.get("error") is False or info.get("is_error") is False:
        parts.append("the action succeeds without an error")
    if flag(info, "solved"):
        parts.append("the task is solved")
    elif parts and "solved" in info and flag(info, "terminated"):
        parts.append("the episode ends; the task is not solved")
    return join_sentences(*parts)


def describer_of(domain: str) -> Describer:
    """The domain's own describer (`Domain.describer`), or the generic one."""
    from agentworld.domains import find_domain  # the domains import the helpers above

    declared = find_domain(domain)
    return declared.describer if declared is not None and declared.describer is not None else describe_generic


def _scrub(text: str, observation: str) -> str:
    """Drop any sentence that contains a long observation verbatim (the rationale must not leak it)."""
    obs = (observation or "").strip()
    if len(obs) < MIN_LEAK_CHARS or obs not in text:
        return text
    kept = [s for s in re.split(r"(?<=[.!?])\s+", text) if obs not in s]
    text = " ".join(kept)
    return "" if obs in text else text


def rationale(domain: str, action: str, observation: str, info: dict | None,
              previous_info: dict | None, instruction: str = "") -> str:
    """A short grounded rationale for one step ("" = none). `instruction` is accepted for callers
    that have it; the describers state environment state only, so they do not use it."""
    info = info if isinstance(info, Mapping) else {}
    prev = previous_info if isinstance(previous_info, Mapping) else None
    action = action if isinstance(action, str) else ""
    describer = describer_of(domain)
    try:
        text = describer(action, info, prev)
    except Exception:  # noqa: BLE001 -- a rationale must never break data preparation
        text = describe_generic(action, info, prev)
    return _scrub(text, observation if isinstance(observation, str) else "")


def _field(row: Any, name: str, default: Any = None) -> Any:
    if isinstance(row, Mapping):
        return row.get(name, default)
    return getattr(row, name, default)


def episode_rationales(rows: Sequence[Any]) -> list[str]:
    """One rationale per turn of one episode (rows in turn order: dicts or schema.Transition);
    each step sees the previous step's info (None for the first)."""
    out: list[str] = []
    previous: dict | None = None
    for row in rows:
        info = _field(row, "info") or {}
        out.append(rationale(str(_field(row, "domain", "") or ""), _field(row, "action", "") or "",
                             _field(row, "observation", "") or "", info, previous,
                             _field(row, "instruction", "") or ""))
        previous = info if isinstance(info, Mapping) else None
    return out
