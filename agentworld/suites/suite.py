"""The agent test suite file: what `agentworld agent test SUITE` runs and what it must reach.

A suite is YAML, validated by the pydantic models below; an error names the key path
(`cases.1.thresholds.min_success: Input should be less than or equal to 1`). Each case draws
tasks from one domain's task generator (the same seeds give the same tasks in the simulator and
in the real environment), plays them in `environments` (`sim`: a registered world model, `real`:
the domain's real environment, or both), clean and, when `faults` are set, once more per fault
kind with that fault injected at `faults.rate` (the action is not carried out; the agent sees the
domain's error), and checks the thresholds.

    name: terminal-agent
    simulator: {model: models:/agentworld-world-model@champion, verifier: reference}
    cases:
      - name: rename-file
        domain: terminal
        templates: [rename_file]
        episodes: 10
        environments: [sim, real]
        max_steps: 6
        faults: {kinds: [timeout, permission_denied], rate: 0.3}
        thresholds: {min_success: 0.6, max_invalid_rate: 0.3, min_robustness: 0.5}

A recorded system (`agentworld record mcp|http`, `agentworld import openai-chat`) is a domain too:
list it under `recordings: {billing: data/recordings/billing}`; its cases run in `sim`, start
where the recorded sessions started (their instruction, the recorded tools), and are judged by
`success: {action: REGEX, observation: REGEX}` (a step whose action and answer match).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentworld.domains.base import FAULT_MESSAGES

Environment = Literal["sim", "real"]


class SuiteError(ValueError):
    """A suite file that cannot be run; the message names the file and the key path."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SimulatorSpec(_Strict):
    """The world model that answers `sim` cases: a local checkpoint or a `models:/` URI, or an
    OpenAI-compatible server (`base_url` + `model_name`, e.g. `agentworld serve`)."""

    model: str | None = None
    base_url: str | None = None
    model_name: str | None = None
    #: How a simulated episode is judged solved (`agent.rl.sim_success`'s choices).
    verifier: Literal["reference", "world_model", "observation"] = "reference"
    max_new_tokens: int = Field(128, ge=1, le=4096)

    @model_validator(mode="after")
    def _one_source(self) -> SimulatorSpec:
        if bool(self.model) == bool(self.base_url):
            raise ValueError("give either model (a checkpoint or models:/ URI) or base_url (+ model_name)")
        if self.base_url and not self.model_name:
            raise ValueError("base_url needs model_name (the served model's name)")
        return self


class Faults(_Strict):
    kinds: tuple[str, ...] = Field(min_length=1)
    rate: float = Field(gt=0.0, le=1.0)

    @field_validator("kinds")
    @classmethod
    def _known(cls, kinds: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(kinds) - set(FAULT_MESSAGES))
        if unknown:
            raise ValueError(f"unknown fault kind(s) {unknown}; known: {sorted(FAULT_MESSAGES)}")
        return kinds


class SuccessRule(_Strict):
    """Success judged from the episode itself: a step whose action matches `action` and whose
    observation matches `observation` (regular expressions, searched; an omitted one matches any).
    Required for a recorded system (it has no task checker); for a built-in domain it replaces the
    checker's verdict, in the simulator and the real environment alike."""

    action: str | None = None
    observation: str | None = None

    @model_validator(mode="after")
    def _some_rule(self) -> SuccessRule:
        if self.action is None and self.observation is None:
            raise ValueError("give action and/or observation (regular expressions)")
        for pattern in (self.action, self.observation):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as err:
                    raise ValueError(f"{pattern!r} is not a regular expression: {err}") from None
        return self

    def holds(self, action: str, observation: str) -> bool:
        return ((self.action is None or re.search(self.action, action) is not None)
                and (self.observation is None or re.search(self.observation, observation) is not None))


class Thresholds(_Strict):
    #: Success rate each environment must reach on the clean episodes.
    min_success: float | None = Field(None, ge=0.0, le=1.0)
    #: Share of actions the real environment rejected, at most (real episodes only: a simulated
    #: step carries no exit code to tell).
    max_invalid_rate: float | None = Field(None, ge=0.0, le=1.0)
    #: Success under each fault kind / success clean, at least (cases with `faults`).
    min_robustness: float | None = Field(None, ge=0.0)


class Case(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    domain: str
    #: Task templates to draw from (a domain's `agent_templates` are short, checkable ones);
    #: empty: the generator's own choice per seed.
    templates: tuple[str, ...] = ()
    episodes: int = Field(10, ge=1, le=1000)
    first_seed: int = Field(100_000, ge=0)
    environments: tuple[Environment, ...] = Field(("sim",), min_length=1)
    max_steps: int = Field(8, ge=1, le=200)
    faults: Faults | None = None
    #: Simulator controls (sim only): a changed initial state, an invented world.
    perturbation: str | None = None
    fiction: str | None = None
    success: SuccessRule | None = None
    thresholds: Thresholds = Thresholds()

    @field_validator("environments")
    @classmethod
    def _distinct(cls, environments: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(environments)) != len(environments):
            raise ValueError("list each environment once")
        return environments


class Suite(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    simulator: SimulatorSpec | None = None
    #: Recorded systems cases may use as their domain: name -> recording folder (as in params.yaml's
    #: `recordings`; relative to the working directory). Their tasks are the recorded sessions.
    recordings: dict[str, str] = Field(default_factory=dict)
    cases: tuple[Case, ...] = Field(min_length=1)
    #: Cases run in both environments: the share of seeds whose verdicts agree must reach this,
    #: else the case is flagged (the simulator's verdict on it is not to be trusted).
    agreement_threshold: float = Field(0.8, ge=0.0, le=1.0)
    #: Episodes stepped together per case (real envs each in a worker process; agent calls in threads).
    concurrency: int = Field(8, ge=1, le=64)

    @model_validator(mode="after")
    def _simulator_when_needed(self) -> Suite:
        names = [case.name for case in self.cases]
        if len(set(names)) != len(names):
            raise ValueError(f"case names must be distinct: {names}")
        if any("sim" in case.environments for case in self.cases) and self.simulator is None:
            raise ValueError("a case runs in `sim`: give `simulator` (model, or base_url + model_name)")
        from agentworld.domains import all_domains

        known = set(all_domains()) | set(self.recordings)
        for i, case in enumerate(self.cases):
            if case.domain not in known:
                raise ValueError(f"cases.{i}.domain: unknown domain {case.domain!r}; domains: {', '.join(sorted(known))} "
                                 "(a recorded system: list it under `recordings`)")
            if case.domain in self.recordings and (case.environments != ("sim",) or case.success is None):
                raise ValueError(f"cases.{i}: {case.domain!r} is a recorded system: it runs in [sim] only (its real "
                                 "system is not here) and needs `success` (it has no task checker)")
        return self


def load_suite(path: Path) -> Suite:
    """Read and validate a suite file; SuiteError names the file and every bad key path."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such suite file") from None
    except yaml.YAMLError as err:
        raise SuiteError(f"{path}: not valid YAML: {err}") from None
    try:
        return Suite.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in err.errors())
        raise SuiteError(f"{path}: {problems}") from None
