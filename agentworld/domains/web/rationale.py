"""What a web step did, from the env's recorded `info` (see `agentworld.envs.rationale`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentworld.envs.rationale import as_int, as_str, count_of, episode_end, flag, join_sentences, outcome, quote

_WEB_TARGET = re.compile(r"^\s*(?:click|type|select)\s*\[(\d+)\]")
_WEB_TEXT = re.compile(r'^\s*(?:type|select|stop)\s*(?:\[\d+\]\s*)?"(.*)"\s*$', re.DOTALL)


def _page(info: Mapping[str, Any]) -> str:
    """'(status 200, title 'X'), a page with N interactive elements' from what info holds."""
    bits = []
    status = as_int(info.get("status"))
    if status is not None:
        bits.append(f"status {status}")
    title = as_str(info.get("title"))
    if title:
        bits.append(f"title '{quote(title, 50)}'")
    text = f" ({', '.join(bits)})" if bits else ""
    elements = as_int(info.get("elements"))
    if elements is not None:
        text += f", a page with {count_of(elements, 'interactive element')}"
    return text


def describe_web(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """web: URL change (previous url vs url), status, title, element count, errors."""
    kind = as_str(info.get("action_type"))
    url, before = as_str(info.get("url")), as_str((prev or {}).get("url"))
    target = _WEB_TARGET.match(action)
    element = f"element {target.group(1)}" if target else "an element"
    text = _WEB_TEXT.match(action)
    typed = quote(text.group(1), 40) if text else None
    blocked = info.get("blocked_urls")
    blocked_note = (
        f"{count_of(len(blocked), 'request')} to blocked URLs are refused"
        if isinstance(blocked, list) and blocked
        else None
    )
    if kind == "stop":
        first = f"stops and submits the answer '{typed}'" if typed else "stops the episode"
        return join_sentences(first, outcome(info) if "solved" in info else None)
    if info.get("error") is True or kind == "invalid":
        stay = f"; the page stays at {url}" if url else ""
        return join_sentences(f"the action fails with an error{stay}")
    address = re.match(r"^\s*goto\s+(\S+)", action)
    verb = {
        "click": f"clicking {element}",
        "back": "going back",
        "goto": f"going to {quote(address.group(1), 60)}" if address else "going to an address",
        "type": f"typing '{typed}' into {element}" if typed is not None else f"typing into {element}",
        "select": f"selecting '{typed}' in {element}" if typed is not None else f"selecting in {element}",
        "scroll": "scrolling",
    }.get(kind or "", "the action")
    if url and before and url != before:
        first = f"{verb} navigates from {before} to {url}{_page(info)}"
    elif url and before:
        first = f"{verb} keeps the page at {url}"
        scroll = as_int(info.get("scroll_offset"))
        if kind == "scroll" and scroll is not None:
            first += f"; the view now starts at line {scroll}"
        elif as_int(info.get("elements")) is not None and as_int(info.get("elements")) != as_int(prev.get("elements")):
            first += f", which now has {count_of(as_int(info.get('elements')), 'interactive element')}"
    elif url:
        if kind == "goto":
            first = f"{verb} loads {'the page' if address and address.group(1) == url else url}{_page(info)}"
        else:
            first = f"{verb}; the page is at {url}{_page(info)}"
    else:
        first = verb
    return join_sentences(
        first, blocked_note, "this completes the task" if flag(info, "solved") else None, episode_end(info)
    )
