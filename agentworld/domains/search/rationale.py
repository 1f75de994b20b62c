"""What a search step did, from the env's recorded `info` (see `agentworld.envs.rationale`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentworld.envs.rationale import as_int, as_str, count_of, describe_generic, flag, join_sentences, quote


def _call_arg(action: str) -> str | None:
    match = re.match(r"^\s*\w+\((.*)\)\s*$", action, re.DOTALL)
    return as_str(match.group(1)) if match else None


def describe_search(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """search: query hits, opened document and page, in-page matches, errors, answers."""
    kind = as_str(info.get("action_type"))
    arg = _call_arg(action)
    doc, page = as_str(info.get("open_doc")), as_int(info.get("page"))
    prev_doc = as_str((prev or {}).get("open_doc"))
    error = info.get("error") is True
    at = f"{doc}, page {page}" if doc and page is not None else doc
    if kind == "invalid":
        stay = f"the open document stays {doc}" if doc else None
        return join_sentences("the action is malformed; the engine rejects it with an error", stay)
    if kind == "search":
        first = f"a search query for '{quote(arg, 50)}'" if arg else "a search query"
        results = as_int(info.get("results"))
        if error:
            rest = "the engine rejects the query with an error"
        elif results == 0:
            rest = "it returns no results"
        elif results is not None:
            rest = f"it returns {count_of(results, 'result')}"
        else:
            rest = "it returns results"
        return join_sentences(f"{first}; {rest}")
    if kind == "open":
        if error:
            stay = f"; the open document stays {prev_doc}" if prev_doc else ""
            target = f" '{quote(arg, 50)}'" if arg else ""
            return join_sentences(f"tries to open{target}, but the engine answers with an error{stay}")
        return join_sentences(f"opens {at}" if at else "opens a document")
    if kind == "next_page":
        if error:
            return join_sentences("asks for the next page, but the engine answers with an error")
        return join_sentences(
            f"turns to page {page} of {doc}" if doc and page is not None else "turns to the next page"
        )
    if kind == "find_in_page":
        what = f"'{quote(arg, 40)}'" if arg else "a text"
        where = f" in {at}" if at else " in the open document"
        if error:
            return join_sentences(f"looks for {what}{where}, but the engine answers with an error")
        matches = as_int(info.get("matches"))
        found = (
            f"it finds {count_of(matches, 'matching line')}"
            if matches
            else "it finds no match"
            if matches == 0
            else None
        )
        return join_sentences(f"looks for {what}{where}" + (f"; {found}" if found else ""))
    if kind == "answer":
        first = f"submits the answer '{quote(arg, 50)}'" if arg else "submits an answer"
        return join_sentences(
            f"{first}; the episode ends",
            "the answer is correct" if flag(info, "solved") else "the answer is not correct",
        )
    return describe_generic(action, info, prev)
