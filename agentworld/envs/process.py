"""ProcessEnv: a real environment in a worker process of its own, so a vector of them steps in
parallel.

A world model batches many episodes into one generation; a real environment cannot, so a
`TextVectorEnv` of in-process real envs steps them one after the other. A vector of
`ProcessEnv`s sends every sub-env its action first and then collects the answers, so their
sandboxes, servers and browsers work at the same time on separate cores (Gymnasium's
`AsyncVectorEnv` does the same; it is not used directly because its autoreset and per-key info
arrays do not fit episodes of different lengths, see agentworld/envs/vector.py).

The env in the worker is `agentworld.domains.make_env(domain, sandbox_params)`, started with
`spawn` (a fresh interpreter: no inherited threads or trainer state). Its `task` is mirrored
after every reset and step; an exception in the worker is raised here with the worker's
traceback; a worker that dies is reported with its exit code. `close()` stops the worker.
"""

from __future__ import annotations

import multiprocessing
import traceback
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import gymnasium

from agentworld.envs.base import StepResult, TextEnv

if TYPE_CHECKING:
    from agentworld.config import SandboxParams

#: Seconds to wait for one answer of the worker (a real env's own timeouts are far shorter).
ANSWER_TIMEOUT_S = 600.0


class EnvWorkerError(RuntimeError):
    """The worker's env raised (its traceback is in the message) or the worker died."""


def _serve(conn: Connection, domain: str, sandbox_params: SandboxParams | None) -> None:
    """The worker: make the env, then answer (command, *args) messages until `close`."""
    env: TextEnv | None = None
    try:
        from agentworld.domains import make_env

        env = make_env(domain, sandbox_params)
        conn.send(("ok", None))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", _describe(exc)))
        return
    try:
        while True:
            command, *args = conn.recv()
            try:
                if command == "reset":
                    observation, info = env.reset(seed=args[0], options=args[1])
                    answer: Any = (observation, info, env.task)
                elif command == "step":
                    answer = (env.step(args[0]), env.task)
                elif command == "verify":
                    answer = env.verify()
                elif command == "close":
                    env.close()
                    conn.send(("ok", None))
                    return
                else:
                    raise ValueError(f"unknown command {command!r}")
                conn.send(("ok", answer))
            except Exception as exc:  # noqa: BLE001 - the env's error goes to the parent
                conn.send(("error", _describe(exc)))
    except (EOFError, KeyboardInterrupt):  # the parent went away
        pass
    finally:
        env.close()


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).rstrip()


def _stop(conn: Connection, process: multiprocessing.process.BaseProcess) -> None:
    """Ask the worker to close its env, then make sure it is gone."""
    if process.is_alive():
        try:
            conn.send(("close",))
            if conn.poll(30):
                conn.recv()
        except (OSError, EOFError):
            pass
        process.join(30)
    if process.is_alive():
        process.kill()
        process.join(5)
    conn.close()


class ProcessEnv(TextEnv):
    """Domain `domain`'s real env, run in a worker process; the same contract as the env itself."""

    def __init__(self, domain: str, sandbox_params: SandboxParams | None = None) -> None:
        super().__init__()
        self.domain = domain
        from agentworld.domains import get_domain

        self.spec = gymnasium.spec(get_domain(domain).gym_id)  # the registered step limit, as make_env's env has
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, domain, sandbox_params),
                                        name=f"agentworld-env-{domain}", daemon=True)
        self._process.start()
        child.close()
        self._closer = weakref.finalize(self, _stop, self._conn, self._process)
        self._answer()  # the env was made (or its error, e.g. EnvUnavailable's fix, is raised here)

    def _answer(self) -> Any:
        if not self._conn.poll(ANSWER_TIMEOUT_S):
            raise EnvWorkerError(f"{self.domain} env worker gave no answer in {ANSWER_TIMEOUT_S:.0f} s")
        try:
            status, payload = self._conn.recv()
        except EOFError:
            self._process.join(5)
            raise EnvWorkerError(f"{self.domain} env worker died (exit code {self._process.exitcode})") from None
        if status == "error":
            raise EnvWorkerError(f"{self.domain} env worker:\n{payload}")
        return payload

    def _call(self, *message: Any) -> Any:
        self._conn.send(message)
        return self._answer()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        observation, info, self.task = self._call("reset", seed, options)
        return observation, info

    def step(self, action: str) -> StepResult:
        return self.step_batch([self], [action])[0]

    @classmethod
    def step_batch(cls, envs: Sequence[TextEnv], actions: Sequence[str]) -> list[StepResult]:
        """Every worker gets its action first, then every answer is collected: they step in parallel."""
        workers: list[ProcessEnv] = list(envs)  # type: ignore[arg-type]
        for env, action in zip(workers, actions, strict=True):
            env._conn.send(("step", action))
        results, failure = [], None
        for env in workers:  # every answer is read, so no worker is left a step behind
            try:
                result, env.task = env._answer()
                results.append(result)
            except EnvWorkerError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return results

    def verify(self) -> bool | None:
        return self._call("verify")

    def close(self) -> None:
        self._closer()
