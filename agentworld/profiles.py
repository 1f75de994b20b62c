"""Profiles: overlays of params.yaml, written out whole for a run.

A profile in profiles/ lists only the keys it changes (`extends: demo` is the project's
params.yaml; `extends: research` another profile), and `config.load_params` resolves it as a
JSON Merge Patch. DVC, though, reads each stage's values from params.yaml itself, so a run under
a profile starts by writing params.yaml whole: `agentworld profile research-cpu` (or
`make demo PROFILE=research-cpu`). The demo's comments are kept (ruamel round-trip); a value a
profile sets carries the profile's own comment for it, or says which profile set it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from agentworld.config import (
    BASE_PROFILE,
    DEFAULT_PARAMS_PATH,
    ParamsError,
    load_params,
    overlay_chain,
    parse_params,
    resolve_profile,
)

PROFILES_DIR = Path("profiles")


def profile_path(name_or_path: str | Path, profiles_dir: Path = PROFILES_DIR) -> Path:
    """profiles/NAME.yaml for a bare name, the path itself otherwise; a missing profile is an
    error that lists the ones there are."""
    path = Path(name_or_path)
    if path.suffix not in {".yaml", ".yml"}:
        path = profiles_dir / f"{name_or_path}.yaml"
    if not path.exists():
        there = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.exists() else []
        raise ParamsError(f"{path}: no such profile (profiles: {', '.join(there) or 'none'})")
    return path


def write_profile(profile: str | Path, out: Path = DEFAULT_PARAMS_PATH, profiles_dir: Path = PROFILES_DIR) -> Path:
    """Write `out` as the profile resolved onto its base params.yaml (comments kept), check that
    it loads to the same values the profile does, and return it."""
    path = profile_path(profile, profiles_dir)
    resolved = resolve_profile(path)  # refuses a base that already holds another profile
    params = parse_params(resolved, str(path))
    expected, values = params.model_dump(), params.model_dump(mode="json", by_alias=True)
    base, chain = overlay_chain(path)
    yaml = YAML()
    yaml.width, yaml.preserve_quotes = 4096, True  # keep the demo's lines and quotes as written
    yaml.representer.add_representer(type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    document = yaml.load(base.read_text())
    for overlay in chain:
        patch = yaml.load(overlay.read_text())
        patch.pop("extends", None)
        _apply(document, patch, str(patch.get("profile", overlay.stem)), values)
    name = resolved.get("profile", path.stem)
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    header = (f"# Written by `agentworld profile {name}`: {base.name} with {', '.join(str(p) for p in chain)}\n"
              f"# applied. Edit the profile, not this file, to keep a change;\n"
              f"# `git checkout {DEFAULT_PARAMS_PATH.name}` restores the {BASE_PROFILE}.\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + buffer.getvalue() if name != BASE_PROFILE else buffer.getvalue())
    if load_params(out).model_dump() != expected:
        raise ParamsError(f"{out}: written values differ from {path}'s (a bug in the writer)")
    return out


def _apply(target: CommentedMap, patch: CommentedMap, profile: str, values: dict[str, Any]) -> None:
    """Merge-patch `target` in place, keeping its comments; a set value gets a comment. A key the
    patch removes (null) is written with its schema default (`values`, the resolved settings):
    DVC needs every key a stage tracks to be in params.yaml."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _apply(target[key], value, profile, values.get(key, {}))
            continue
        if value is None and key not in values:
            target.pop(key, None)
            continue
        target[key] = _styled_like(target.get(key), values[key] if value is None else value)
        if key != "profile" and not target.fa.flow_style():  # no comments inside `{a: 1, b: 2}`
            default = ": the default" if value is None else ""
            _note(target, key, _comment_of(patch, key) or f"{profile} profile{default}")


def _styled_like(old: Any, new: Any) -> Any:
    """`new`, in flow style when the value it replaces was (`[a, b]` stays on one line)."""
    if isinstance(new, (CommentedMap, CommentedSeq)) and isinstance(old, (CommentedMap, CommentedSeq)):
        if old.fa.flow_style():
            new.fa.set_flow_style()
    return new


def _comment_of(mapping: CommentedMap, key: str) -> str | None:
    """The end-of-line comment of `key` in `mapping`, without the '#'."""
    token = mapping.ca.items.get(key, [None, None, None, None])[2]
    if token is None or not token.value.lstrip(" ").startswith("#"):
        return None
    return token.value.lstrip(" ").split("\n", 1)[0].lstrip("#").strip() or None


def _note(mapping: CommentedMap, key: str, text: str) -> None:
    """Replace `key`'s end-of-line comment (not the comment lines that follow it) with `text`."""
    token = mapping.ca.items.get(key, [None, None, None, None])[2]
    if token is None:
        mapping.yaml_add_eol_comment(text, key)
        return
    value = token.value  # this line's comment (if any), then the comment and blank lines below it
    rest = value.split("\n", 1)[1] if "\n" in value else ""
    token.value = f"  # {text}\n" + rest
