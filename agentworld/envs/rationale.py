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

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: Hard cap on a rationale's length; trailing sentences are dropped to fit.
MAX_CHARS = 300
#: Longest piece of action text quoted in a rationale.
MAX_QUOTE = 60
#: An observation at least this long must never appear verbatim in its rationale.
MIN_LEAK_CHARS = 20

Describer = Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], str]


# ----------------------------------------------------------------------------- small helpers
def _int(value: Any) -> int | None:
    """An int (not a bool), or an int-valued float; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _flag(info: Mapping[str, Any], key: str) -> bool:
    return info.get(key) is True


def _quote(text: str, limit: int = MAX_QUOTE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _join(*sentences: str | None) -> str:
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


def _episode_end(info: Mapping[str, Any]) -> str | None:
    if _flag(info, "max_steps_reached"):
        return "the step limit is reached and the episode ends"
    return None


def _outcome(info: Mapping[str, Any], what: str = "the task") -> str:
    """'the task is solved' / 'the task is not solved' (only called where `solved` is meaningful)."""
    return f"{what} is solved" if _flag(info, "solved") else f"{what} is not solved"


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
    cwd, before = _str(info.get("cwd")), _str((prev or {}).get("cwd"))
    code = _int(info.get("exit_code"))
    if _flag(info, "ended_by_agent") and code is None:
        answer = _str(info.get("answer"))
        first = f"the agent submits the answer '{_quote(answer, 40)}'" if answer else "the agent ends the episode"
        return _join(f"{first}; no command runs", _outcome(info) if "solved" in info else None)
    where = f" in {before}" if before else (f" in {cwd}" if cwd and not prev else "")
    if _flag(info, "timed_out"):
        first = f"the command runs{where} and times out after the time limit; it is killed"
    elif code is not None:
        first = f"the command runs{where} and {_exit_meaning(code, action)}"
    else:
        first = f"the command runs{where}" if where else ""
    move = f"the working directory changes from {before} to {cwd}" if cwd and before and cwd != before else None
    trunc = "the output is long and gets truncated" if _flag(info, "truncated") else None
    solved = "this completes the task" if _flag(info, "solved") else None
    if first and move:
        first, move = f"{first}; {move}", None
    return _join(first, move, trunc, solved, _episode_end(info))


# ----------------------------------------------------------------------------- mcp
def _mcp_call(action: str) -> tuple[str | None, list[str]]:
    try:
        data = json.loads(action)
    except (ValueError, TypeError, RecursionError):  # RecursionError: an agent's deeply nested JSON
        return None, []
    if not isinstance(data, dict):
        return None, []
    args = data.get("arguments")
    return _str(data.get("tool")), (sorted(str(k) for k in args) if isinstance(args, dict) else [])


def describe_mcp(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """mcp: which tool on which app, and whether the server returns an error or a result."""
    parsed_tool, arg_names = _mcp_call(action)
    tool = _str(info.get("tool")) or parsed_tool
    app = _str(info.get("app"))
    call = f"call to tool `{tool}`" if tool else "a tool call"
    if app:
        call += f" on the {app} app"
    if arg_names:
        names = ", ".join(arg_names[:5]) + (", …" if len(arg_names) > 5 else "")
        call += f" with arguments {names}"
    if info.get("is_error") is True:
        call += "; the server returns an error"
    elif info.get("is_error") is False:
        call += "; the server returns a result"
    end = None
    if _flag(info, "solved"):
        end = "the task is solved"
    elif _flag(info, "terminated") and "solved" in info:
        end = "the episode ends; the task is not solved"
    return _join(call, end, _episode_end(info))


# ----------------------------------------------------------------------------- search
def _call_arg(action: str) -> str | None:
    match = re.match(r"^\s*\w+\((.*)\)\s*$", action, re.DOTALL)
    return _str(match.group(1)) if match else None


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def describe_search(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """search: query hits, opened document and page, in-page matches, errors, answers."""
    kind = _str(info.get("action_type"))
    arg = _call_arg(action)
    doc, page = _str(info.get("open_doc")), _int(info.get("page"))
    prev_doc = _str((prev or {}).get("open_doc"))
    error = info.get("error") is True
    at = f"{doc}, page {page}" if doc and page is not None else doc
    if kind == "invalid":
        stay = f"the open document stays {doc}" if doc else None
        return _join("the action is malformed; the engine rejects it with an error", stay)
    if kind == "search":
        first = f"a search query for '{_quote(arg, 50)}'" if arg else "a search query"
        results = _int(info.get("results"))
        if error:
            rest = "the engine rejects the query with an error"
        elif results == 0:
            rest = "it returns no results"
        elif results is not None:
            rest = f"it returns {_count(results, 'result')}"
        else:
            rest = "it returns results"
        return _join(f"{first}; {rest}")
    if kind == "open":
        if error:
            stay = f"; the open document stays {prev_doc}" if prev_doc else ""
            target = f" '{_quote(arg, 50)}'" if arg else ""
            return _join(f"tries to open{target}, but the engine answers with an error{stay}")
        return _join(f"opens {at}" if at else "opens a document")
    if kind == "next_page":
        if error:
            return _join("asks for the next page, but the engine answers with an error")
        return _join(f"turns to page {page} of {doc}" if doc and page is not None else "turns to the next page")
    if kind == "find_in_page":
        what = f"'{_quote(arg, 40)}'" if arg else "a text"
        where = f" in {at}" if at else " in the open document"
        if error:
            return _join(f"looks for {what}{where}, but the engine answers with an error")
        matches = _int(info.get("matches"))
        found = (f"it finds {_count(matches, 'matching line')}" if matches
                 else "it finds no match" if matches == 0 else None)
        return _join(f"looks for {what}{where}" + (f"; {found}" if found else ""))
    if kind == "answer":
        first = f"submits the answer '{_quote(arg, 50)}'" if arg else "submits an answer"
        return _join(f"{first}; the episode ends", "the answer is correct" if _flag(info, "solved")
                     else "the answer is not correct")
    return _generic(action, info, prev)


# ----------------------------------------------------------------------------- swe
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
    return _str(data.get("path")) if isinstance(data, dict) else None


def describe_swe(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """swe: what the repository action does, and what its exit status means."""
    kind = _str(info.get("action_type"))
    project = _str(info.get("project"))
    code = _int(info.get("exit_code"))
    timed_out = _flag(info, "timed_out")
    args = _swe_args(action) if kind in ("view", "ls", "search", "run_tests") else []
    of = f" of {project}" if project else ""
    if kind == "invalid":
        return _join("not a valid action; the environment rejects it with an error and nothing runs")
    if kind == "run_tests":
        first = f"runs the tests{of}" + (f" selected by {_quote(args[0], 60)}" if args else "")
        if timed_out:
            return _join(f"{first}; the run times out")
        meaning = _PYTEST_CODES.get(code) if code is not None else None
        if meaning is None and code is not None:
            meaning = f"it exits with status {code}"
        return _join(f"{first}; {meaning}" if meaning else first)
    if kind == "submit":
        first = f"submits the fix; the full test suite{of} runs and the episode ends"
        if timed_out:
            return _join(first, "the test run times out; the task is not solved")
        verdict = ("the tests pass (exit status 0): the task is solved" if _flag(info, "solved")
                   else f"the tests fail (exit status {code}): the task is not solved" if code is not None
                   else _outcome(info))
        return _join(first, verdict)
    failed = code is not None and code != 0
    if kind == "view":
        path = _quote(args[0], 60) if args else "a file"
        lines = f"lines {args[1]} of " if len(args) > 1 else ""
        first = f"views {lines}{path}"
        return _join(f"{first}; the file cannot be read (exit status {code})" if failed else first)
    if kind == "edit":
        path = _edit_path(action)
        first = f"edits {_quote(path, 60)}" if path else "edits a file"
        if failed:
            return _join(f"{first}; the edit is rejected (exit status {code}) and the file is unchanged")
        return _join(f"{first}; the edit applies" if code == 0 else first)
    if kind == "ls":
        path = _quote(args[0], 60) if args else "the repository root"
        return _join(f"lists {path}; the path cannot be listed (exit status {code})" if failed else f"lists {path}")
    if kind == "search":
        pattern = f" for '{_quote(args[0], 40)}'" if args else ""
        inside = f" in {_quote(args[1], 40)}" if len(args) > 1 else ""
        return _join(f"searches the repository{pattern}{inside} with grep")
    if kind == "git_diff":
        return _join("shows the git diff of the changes made so far")
    return _generic(action, info, prev)


# ----------------------------------------------------------------------------- web
_WEB_TARGET = re.compile(r"^\s*(?:click|type|select)\s*\[(\d+)\]")
_WEB_TEXT = re.compile(r'^\s*(?:type|select|stop)\s*(?:\[\d+\]\s*)?"(.*)"\s*$', re.DOTALL)


def _page(info: Mapping[str, Any]) -> str:
    """'(status 200, title 'X'), a page with N interactive elements' from what info holds."""
    bits = []
    status = _int(info.get("status"))
    if status is not None:
        bits.append(f"status {status}")
    title = _str(info.get("title"))
    if title:
        bits.append(f"title '{_quote(title, 50)}'")
    text = f" ({', '.join(bits)})" if bits else ""
    elements = _int(info.get("elements"))
    if elements is not None:
        text += f", a page with {_count(elements, 'interactive element')}"
    return text


def describe_web(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """web: URL change (previous url vs url), status, title, element count, errors."""
    kind = _str(info.get("action_type"))
    url, before = _str(info.get("url")), _str((prev or {}).get("url"))
    target = _WEB_TARGET.match(action)
    element = f"element {target.group(1)}" if target else "an element"
    text = _WEB_TEXT.match(action)
    typed = _quote(text.group(1), 40) if text else None
    blocked = info.get("blocked_urls")
    blocked_note = (f"{_count(len(blocked), 'request')} to blocked URLs are refused"
                    if isinstance(blocked, list) and blocked else None)
    if kind == "stop":
        first = f"stops and submits the answer '{typed}'" if typed else "stops the episode"
        return _join(first, _outcome(info) if "solved" in info else None)
    if info.get("error") is True or kind == "invalid":
        stay = f"; the page stays at {url}" if url else ""
        return _join(f"the action fails with an error{stay}")
    address = re.match(r"^\s*goto\s+(\S+)", action)
    verb = {"click": f"clicking {element}", "back": "going back",
            "goto": f"going to {_quote(address.group(1), 60)}" if address else "going to an address",
            "type": f"typing '{typed}' into {element}" if typed is not None else f"typing into {element}",
            "select": f"selecting '{typed}' in {element}" if typed is not None else f"selecting in {element}",
            "scroll": "scrolling"}.get(kind or "", "the action")
    if url and before and url != before:
        first = f"{verb} navigates from {before} to {url}{_page(info)}"
    elif url and before:
        first = f"{verb} keeps the page at {url}"
        scroll = _int(info.get("scroll_offset"))
        if kind == "scroll" and scroll is not None:
            first += f"; the view now starts at line {scroll}"
        elif _int(info.get("elements")) is not None and _int(info.get("elements")) != _int(prev.get("elements")):
            first += f", which now has {_count(_int(info.get('elements')), 'interactive element')}"
    elif url:
        if kind == "goto":
            first = f"{verb} loads {'the page' if address and address.group(1) == url else url}{_page(info)}"
        else:
            first = f"{verb}; the page is at {url}{_page(info)}"
    else:
        first = verb
    return _join(first, blocked_note, "this completes the task" if _flag(info, "solved") else None,
                 _episode_end(info))


# ----------------------------------------------------------------------------- textworld
def _room(info: Mapping[str, Any] | None) -> str | None:
    """Room name from the description's '-= Room =-' header."""
    description = (info or {}).get("description")
    match = re.search(r"-=\s*(.+?)\s*=-", description) if isinstance(description, str) else None
    return match.group(1) if match else None


