"""The domains: one folder each, found by looking, registered with Gymnasium on import.

`agentworld/domains/<name>/__init__.py` defines `DOMAIN` (an `agentworld.domains.base.Domain`):
the env's entry point and availability probe, its behaviour policies, world-model and agent
prompts, observation-shape rules, rationale describer, judge notes and end actions. Adding a
domain is adding such a folder; nothing else lists domains.

Every domain is a Gymnasium environment::

    import gymnasium, agentworld.domains
    env = gymnasium.make("agentworld/terminal-v1")

`make_env` is the same with the domain's probe in front, so a missing system dependency is
reported with its fix (`EnvUnavailable`) instead of an import error deep inside the env.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import gymnasium

from agentworld.domains.base import Domain, ShapeRule

if TYPE_CHECKING:
    from agentworld.config import SandboxParams
    from agentworld.envs.base import Task, TextEnv
    from agentworld.envs.behaviour import Policy

__all__ = ["Domain", "EnvStatus", "EnvUnavailable", "ShapeRule", "all_domains", "domain_names", "find_domain",
           "get_domain", "list_envs", "make_env", "make_policy", "register_recorded"]


class EnvUnavailable(RuntimeError):
    """The environment exists but cannot run here; the message says why and how to fix it."""


@dataclass(frozen=True)
class EnvStatus:
    name: str
    available: bool
    reason: str
    description: str


def domain_names() -> tuple[str, ...]:
    """The folders of this package that are domains, in alphabetical order."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg))


@cache
def all_domains() -> dict[str, Domain]:
    """Every domain's declaration, by name (imports each folder's light `__init__`)."""
    out: dict[str, Domain] = {}
    for name in domain_names():
        declared = getattr(importlib.import_module(f"{__name__}.{name}"), "DOMAIN", None)
        if not isinstance(declared, Domain) or declared.name != name:
            raise TypeError(f"agentworld/domains/{name}/__init__.py must define DOMAIN = Domain(name={name!r}, ...)")
        out[name] = declared
    return out


#: Domains of recorded user systems (`agentworld.data.recording`), registered by name at run time.
_RECORDED: dict[str, Domain] = {}


def register_recorded(declared: Domain) -> Domain:
    """Make a recorded system's domain known by name (it has no folder here and no Gymnasium env:
    its only environment is the recording and the simulator). A built-in name is refused."""
    if declared.name in all_domains():
        raise ValueError(f"recording {declared.name!r} has the name of a built-in domain; record it under another name")
    _RECORDED[declared.name] = declared
    return declared


def find_domain(name: str) -> Domain | None:
    return all_domains().get(name) or _RECORDED.get(name)


def get_domain(name: str) -> Domain:
    """The domain `name`; a KeyError listing the known ones otherwise."""
    declared = find_domain(name)
    if declared is None:
        raise KeyError(f"unknown environment {name!r}; known domains: {', '.join(domain_names())}")
    return declared


def list_envs() -> list[EnvStatus]:
    """Every domain with its availability on this machine."""
    out = []
    for declared in all_domains().values():
        available, reason = declared.probe()
        out.append(EnvStatus(declared.name, available, reason, declared.description))
    return out


def make_env(name: str, sandbox_params: SandboxParams | None = None, *, process: bool = False) -> TextEnv:
    """`gymnasium.make` of domain `name`; raises EnvUnavailable (with the fix) if it cannot run here.

    The env comes out of its `TimeLimit` so its own attributes (`task`, `verify`) stay reachable;
    its `spec.max_episode_steps` keeps the limit, which a `TextVectorEnv` applies (batched
    stepping goes around wrappers). `gymnasium.make(domain.gym_id)` itself gives the wrapped env;
    `tests/test_env_conformance.py` runs Gymnasium's checks.
    `process=True`: the env runs in a worker process of its own (`agentworld.envs.process`), so
    a vector of them steps in parallel."""
    declared = get_domain(name)
    available, reason = declared.probe()
    if not available:
        raise EnvUnavailable(f"environment {name!r} is unavailable: {reason}")
    from agentworld.config import SandboxParams

    if process:
        from agentworld.envs.process import ProcessEnv

        return ProcessEnv(name, sandbox_params or SandboxParams())
    wrapped = gymnasium.make(declared.gym_id, sandbox_params=sandbox_params or SandboxParams())
    env = wrapped.unwrapped
    env.spec = wrapped.spec  # with the TimeLimit's max_episode_steps (make leaves it off the inner env's spec)
    return env  # type: ignore[return-value]


def make_policy(domain: str, name: str, task: Task) -> Policy:
    """The behaviour policy `name` (scripted, exploratory, erroneous) of `domain` for one episode."""
    return get_domain(domain).policies(name, task)


def lazy(module: str, attribute: str) -> Any:
    """A function of a domain module, imported on first call, so declaring a domain stays light."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)
    call.__name__ = attribute
    return call


def _register_with_gymnasium() -> None:
    for declared in all_domains().values():
        if declared.gym_id not in gymnasium.registry:
            # The env checker is run by the conformance test, not on every make.
            gymnasium.register(id=declared.gym_id, entry_point=declared.entry_point,
                               max_episode_steps=declared.max_episode_steps, disable_env_checker=True)


_register_with_gymnasium()
