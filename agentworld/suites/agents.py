"""The agent under test: any agent, behind one small protocol.

- `OpenAIChatAgent`: an OpenAI-compatible chat endpoint (`--agent-base-url`, `--agent-model`).
  With tools on (the default) each domain's actions are one function tool with a JSON schema
  (`Domain.action_tool`, e.g. `run_command(command)`, MCP's `call_tool(tool, arguments)`) plus a
  `finish` tool for the domain's end action, and the environment's answers come back as `tool`
  messages, so a standard tool-calling agent needs no custom prompt. A reply without a tool call
  is taken as the action text. `--no-agent-tools` sends plain chat (for a model that was trained
  to answer with the action text, such as the platform's own agent behind `vllm serve`).
- `CallableAgent`: a Python function `module:function`, called as
  `function(observations, actions) -> action` (the episode's observations so far, the first
  holding the task, and its actions so far).
- Where an episode lists its own tools (an MCP application's, `Domain.episode_tools`), a
  tool-calling agent gets exactly those, each with the server's input schema.
- `LocalAgent`: a registered `agentworld-agent` version (`models:/agentworld-agent/3`,
  `models:/agentworld-agent@production`) or a local checkpoint, played by the platform's LMAgent.

Each keeps per-episode state: `start(first observation, reset info) -> state`, `act(states) -> actions`
(all running episodes together: batched generation, or concurrent HTTP requests), then
`observe(state, observation)`.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentworld.domains import get_domain
from agentworld.domains.base import ActionTool

if TYPE_CHECKING:
    from agentworld.models.backends import RegistryModel


class AgentError(RuntimeError):
    """The agent under test could not be loaded or reached; the message names the setting."""


class TestedAgent(Protocol):
    name: str

    def start(self, observation: str, info: dict[str, Any]) -> Any: ...

    def act(self, states: Sequence[Any]) -> list[str]: ...

    def observe(self, state: Any, observation: str) -> None: ...


#: domain -> the agent for that domain's cases.
AgentFactory = Callable[[str], TestedAgent]


# ---------------------------------------------------------------- a Python callable
@dataclass
class _History:
    observations: list[str]
    actions: list[str] = field(default_factory=list)


class CallableAgent:
    def __init__(self, function: Callable[[list[str], list[str]], str], name: str) -> None:
        self.function, self.name = function, name

    def start(self, observation: str, info: dict[str, Any]) -> _History:
        return _History([observation])

    def act(self, states: Sequence[_History]) -> list[str]:
        actions = []
        for state in states:
            action = self.function(list(state.observations), list(state.actions))
            if not isinstance(action, str):
                raise AgentError(f"agent {self.name} returned {type(action).__name__}, not the action text (str)")
            state.actions.append(action)
            actions.append(action)
        return actions

    def observe(self, state: _History, observation: str) -> None:
        state.observations.append(observation)


def load_callable(spec: str) -> Callable[[list[str], list[str]], str]:
    """`module:function`, imported with the working directory on the path (a user's own module)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise AgentError(f"--agent {spec}: expected module:function (e.g. my_agent:act)")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as err:
        raise AgentError(f"--agent {spec}: {err}") from None
    if not callable(function):
        raise AgentError(f"--agent {spec}: {attribute} is not callable")
    return function


# ---------------------------------------------------------------- an OpenAI-compatible endpoint
FINISH_TOOL = "finish"


def generic_prompt(domain: str) -> str:
    """The system prompt for an agent the platform did not train (the domain's own if it has one)."""
    declared = get_domain(domain)
    if declared.agent_prompt:
        return declared.agent_prompt
    system = declared.judge_title or f"the {domain} environment"
    return (f"You act in {system}. Complete the task given in the first message, one action per turn; "
            "the environment's answer to each action comes back. Finish when the task is done.")


def end_action(domain: str) -> str | None:
    declared = get_domain(domain)
    if declared.done_action:
        return declared.done_action
    return "submit" if "submit" in declared.end_actions else min(declared.end_actions, default=None)


@dataclass
class _Chat:
    messages: list[dict[str, Any]]
    tools: dict[str, ActionTool]  # the episode's function tools by name
    pending_call: str | None = None  # the tool call id the next observation answers


class OpenAIChatAgent:
    def __init__(self, domain: str, base_url: str, model: str, *, api_key: str = "none", tools: bool = True,
                 temperature: float = 0.0, max_tokens: int = 256, concurrency: int = 8, timeout_s: float = 120.0
                 ) -> None:
        from openai import OpenAI

        self.name = f"{model}@{base_url}"
        self.domain, self.model, self.temperature, self.max_tokens = domain, model, temperature, max_tokens
        self.client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=1)
        self.concurrency, self.use_tools = concurrency, tools
        self.declared = get_domain(domain)
        self.finish = end_action(domain)

    def start(self, observation: str, info: dict[str, Any]) -> _Chat:
        listed = self.declared.episode_tools(info) if self.declared.episode_tools else []
        tools = {tool.name: tool for tool in listed or [self.declared.action_tool]}
        return _Chat([{"role": "system", "content": generic_prompt(self.domain)},
                      {"role": "user", "content": observation}], tools)

    def _schemas(self, state: _Chat) -> list[dict[str, Any]]:
        schemas = [tool.schema() for tool in state.tools.values()]
        if self.finish and FINISH_TOOL not in state.tools:
            schemas.append({"type": "function", "function": {
                "name": FINISH_TOOL, "description": "Say the task is done (ends the episode).",
                "parameters": {"type": "object", "properties": {}}}})
        return schemas

    def act(self, states: Sequence[_Chat]) -> list[str]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(self._act_one, states))

    def _act_one(self, state: _Chat) -> str:
        from openai import OpenAIError

        request: dict[str, Any] = {"model": self.model, "messages": state.messages,
                                   "temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.use_tools:
            request["tools"] = self._schemas(state)
        try:
            message = self.client.chat.completions.create(**request).choices[0].message
        except OpenAIError as err:
            raise AgentError(f"agent endpoint {self.client.base_url} (model {self.model}): {err}") from None
        calls = message.tool_calls or []
        if calls:
            call = calls[0]  # one action per turn: a second call in the same reply is not carried out
            state.messages.append({"role": "assistant", "content": message.content or "",
                                   "tool_calls": [{"id": call.id, "type": "function",
                                                   "function": {"name": call.function.name,
                                                                "arguments": call.function.arguments}}]})
            state.pending_call = call.id
            return self._action(state, call.function.name, call.function.arguments)
        text = (message.content or "").strip()
        state.messages.append({"role": "assistant", "content": text})
        state.pending_call = None
        return text

    def _action(self, state: _Chat, name: str, arguments: str) -> str:
        tool = state.tools.get(name)
        if tool is None and name == FINISH_TOOL and self.finish:
            return self.finish
        if tool is None:
            return f"{name} {arguments}"  # an unknown tool: passed on, for the environment to reject
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return arguments  # arguments that are not JSON: passed on as they are
        return tool.to_action(parsed if isinstance(parsed, dict) else {})

    def observe(self, state: _Chat, observation: str) -> None:
        if state.pending_call is not None:
            state.messages.append({"role": "tool", "tool_call_id": state.pending_call, "content": observation})
        else:
            state.messages.append({"role": "user", "content": observation})


# ---------------------------------------------------------------- the platform's own agent
class LocalAgent:
    """The platform's LMAgent (a registered `agentworld-agent` version or a checkpoint folder)."""

    def __init__(self, domain: str, model_dir: Path, name: str, max_new_tokens: int, observation_chars: int) -> None:
        from agentworld.agents.policy import LMAgent
        from agentworld.models.factory import load_local

        model, tokenizer = load_local(model_dir)
        self.name = name
        self.agent = LMAgent(model, tokenizer, domain, max_new_tokens=max_new_tokens,
                             observation_chars=observation_chars)

    def start(self, observation: str, info: dict[str, Any]) -> Any:
        return self.agent.start(observation)

    def act(self, states: Sequence[Any]) -> list[str]:
        return self.agent.act(list(states))

    def observe(self, state: Any, observation: str) -> None:
        self.agent.observe(state, observation)


def agent_factory(agent: str | None, base_url: str | None, model: str | None, *, api_key: str = "none",
                  tools: bool = True, concurrency: int = 8, cache_root: Path = Path(".cache/models"),
                  max_new_tokens: int = 40, observation_chars: int = 160) -> tuple[AgentFactory, RegistryModel | None]:
    """The agent the command line names: `--agent module:function`, `--agent models:/...` or a
    checkpoint folder, or `--agent-base-url` with `--agent-model`; and its registry version when
    it is a registered one (the run's result is recorded on it)."""
    if bool(agent) == bool(base_url):
        raise AgentError("name the agent under test: --agent (module:function, models:/..., or a folder) "
                         "or --agent-base-url with --agent-model")
    if base_url:
        if not model:
            raise AgentError("--agent-base-url needs --agent-model (the served model's name)")
        return (lambda domain: OpenAIChatAgent(domain, base_url, model, api_key=api_key, tools=tools,
                                               concurrency=concurrency, max_tokens=max_new_tokens)), None
    assert agent is not None
    if agent.startswith("models:/") or Path(agent).is_dir():
        from agentworld.models.backends import BackendError, local_model_dir

        try:
            model_dir, registered = local_model_dir(agent, cache_root)
        except BackendError as err:
            raise AgentError(str(err).replace("--model", "--agent")) from None
        return (lambda domain: LocalAgent(domain, model_dir, agent, max_new_tokens, observation_chars)), registered
    function = load_callable(agent)
    return (lambda domain: CallableAgent(function, agent)), None