def _score_change(info: Mapping[str, Any], prev: Mapping[str, Any] | None, of: int | None) -> str | None:
    score, before = _int(info.get("score")), _int((prev or {}).get("score"))
    total = f" of {of}" if of else ""
    if score is None:
        return None
    if before is None:
        return f"the score is {score}{total}"
    if score != before:
        return f"the score goes from {before} to {score}{total}"
    return f"the score stays {score}{total}"


def describe_textworld(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """textworld: admissibility, score change, room change, inventory change, win/loss."""
    command = f"'{_quote(action, 50)}'"
    score = _score_change(info, prev, _int(info.get("max_score")))
    if info.get("admissible") is False:
        first = f"{command} is not admissible here: the game refuses it"
        return _join(f"{first}; {score}" if score else first)
    parts = [f"{command} is admissible" if info.get("admissible") is True else command]
    if score:
        parts[0] += f"; {score}"
    room, room_before = _room(info), _room(prev)
    if room and room_before and room != room_before:
        parts.append(f"the player moves from the {room_before} to the {room}")
    inv, inv_before = info.get("inventory"), (prev or {}).get("inventory")
    if isinstance(inv, str) and isinstance(inv_before, str) and inv != inv_before:
        parts.append("the inventory changes")
    if _flag(info, "won"):
        parts.append("the game is won")
    elif _flag(info, "lost"):
        parts.append("the game is lost")
    return _join(*parts)


# ----------------------------------------------------------------------------- scienceworld
def describe_scienceworld(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """scienceworld: valid / ambiguous / refused, score change (0..100), completion or failure."""
    score = _score_change(info, prev, None)
    if info.get("valid") is False:
        first = "no known action matches: the simulator refuses it"
        return _join(f"{first}; {score}" if score and "stays" in score else first)
    if _flag(info, "ambiguous"):
        return _join("the action is ambiguous: the simulator asks which of several objects is meant")
    first = "the action is valid" if info.get("valid") is True else f"'{_quote(action, 50)}'"
    parts = [f"{first}; {score}" if score else first]
    if _flag(info, "completed"):
        parts.append("the task is completed")
    elif _flag(info, "failed"):
        parts.append("the task fails")
    return _join(*parts, _episode_end(info))


# ----------------------------------------------------------------------------- generic
def _generic(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """Any domain: from the common keys error / is_error / exit_code / solved; '' when none."""
    parts: list[str] = []
    code = _int(info.get("exit_code"))
    if info.get("error") is True or info.get("is_error") is True:
        parts.append("the action fails with an error")
    elif code is not None:
        parts.append(f"the action exits with status {code}" + (" (success)" if code == 0 else " (failure)"))
    elif info.get("error") is False or info.get("is_error") is False:
        parts.append("the action succeeds without an error")
    if _flag(info, "solved"):
        parts.append("the task is solved")
    elif parts and "solved" in info and _flag(info, "terminated"):
        parts.append("the episode ends; the task is not solved")
    return _join(*parts)


#: Domain -> describer(action, info, previous_info) -> rationale.
DESCRIBERS: dict[str, Describer] = {
    "terminal": describe_shell,
    "os": describe_shell,
    "mcp": describe_mcp,
    "search": describe_search,
    "swe": describe_swe,
    "web": describe_web,
    "textworld": describe_textworld,
    "scienceworld": describe_scienceworld,
}


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
    describer = DESCRIBERS.get(domain, _generic)
    try:
        text = describer(action, info, prev)
    except Exception:  # noqa: BLE001 -- a rationale must never break data preparation
        text = _generic(action, info, prev)
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
