"""Which real environments exist, whether each can run on this machine, and how to build one.

A domain plugs in with one `register(EnvSpec(...))` call: a factory, a probe that says
whether its system dependencies are present (and, if not, how to install them), and the
domain's behaviour policies. Factories import their module lazily, so listing environments
never needs a domain's heavy deps.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentworld.config import SandboxParams
from agentworld.envs.base import Task, TextEnv
from agentworld.envs.behaviour import Policy


class EnvUnavailable(RuntimeError):
    """The environment exists but cannot run here; the message says why and how to fix it."""


@dataclass(frozen=True)
class EnvSpec:
    name: str
    description: str
    factory: Callable[[SandboxParams], TextEnv]
    probe: Callable[[], tuple[bool, str]]
    policies: Callable[[str, Task], Policy]  # (policy name, episode task) -> behaviour policy


@dataclass(frozen=True)
class EnvStatus:
    name: str
    available: bool
    reason: str
    description: str


_REGISTRY: dict[str, EnvSpec] = {}


def register(spec: EnvSpec) -> None:
    if spec.name in _REGISTRY:
        raise ValueError(f"environment {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec


def list_envs() -> list[EnvStatus]:
    """Every registered environment with its availability on this machine."""
    out = []
    for spec in _REGISTRY.values():
        available, reason = spec.probe()
        out.append(EnvStatus(spec.name, available, reason, spec.description))
    return out


def make_env(name: str, sandbox_params: SandboxParams | None = None) -> TextEnv:
    """Build environment `name`; raises EnvUnavailable (with the fix) if it cannot run here."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise KeyError(f"unknown environment {name!r}; registered: {', '.join(sorted(_REGISTRY)) or 'none'}")
    available, reason = spec.probe()
    if not available:
        raise EnvUnavailable(f"environment {name!r} is unavailable: {reason}")
    return spec.factory(sandbox_params or SandboxParams())


def make_policy(domain: str, name: str, task: Task) -> Policy:
    """The behaviour policy `name` (scripted, exploratory, erroneous) of `domain` for one episode."""
    spec = _REGISTRY.get(domain)
    if spec is None:
        raise KeyError(f"unknown environment {domain!r}; registered: {', '.join(sorted(_REGISTRY)) or 'none'}")
    return spec.policies(name, task)


# ---------------------------------------------------------------- built-in domains
def _terminal_probe() -> tuple[bool, str]:
    from agentworld.envs.sandbox import sandbox_available
    return sandbox_available()


def _terminal_factory(params: SandboxParams) -> TextEnv:
    from agentworld.envs.terminal import TerminalEnv
    return TerminalEnv(params)


def _terminal_policies(name: str, task: Task) -> Policy:
    from agentworld.envs.policies import make_policy as terminal_policy
    return terminal_policy(name, task)


register(EnvSpec("terminal", "bash in a bubblewrap sandbox (no network), parametrised shell tasks",
                 _terminal_factory, _terminal_probe, _terminal_policies))


def _lazy(module: str, name: str) -> Callable[..., Any]:
    """A function of a domain module, imported on first call, so listing envs stays light."""
    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args)
    return call


_SCIENCEWORLD = "agentworld.envs.scienceworld_env"
register(EnvSpec("scienceworld", "ScienceWorld (bundled Java simulator): short science tasks, one train variation "
                 "per episode", _lazy(_SCIENCEWORLD, "factory"), _lazy(_SCIENCEWORLD, "probe"),
                 _lazy(_SCIENCEWORLD, "scienceworld_policy")))

_TEXTWORLD = "agentworld.envs.textworld_env"
register(EnvSpec("textworld", "TextWorld (games generated locally with tw-make): simple, coin-collector, "
                 "treasure-hunter and cooking text adventures, one game per seed", _lazy(_TEXTWORLD, "factory"),
                 _lazy(_TEXTWORLD, "probe"), _lazy(_TEXTWORLD, "textworld_policy")))


_OS = "agentworld.envs.os_env"
register(EnvSpec("os", "system administration on a seeded Linux server (bubblewrap, no network, root of a user "
                 "namespace): users/groups, permissions, processes, systemd units, disk usage, logs, dpkg, cron",
                 _lazy(_OS, "factory"), _lazy(_OS, "probe"), _lazy(_OS, "os_policy")))

_SEARCH = "agentworld.envs.search_env"
register(EnvSpec("search", "SQLite FTS5 (BM25) search engine over CPython's documentation (pydoc topics and "
                 "~150 stdlib modules): search/open/find_in_page/next_page/answer, questions verified in the corpus",
                 _lazy(_SEARCH, "factory"), _lazy(_SEARCH, "probe"), _lazy(_SEARCH, "search_policy")))

_MCP = "agentworld.envs.mcp.env"
register(EnvSpec("mcp", "SaaS apps behind real MCP servers (official SDK over stdio): issue tracker, CRM and online "
                 "shop on seeded SQLite; tool calls as JSON, verified on the database",
                 _lazy(_MCP, "factory"), _lazy(_MCP, "probe"), _lazy(_MCP, "mcp_policy")))

_SWE = "agentworld.envs.swe_env"
register(EnvSpec("swe", "fix an injected, test-verified bug in a real PyPI project (inflection, toolz, tabulate, "
                 "more-itertools) as a git repository in the sandbox: ls/view/search/edit/run_tests/git diff/submit",
                 _lazy(_SWE, "factory"), _lazy(_SWE, "probe"), _lazy(_SWE, "swe_policy")))

_WEB = "agentworld.envs.web.env"
register(EnvSpec("web", "Agora, a Flask shop and forum on seeded SQLite, in headless Chromium via Playwright: login, "
                 "search, orders, reviews, forum posts, account settings; accessibility-tree observations",
                 _lazy(_WEB, "factory"), _lazy(_WEB, "probe"), _lazy(_WEB, "web_policy")))

# ---------------------------------------------------------------- android: listed, never faked
ANDROID_NEEDS = ("emulator", "adb")


def _android_probe() -> tuple[bool, str]:
    """Android needs the SDK emulator, adb, hardware virtualisation (KVM) and a system image.

    None of these can be installed from PyPI or Debian here, so the domain is listed with the
    reason instead of pretending with a simulated phone.
    """
    import shutil
    from pathlib import Path

    missing = [tool for tool in ANDROID_NEEDS if shutil.which(tool) is None]
    if missing or not Path("/dev/kvm").exists():
        what = ", ".join([*(f"'{t}' not on PATH" for t in missing),
                          *([] if Path("/dev/kvm").exists() else ["/dev/kvm absent (no hardware virtualisation)"])])
        return False, (f"no Android emulator can run on this machine: {what}; it needs the Android SDK "
                       "emulator with a system image (AVD) on a host with KVM")
    return False, "Android SDK found, but no AgentWorld adapter for the Android emulator exists yet"


def _android_factory(params: SandboxParams) -> TextEnv:
    raise EnvUnavailable(_android_probe()[1])


def _android_policies(name: str, task: Task) -> Policy:
    raise EnvUnavailable(_android_probe()[1])


register(EnvSpec("android", "Android apps on an emulator (AndroidWorld-style UI tasks)",
                 _android_factory, _android_probe, _android_policies))
