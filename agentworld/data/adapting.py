"""Adapt a retrieved observation to the current action: retrieve, then edit.

A neighbour often answers an action that differs from the current one only in an argument:
`take red apple` vs `take blue key`, `cat notes.txt` vs `cat todo.md`, a tool call on issue 25
vs issue 5. Its observation usually repeats those arguments (`You take the red apple.`,
`cat: notes.txt: No such file or directory`), so substituting the current action's arguments
for the neighbour's yields the right answer where the copy alone is wrong. This is the
retrieve-and-edit idea (Hashimoto et al., 2018, "A Retrieve-and-Edit Framework for Predicting
Structured Outputs") with the simplest edit: the action-to-action difference, applied to the
observation. Whether an edited candidate is trusted is left to the candidate scorer
(agentworld/data/reranker.py), which sees how many substitutions were made.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

#: Words and single punctuation marks: `notes.txt` is three tokens, so `txt -> md` can align.
_TOKEN = re.compile(r"\w+|[^\w\s]")


def substitutions(source: str, target: str) -> dict[str, str]:
    """What turns action `source` into action `target`: each replaced span of tokens (as written
    in the actions), and, where a span has as many tokens on both sides, each replaced word."""
    a = [(m.start(), m.end()) for m in _TOKEN.finditer(source)]
    b = [(m.start(), m.end()) for m in _TOKEN.finditer(target)]
    a_words, b_words = [source[s:e] for s, e in a], [target[s:e] for s, e in b]
    out: dict[str, str] = {}
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=a_words, b=b_words, autojunk=False).get_opcodes():
        if tag != "replace":
            continue
        out[source[a[i1][0]:a[i2 - 1][1]]] = target[b[j1][0]:b[j2 - 1][1]]
        if i2 - i1 == j2 - j1:
            for old, new in zip(a_words[i1:i2], b_words[j1:j2], strict=True):
                if old != new and re.match(r"\w", old):
                    out.setdefault(old, new)
    return out


def _pattern(old: str) -> str:
    """`old` as a whole word where it starts or ends with one (`1` must not match inside `12`)."""
    start = r"(?<!\w)" if re.match(r"\w", old) else ""
    end = r"(?!\w)" if re.search(r"\w$", old) else ""
    return start + re.escape(old) + end


def adapt(observation: str, source_action: str, target_action: str) -> tuple[str, int] | None:
    """`observation` (the answer to `source_action`) with `target_action`'s arguments in place
    of `source_action`'s, and how many substitutions were made; None when nothing changes."""
    subs = {old: new for old, new in substitutions(source_action, target_action).items()
            if old.strip() and old in observation}
    if not subs:
        return None
    pattern = re.compile("|".join(_pattern(old) for old in sorted(subs, key=len, reverse=True)))
    made = 0

    def substitute(match: re.Match[str]) -> str:
        nonlocal made
        made += 1
        return subs[match.group(0)]

    edited = pattern.sub(substitute, observation)
    return (edited, made) if edited != observation else None
