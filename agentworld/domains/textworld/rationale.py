"""What a textworld step did, from the env's recorded `info` (see `agentworld.envs.rationale`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentworld.envs.rationale import as_int, flag, join_sentences, quote, score_change


def _room(info: Mapping[str, Any] | None) -> str | None:
    """Room name from the description's '-= Room =-' header."""
    description = (info or {}).get("description")
    match = re.search(r"-=\s*(.+?)\s*=-", description) if isinstance(description, str) else None
    return match.group(1) if match else None


def describe_textworld(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """textworld: admissibility, score change, room change, inventory change, win/loss."""
    command = f"'{quote(action, 50)}'"
    score = score_change(info, prev, as_int(info.get("max_score")))
    if info.get("admissible") is False:
        first = f"{command} is not admissible here: the game refuses it"
        return join_sentences(f"{first}; {score}" if score else first)
    parts = [f"{command} is admissible" if info.get("admissible") is True else command]
    if score:
        parts[0] += f"; {score}"
    room, room_before = _room(info), _room(prev)
    if room and room_before and room != room_before:
        parts.append(f"the player moves from the {room_before} to the {room}")
    inv, inv_before = info.get("inventory"), (prev or {}).get("inventory")
    if isinstance(inv, str) and isinstance(inv_before, str) and inv != inv_before:
        parts.append("the inventory changes")
    if flag(info, "won"):
        parts.append("the game is won")
    elif flag(info, "lost"):
        parts.append("the game is lost")
    return join_sentences(*parts)
