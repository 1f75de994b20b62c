"""What a domain declares: the one object the shared layers ask about a domain.

A domain is a folder `agentworld/domains/<name>/` whose `__init__.py` defines `DOMAIN`, a
`Domain`. Data, validation, evaluation, simulation and agents hold no per-domain tables: they
read the world-model prompt, the observation-shape rules, the judge's notes, the rationale
describer, the end actions and the agent prompt from here. Everything a `Domain` names is light
to import; the environment itself is an entry point string that Gymnasium imports on `make`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agentworld.envs.base import Task
    from agentworld.envs.behaviour import Policy

#: describer(action, info, previous info) -> what the step did, in a sentence or two ('' if unknown).
Describer = Callable[[str, Mapping[str, Any], "Mapping[str, Any] | None"], str]
ShapeKind = Literal["json", "regex", "non_empty"]


@dataclass(frozen=True)
class ShapeRule:
    """One rule on the observations of a domain (optionally only after some action verbs).

    The same rule is compiled into the Great Expectations suite that quarantines collected rows
    (`agentworld.validation.domains`) and checked by the judge (`scoring.judge.shape_problems`).
    """

    why: str
    kind: ShapeKind
    regex: str | None = None
    verbs: tuple[str, ...] = ()  # only observations of these action verbs (`search`, `click`, ...)
    skip_verbs: tuple[str, ...] = ()  # never observations of these action verbs

    def applies(self, verb: str) -> bool:
        return (not self.verbs or verb in self.verbs) and verb not in self.skip_verbs

    def holds(self, observation: str) -> bool:
        """Whether `observation` keeps this rule (what the GE expectation checks row by row)."""
        if self.kind == "json":
            try:
                json.loads(observation)
            except ValueError:
                return False
            return True
        if self.kind == "regex":
            return re.search(self.regex or "", observation) is not None
        return len(observation) >= 1


@dataclass(frozen=True)
class ActionTool:
    """How a tool-calling agent (an OpenAI-style function tool) sends this domain's actions, so a
    standard tool-calling agent needs no custom prompt. Most domains take one free-text action
    (`text_tool`); the MCP domain takes a tool name and its arguments."""

    name: str
    description: str
    #: JSON schema of the tool's arguments.
    parameters: Mapping[str, Any]
    #: The tool call's arguments -> the env's action text.
    to_action: Callable[[Mapping[str, Any]], str]

    def schema(self) -> dict[str, Any]:
        """The OpenAI chat-completions `tools` entry."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.parameters)}}


def text_tool(name: str, argument: str, description: str) -> ActionTool:
    """A tool whose one string argument is the action itself."""
    def to_action(arguments: Mapping[str, Any]) -> str:
        return str(arguments.get(argument, ""))
    return ActionTool(name, description, {"type": "object", "properties": {argument: {"type": "string"}},
                                          "required": [argument]}, to_action)


#: What an injected fault tells the agent (agent tests' `faults`); the action was not carried out.
FAULT_MESSAGES: dict[str, str] = {
    "timeout": "the operation timed out after 30 s; nothing was done",
    "rate_limit": "rate limit exceeded (429 Too Many Requests); retry later",
    "tool_error": "internal error in the tool; the action was not carried out",
    "permission_denied": "permission denied",
    "unavailable": "service unavailable (503); the action was not carried out",
}


def plain_fault(kind: str, action: str) -> str:
    return f"Error: {FAULT_MESSAGES[kind]}"


#: The shell domains' (terminal, os) tool and fault format, shared.
SHELL_TOOL = text_tool("run_command", "command", "Run one bash command line in the shell; its output comes back.")


def shell_fault(kind: str, action: str) -> str:
    return f"bash: {FAULT_MESSAGES[kind]}"


def _no_policies(name: str, task: Task) -> Policy:
    raise NotImplementedError("this domain has no behaviour policies")


@dataclass(frozen=True)
class Domain:
    """Everything the platform knows about one domain."""

    name: str
    #: One line for `agentworld envs list`.
    description: str
    #: `module:callable` building the env from `sandbox_params` (what `gymnasium.make` calls).
    entry_point: str
    #: () -> (available, reason): whether the env's system dependencies are present and, if not, the fix.
    probe: Callable[[], tuple[bool, str]]
    #: (policy name, episode task) -> behaviour policy (scripted, exploratory, erroneous).
    policies: Callable[[str, Task], Policy] = _no_policies
    #: The world model's system prompt: what it simulates and what its answers look like.
    world_model_prompt: str = ""
    #: Observation-shape rules (validation suite and judge).
    shape_rules: tuple[ShapeRule, ...] = ()
    #: What the step did to the recorded state, from the env's `info` (rationales of SFT targets).
    describer: Describer | None = None
    #: The judge's title of the system ("a Linux bash shell in a sandbox"), format and content notes.
    judge_title: str = ""
    judge_format: str = ""
    judge_notes: str = "Deterministic content must match; prose need only be plausible."
    #: The working directory an episode starts in, where the domain has one the judge can follow
    #: through `cd` actions (its `pwd` consistency check).
    start_cwd: str | None = None
    #: instruction -> the first observation `reset` shows, rebuilt from a recorded row (rows keep
    #: only the instruction); None where it cannot be rebuilt (a TextWorld game's opening text).
    first_observation: Callable[[str], str] | None = None
    #: Actions that end an episode (as the real env treats them; the simulator does the same).
    end_actions: frozenset[str] = frozenset()
    #: A regular expression that matches the real observation of the step that solves the task
    #: and no other (TextWorld: the game's closing lines after a full score); the simulator's
    #: `observation` verifier looks for it in the world model's predicted observation.
    success_marker: str | None = None
    #: The registered step limit (`gymnasium.make` wraps the env in `TimeLimit`); the pipeline's
    #: own limits (`collect.max_steps`, `agent.max_steps`, ...) override it.
    max_episode_steps: int = 50
    #: The agent's system prompt and its done action, for domains agents are trained on.
    agent_prompt: str | None = None
    done_action: str | None = None
    #: Every task template (TextWorld: game type) an agent may be given, and the default ones
    #: (`agent.templates`): short tasks the real environment checks.
    task_templates: Callable[[], Sequence[str]] | None = None
    agent_templates: tuple[str, ...] = ()
    #: CPT corpus sources this domain contributes: source name -> builder of its documents.
    corpus_sources: Mapping[str, Callable[[], list[Any]]] = field(default_factory=dict)
    #: The tool a tool-calling agent acts through (`agentworld agent test`).
    action_tool: ActionTool = field(default_factory=lambda: text_tool(
        "act", "action", "Take one action in the environment; its answer comes back."))
    #: The episode's reset info -> its own tools, where the environment lists them (the MCP
    #: application's tools with their input schemas); None or [] falls back to `action_tool`.
    episode_tools: Callable[[Mapping[str, Any]], list[ActionTool]] | None = None
    #: (fault kind, action) -> the observation an injected fault shows, in the domain's own format.
    fault_observation: Callable[[str, str], str] = plain_fault

    @property
    def gym_id(self) -> str:
        """The Gymnasium id: `gymnasium.make(domain.gym_id, sandbox_params=...)`."""
        return f"agentworld/{self.name}-v1"
