"""Run an agent test suite: every case's episodes in each environment, clean and under faults,
then the case's figures and verdicts.

Per case and environment, `episodes` tasks (seeds `first_seed`, `first_seed + 1`, ...) are played
together through the platform's one episode loop (`run_episodes` over a `TextVectorEnv`): real
envs each in a worker process (their steps run in parallel), simulated ones answered by one
batched generation per step. A step that solves the task (the real checker, or the simulator's
verifier) is a success. Figures: success rate with its 95% Wilson interval, mean steps, the
share of actions the real environment rejected, robustness under each fault kind (success with
that fault injected / success clean; one run per kind), and for cases run in both environments
the share of seeds whose verdicts agree.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress

from agentworld.agents.episodes import task_options
from agentworld.agents.success import invalid_action, solved
from agentworld.envs.base import TextEnv
from agentworld.envs.engine import run_episodes
from agentworld.envs.vector import TextVectorEnv
from agentworld.suites.agents import AgentFactory, TestedAgent
from agentworld.suites.faults import FaultInjectingEnv
from agentworld.suites.suite import Case, SimulatorSpec, Suite

CLEAN = "clean"
#: The variant injecting one fault kind: `fault-timeout`, `fault-rate_limit`, ...
FAULT_PREFIX = "fault-"


def variants(case: Case) -> list[str]:
    """Clean, then one variant per fault kind (robustness is reported under each fault)."""
    return [CLEAN] + [f"{FAULT_PREFIX}{kind}" for kind in (case.faults.kinds if case.faults else ())]
#: Observation characters kept per step in a transcript.
TRANSCRIPT_CHARS = 2000


@dataclass
class EpisodeResult:
    seed: int
    task_id: str
    success: bool
    steps: int
    invalid_actions: int
    faults: int
    transcript: list[dict[str, Any]]  # the first observation, then one entry per step


@dataclass
class RunResult:
    """One case in one environment, clean or under faults."""

    case: str
    environment: str
    variant: str
    episodes: list[EpisodeResult]
    wall_s: float

    @property
    def success_rate(self) -> float:
        return sum(e.success for e in self.episodes) / len(self.episodes)

    @property
    def success_ci(self) -> tuple[float, float]:
        return wilson(sum(e.success for e in self.episodes), len(self.episodes))

    @property
    def mean_steps(self) -> float:
        return sum(e.steps for e in self.episodes) / len(self.episodes)

    @property
    def invalid_rate(self) -> float | None:
        """Rejected actions / actions; None in the simulator (a simulated step carries no exit code)."""
        if self.environment != "real":
            return None
        actions = sum(e.steps - e.faults for e in self.episodes)
        return sum(e.invalid_actions for e in self.episodes) / actions if actions else 0.0


@dataclass
class CaseResult:
    case: Case
    runs: list[RunResult]
    failures: list[str] = field(default_factory=list)  # missed thresholds, in words
    flags: list[str] = field(default_factory=list)  # warnings (low sim-real agreement)

    def run(self, environment: str, variant: str = CLEAN) -> RunResult | None:
        return next((r for r in self.runs if r.environment == environment and r.variant == variant), None)

    def robustness(self, environment: str, variant: str) -> float | None:
        """Success under the fault of `variant` / success clean (None: no clean success to compare)."""
        clean, faulted = self.run(environment), self.run(environment, variant)
        if clean is None or faulted is None or clean.success_rate == 0:
            return None
        return faulted.success_rate / clean.success_rate

    def agreement_counts(self) -> tuple[int, int]:
        """(seeds whose clean verdicts agree between the simulator and the real env, seeds run in both)."""
        sim, real = self.run("sim"), self.run("real")
        if sim is None or real is None:
            return 0, 0
        real_by_seed = {e.seed: e.success for e in real.episodes}
        pairs = [(e.success, real_by_seed[e.seed]) for e in sim.episodes if e.seed in real_by_seed]
        return sum(a == b for a, b in pairs), len(pairs)

    def agreement(self) -> float | None:
        agree, n = self.agreement_counts()
        return agree / n if n else None

    @property
    def passed(self) -> bool:
        return not self.failures


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (sound at 0%, 100% and small n)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


class SuitePolicy:
    """The agent under test as the episode loop's policy (one state per episode)."""

    def __init__(self, agent: TestedAgent, first_observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> None:
        self.agent = agent
        self.states = [agent.start(observation, info) for observation, info in zip(first_observations, infos)]

    def act(self, active: Sequence[int]) -> list[str]:
        return self.agent.act([self.states[k] for k in active])

    def observe(self, index: int, action: str, observation: str, last: bool) -> None:
        if not last:
            self.agent.observe(self.states[index], observation)


class Simulator:
    """The world model behind every `sim` case (loaded once), and the verifier it judges with."""

    def __init__(self, spec: SimulatorSpec, cache_root: Path, max_seq_len: int | None = None) -> None:
        from agentworld.models.backends import OpenAIBackend, TransformersBackend, local_model_dir

        if spec.base_url:
            backend = OpenAIBackend(spec.base_url, spec.model_name or "", spec.max_new_tokens)
            backend.check()
            self.label = f"{spec.model_name}@{spec.base_url}"
        else:
            model_dir, registered = local_model_dir(spec.model or "", cache_root)
            backend = TransformersBackend(model_dir, spec.max_new_tokens, batch_size=16, max_seq_len=max_seq_len)
            self.label = spec.model or str(model_dir)
        self.backend, self.spec = backend, spec

    def envs(self, case: Case, n: int, recording: Any = None) -> tuple[list[TextEnv], Any]:
        """`n` simulated envs of `case`: tasks from the real task generator (the same seeds, the
        same tasks as the real env), or from the recorded sessions of a recorded system (judged by
        the case's `success` rule alone)."""
        from agentworld.simulation.env import Control, RealTaskSource, WorldModelEnv
        from agentworld.simulation.verifiers import make_verifier
        from agentworld.suites.recorded import RecordedSessions

        tasks = RecordedSessions(recording) if recording is not None else RealTaskSource(case.domain)
        control = Control(perturbation=case.perturbation, fiction=case.fiction)
        verifier = make_verifier(self.spec.verifier) if recording is None and case.success is None else None
        envs = [WorldModelEnv(case.domain, self.backend, tasks, control=control, verifier=verifier, retries=1)
                for _ in range(n)]
        return envs, tasks


def _real_envs(case: Case, n: int) -> list[TextEnv]:
    from agentworld.domains import make_env

    return [make_env(case.domain, process=n > 1) for _ in range(n)]


def play_run(agent: TestedAgent, envs: Sequence[TextEnv], case: Case, environment: str, variant: str,
             seeds: Sequence[int]) -> list[EpisodeResult]:
    """Episodes `seeds` of `case` on `envs` (one env per seed), all stepping together."""
    if variant != CLEAN:
        assert case.faults is not None
        envs = [FaultInjectingEnv(env, [variant.removeprefix(FAULT_PREFIX)], case.faults.rate) for env in envs]
    vector = TextVectorEnv(list(envs), max_episode_steps=case.max_steps)
    options = {"env_options": [task_options(list(case.templates), seed) for seed in seeds]}
    observations, infos = vector.reset(seed=list(seeds), options=options)
    episodes = [EpisodeResult(seed, envs[k].task.task_id if envs[k].task else str(seed), False, 0, 0, 0,
                              [{"observation": observations[k][:TRANSCRIPT_CHARS]}])
                for k, seed in enumerate(seeds)]
    reset_infos = [infos["step_info"][k] or {} for k in range(len(seeds))]
    for step in run_episodes(vector, SuitePolicy(agent, observations, reset_infos)):
        episode = episodes[step.index]
        episode.steps += 1
        fault = step.info.get("fault")
        episode.faults += fault is not None
        episode.invalid_actions += fault is None and invalid_action(step.action, step.info)
        episode.success = episode.success or (case.success.holds(step.action, step.observation) if case.success
                                              else solved(step.reward, step.info))
        episode.transcript.append({"action": step.action, "observation": step.observation[:TRANSCRIPT_CHARS],
                                   "reward": step.reward, **({"fault": fault} if fault else {})})
    return episodes


def run_suite(suite: Suite, agents: AgentFactory, *, cache_root: Path = Path(".cache/models"),
              max_seq_len: int | None = None) -> list[CaseResult]:
    """Every case of `suite`, with a progress bar over case x environment x variant."""
    recordings = load_recordings(suite)
    simulator = Simulator(suite.simulator, cache_root, max_seq_len) if suite.simulator else None
    plan = [(case, environment, variant) for case in suite.cases for environment in case.environments
            for variant in variants(case)]
    results = {case.name: CaseResult(case, []) for case in suite.cases}
    agent_by_domain: dict[str, TestedAgent] = {}
    with Progress(transient=True) as progress:
        bar = progress.add_task(f"suite {suite.name}", total=len(plan))
        for case, environment, variant in plan:
            progress.update(bar, description=f"{case.name} [{environment}, {variant}]")
            if case.domain not in agent_by_domain:  # one agent per domain (a local model loads once)
                agent_by_domain[case.domain] = agents(case.domain)
            agent = agent_by_domain[case.domain]
            seeds = [case.first_seed + i for i in range(case.episodes)]
            started = time.monotonic()
            episodes: list[EpisodeResult] = []
            for first in range(0, len(seeds), suite.concurrency):
                chunk = seeds[first:first + suite.concurrency]
                episodes += _play_chunk(agent, simulator, case, environment, variant, chunk,
                                        recordings.get(case.domain))
            results[case.name].runs.append(RunResult(case.name, environment, variant, episodes,
                                                     time.monotonic() - started))
            progress.advance(bar)
    for result in results.values():
        judge(result, suite.agreement_threshold)
    return list(results.values())


def load_recordings(suite: Suite) -> dict[str, Any]:
    """The suite's recorded systems, each registered as a domain (its prompt, shape rules, tools)."""
    from agentworld.data.recording.recording import Recording, RecordingError

    loaded = {}
    for name, folder in suite.recordings.items():
        try:
            recording = Recording.load(Path(folder), name)
            recording.domain()
        except RecordingError as err:
            raise ValueError(f"recordings.{name}: {err}") from None
        loaded[name] = recording
    return loaded


def _play_chunk(agent: TestedAgent, simulator: Simulator | None, case: Case, environment: str, variant: str,
                seeds: Sequence[int], recording: Any = None) -> list[EpisodeResult]:
    owned = None
    if environment == "sim":
        assert simulator is not None
        envs, owned = simulator.envs(case, len(seeds), recording)
    else:
        envs = _real_envs(case, len(seeds))
    try:
        return play_run(agent, envs, case, environment, variant, seeds)
    finally:
        for env in envs:
            env.close()
        if owned is not None:
            owned.close()


def judge(result: CaseResult, agreement_threshold: float) -> None:
    """The case's missed thresholds (failures) and low sim-real agreement (a flag)."""
    thresholds = result.case.thresholds
    for run in result.runs:
        if run.variant != CLEAN:
            continue
        if thresholds.min_success is not None and run.success_rate < thresholds.min_success:
            result.failures.append(f"{run.environment}: success {run.success_rate:.2f} < min_success "
                                   f"{thresholds.min_success:.2f}")
        invalid = run.invalid_rate
        if thresholds.max_invalid_rate is not None and invalid is not None and invalid > thresholds.max_invalid_rate:
            result.failures.append(f"{run.environment}: invalid-action rate {invalid:.2f} > max_invalid_rate "
                                   f"{thresholds.max_invalid_rate:.2f}")
        for variant in variants(result.case)[1:]:
            if thresholds.min_robustness is None or result.run(run.environment, variant) is None:
                continue
            robustness = result.robustness(run.environment, variant)
            kind = variant.removeprefix(FAULT_PREFIX)
            if robustness is None:
                result.failures.append(f"{run.environment}: robustness under {kind} undefined (no clean success) "
                                       f"< min_robustness {thresholds.min_robustness:.2f}")
            elif robustness < thresholds.min_robustness:
                result.failures.append(f"{run.environment}: robustness under {kind} {robustness:.2f} < "
                                       f"min_robustness {thresholds.min_robustness:.2f}")
    agreement = result.agreement()
    if agreement is not None and agreement < agreement_threshold:
        result.flags.append(f"sim-real agreement {agreement:.2f} < {agreement_threshold:.2f}: the simulator's "
                            "verdict on this case is not to be trusted")
