"""Terminal domain: a real bash in a bubblewrap sandbox, one parametrised shell task per episode.

The observation of a step is exactly what the shell printed (stdout and stderr merged, capped);
the reward is 1.0 at the step where the task's checker first passes. Episodes are
deterministic given the seed: the seed picks the task and its files, file mtimes are fixed,
TZ is UTC, the locale is C.UTF-8 and the umask is 022, so `ls -l` reads the same on every run.
"""

from __future__ import annotations

from typing import Any

from agentworld.config import SandboxParams
from agentworld.domains.terminal import END_ACTIONS
from agentworld.domains.terminal.tasks import AGENT_ENV_PREFIX, generate_task
from agentworld.envs.base import Task, TextEnv, pick_template
from agentworld.envs.sandbox import FIXED_EPOCH, HOME, WORKDIR, CommandResult, Sandbox, SandboxError

PROMPT_USER = "agent@sandbox"


def prompt(cwd: str) -> str:
    """The bash-style prompt line shown after the instruction (`~` for /home/agent)."""
    shown = "~" + cwd[len("/home/agent"):] if cwd.startswith("/home/agent") else cwd
    return f"{PROMPT_USER}:{shown}$"


def first_observation(instruction: str) -> str:
    """What `reset` shows for a task with this instruction."""
    return f"{instruction}\n\n{prompt(WORKDIR)}"


class TerminalEnv(TextEnv):
    """Gymnasium-style text env over a sandboxed bash (see module docstring)."""

    domain = "terminal"
    env_version = "1"

    def __init__(self, sandbox_params: SandboxParams | None = None, *, templates: list[str] | None = None) -> None:
        super().__init__()
        self.sandbox_params = sandbox_params or SandboxParams()
        self.templates = templates
        self._sandbox: Sandbox | None = None
        self._done = True
        self._steps = 0
        self._verdict: tuple[str, bool] | None = None  # (sandbox fingerprint, checker result)

    # ----------------------------------------------------------------- protocol
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self.episode_task(
            seed, options, lambda s, o: generate_task(s, pick_template(s, o, self.templates)))
        self._close_sandbox()
        self._sandbox = Sandbox(self.sandbox_params)
        self._sandbox.start()
        self._apply_setup(task)
        self.task, self._done, self._steps, self._verdict = task, False, 0, None
        observation = first_observation(task.instruction)
        info = {"task_id": task.task_id, "template": task.setup.get("template"),
                "category": task.setup.get("category"), "cwd": WORKDIR, "seed": seed}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self._sandbox is None or self.task is None:
            raise RuntimeError("episode is over (or never started); call reset() first")
        self._steps += 1
        if action.strip() in END_ACTIONS:
            solved = self.check()
            self._done = True
            info = self._info(None, solved)
            info["ended_by_agent"] = True
            return "", float(solved), True, False, info
        result = self._sandbox.run(action)
        solved = self.check()
        self._done = solved
        return result.output, float(solved), solved, False, self._info(result, solved)

    def close(self) -> None:
        self._close_sandbox()
        self._done = True

    def verify(self) -> bool | None:
        """The checker run afresh on the final workspace (the step-time verdict cache dropped)."""
        if self._sandbox is None or self.task is None or not self.task.setup.get("check"):
            return None
        self._verdict = None
        return self.check()

    # ----------------------------------------------------------------- helpers
    def check(self) -> bool:
        """Run the task's checker against the current sandbox state (changes nothing).

        Skipped when nothing changed since the last check (read-only steps such as `ls` or
        `cat`): the verdict is reused, which halves the cost of such steps.
        """
        if self._sandbox is None or self.task is None or not self.task.setup.get("check"):
            return False  # no episode, or a task answered in words rather than by state
        fingerprint = self._sandbox.fingerprint()
        if self._verdict is not None and self._verdict[0] == fingerprint:
            return self._verdict[1]
        agent_env = {f"{AGENT_ENV_PREFIX}{name}": value for name, value in self._sandbox.exported_variables().items()}
        solved = self._sandbox.run(self.task.setup["check"], persist=False, check_env=agent_env).exit_code == 0
        self._verdict = (fingerprint, solved)
        return solved

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            raise RuntimeError("no episode running; call reset() first")
        return self._sandbox

    def _apply_setup(self, task: Task) -> None:
        sandbox = self.sandbox
        setup = task.setup
        sandbox.write_files(setup.get("files", {}))
        lines = [f"cd {WORKDIR}"]
        lines += [f"chmod {mode:o} {path}" for path, mode in setup.get("modes", {}).items()]
        lines.append(f"find {WORKDIR} -exec touch -h -d @{FIXED_EPOCH} {{}} +")
        lines += list(setup.get("commands", []))
        lines.append(f"cd {WORKDIR} && find {WORKDIR} {HOME} /tmp -exec touch -h -d @{FIXED_EPOCH} {{}} +")
        lines += [f"touch -h -d '{when}' {path}" for path, when in setup.get("mtimes", {}).items()]
        script = " &&\n".join(lines)
        result: CommandResult = sandbox.run(script, timeout_s=max(30.0, self.sandbox_params.command_timeout_s))
        if result.exit_code != 0:
            raise SandboxError(f"setup of task {task.task_id} failed (exit {result.exit_code}): {result.output[:500]}")

    def _info(self, result: CommandResult | None, solved: bool) -> dict[str, Any]:
        assert self.task is not None
        info: dict[str, Any] = {"task_id": self.task.task_id, "template": self.task.setup.get("template"),
                                "solved": solved, "step": self._steps, "cwd": self.sandbox.cwd()}
        if result is not None:
            info.update(exit_code=result.exit_code, timed_out=result.timed_out,
                        truncated=result.truncated, duration_s=result.duration_s)
        return info

    def _close_sandbox(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
