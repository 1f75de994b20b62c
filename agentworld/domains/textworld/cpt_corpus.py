"""The textworld domain's part of the CPT corpus source `game_rules`: TextWorld's command list,
logic rules and game types, read from the installed package's files."""

from __future__ import annotations

import ast
import logging
import re
from importlib.util import find_spec
from pathlib import Path

from agentworld.data.corpora import Document

log = logging.getLogger(__name__)



def _package_dir(name: str) -> Path | None:
    """Directory of an installed package, found without importing it."""
    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _textworld_help(world2inform7: Path) -> str | None:
    """The in-game `help` text, read from the Inform 7 source TextWorld compiles into every game."""
    source = world2inform7.read_text(encoding="utf-8")
    start = source.find("Available commands:")
    end = source.find('Understand "help"', start)
    if start < 0 or end < 0:
        return None
    lines = re.findall(r'say "(.*?)\[line break\]";', source[start - 60:end])
    lines = [re.sub(r"\[[^\]]*\]", "", line) for line in lines]  # drop [fixed letter spacing] etc.
    return "\n".join(lines) if len(lines) > 3 else None


def textworld_rules() -> list[Document]:
    """TextWorld's `help` text, its logic rules (`.twl`: predicates, rules, commands) and game types."""
    root = _package_dir("textworld")
    if root is None:
        log.warning("game_rules: python package 'textworld' is not installed; TextWorld part skipped")
        return []
    docs = []
    help_file = root / "generator" / "inform7" / "world2inform7.py"
    help_text = _textworld_help(help_file) if help_file.is_file() else None
    if help_text is not None:
        docs.append(Document("game_rules", "textworld:help", "TextWorld commands (in-game help)",
                             "TextWorld text adventures understand these commands (output of `help`):\n" + help_text))
    else:
        log.warning("game_rules: TextWorld help text not found in %s", help_file)

    base = root / "generator" / "data" / "logic"
    base_files = {p.name: p.read_text(encoding="utf-8") for p in sorted(base.glob("*.twl"))}
    for name, text in base_files.items():
        docs.append(Document("game_rules", f"textworld:logic/{name}", f"TextWorld logic: {name}",
                             f"TextWorld game logic file {name} (types, predicates, rules, commands):\n{text}"))
    for challenge in sorted((root / "challenges").glob("tw_*")):  # tw_cooking, ...: the game types
        game = "tw-" + challenge.name[3:]
        module = challenge / f"{challenge.name[3:]}.py"
        about = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) if module.is_file() else None
        if about and about.strip():
            docs.append(Document("game_rules", f"textworld:{challenge.name}", f"TextWorld game type {game}",
                                 f"TextWorld game type {game}:\n{about}"))
        for path in sorted((challenge / "textworld_data" / "logic").glob("*.twl")):
            text = path.read_text(encoding="utf-8")
            if base_files.get(path.name) != text:  # only what the game type adds or changes
                docs.append(Document("game_rules", f"textworld:{challenge.name}/logic/{path.name}",
                                     f"TextWorld {game} logic: {path.name}",
                                     f"TextWorld game logic file {path.name} of game type {game}:\n{text}"))
    return docs
