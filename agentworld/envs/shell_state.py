"""The agent's exported variables, read from its saved shell state as data, never run.

The sandbox saves the shell state as a bash script (`declare -p` lines, functions, aliases)
that the agent can also write. Checkers must not source it: `echo 'exit 0' > state.sh` would
then pass every checker. The few tasks about the shell itself ("export APP_MODE", "put a tool
on your PATH") need the exported values, so this reads them the way bash wrote them:
`declare -x NAME="value"` (backslash escapes `"`, `\\`, `$` and backquote), `declare -x
NAME=$'...'` (C escapes) or an unquoted word. Anything else is skipped; a file the agent
scribbled over gives fewer variables, never code.
"""

from __future__ import annotations

import codecs
import re

#: `declare` with flags including x (exported), not an array, then NAME=.
_DECLARE = re.compile(r"^declare -([a-zA-Z-]*) ([A-Za-z_][A-Za-z0-9_]*)=", re.MULTILINE)
_DOUBLE_ESCAPES = {'"', "\\", "$", "`"}
#: Most variables and characters per value a checker is handed.
MAX_VARIABLES, MAX_VALUE_CHARS = 512, 65536


def _double_quoted(text: str, start: int) -> str | None:
    """The value of a "..." string opening at text[start], or None if it never closes."""
    out, i = [], start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in _DOUBLE_ESCAPES:
            out.append(text[i + 1])
            i += 2
            continue
        if ch == '"':
            return "".join(out)
        out.append(ch)
        i += 1
    return None


def _ansi_c_quoted(text: str, start: int) -> str | None:
    """The value of a $'...' string opening at text[start], or None if it never closes."""
    i = start + 2
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "'":
            raw = text[start + 2: i].replace("\\'", "'")
            try:
                return codecs.decode(raw.encode("latin-1", "backslashreplace"), "unicode_escape")
            except (UnicodeDecodeError, ValueError):
                return None
        i += 1
    return None


def exported_variables(state: str) -> dict[str, str]:
    """NAME -> value of every exported scalar variable in a saved shell state."""
    found: dict[str, str] = {}
    for match in _DECLARE.finditer(state):
        flags, name = match.group(1), match.group(2)
        if "x" not in flags or "a" in flags or "A" in flags:
            continue
        start = match.end()
        if state.startswith('"', start):
            value = _double_quoted(state, start)
        elif state.startswith("$'", start):
            value = _ansi_c_quoted(state, start)
        else:
            value = re.match(r"[^\s;]*", state[start:]).group(0)
        if value is not None and len(value) <= MAX_VALUE_CHARS and "\0" not in value:
            found[name] = value
        if len(found) >= MAX_VARIABLES:
            break
    return found
