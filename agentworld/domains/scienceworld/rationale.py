"""What a scienceworld step did, from the env's recorded `info` (see `agentworld.envs.rationale`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentworld.envs.rationale import episode_end, flag, join_sentences, quote, score_change


def describe_scienceworld(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """scienceworld: valid / ambiguous / refused, score change (0..100), completion or failure."""
    score = score_change(info, prev, None)
    if info.get("valid") is False:
        first = "no known action matches: the simulator refuses it"
        return join_sentences(f"{first}; {score}" if score and "stays" in score else first)
    if flag(info, "ambiguous"):
        return join_sentences("the action is ambiguous: the simulator asks which of several objects is meant")
    first = "the action is valid" if info.get("valid") is True else f"'{quote(action, 50)}'"
    parts = [f"{first}; {score}" if score else first]
    if flag(info, "completed"):
        parts.append("the task is completed")
    elif flag(info, "failed"):
        parts.append("the task fails")
    return join_sentences(*parts, episode_end(info))
