"""Small, hand-made trajectories for unit tests (no environment needed), and servers started for a test."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from agentworld.data.schema import Transition, transition_id, utc_now


def make_episode(index: int, turns: int = 4, domain: str = "terminal") -> list[Transition]:
    trajectory_id = f"{domain}-test-{index:04d}"
    rows = []
    for turn in range(turns):
        word = f"w{index}_{turn}"
        rows.append(
            Transition(
                id=transition_id(trajectory_id, turn), trajectory_id=trajectory_id, turn=turn, domain=domain,
                env_id=f"{domain}-v1", task_id=f"echo-{index}", instruction=f"print the words of episode {index}",
                action=f"echo {word}", observation=word, reward=float(turn == turns - 1), done=turn == turns - 1,
                source="real", policy="scripted", env_version="1", seed=index, timestamp=utc_now(),
                info={"exit_code": 0},
            )
        )
    return rows


def scripted_episode(trajectory_id: str, index: int, steps: list[tuple[str, str]], instruction: str,
                     exit_code: int = 0) -> list[Transition]:
    """A real-looking terminal episode of the given (action, observation) steps."""
    return [Transition(id=transition_id(trajectory_id, turn), trajectory_id=trajectory_id, turn=turn,
                       domain="terminal", env_id="terminal-v1", task_id=f"t{index}", instruction=instruction,
                       action=action, observation=observation, reward=0.0, done=turn == len(steps) - 1,
                       source="real", policy="scripted", env_version="1", seed=index, timestamp=utc_now(),
                       info={"exit_code": exit_code})
            for turn, (action, observation) in enumerate(steps)]


def make_transitions(episodes: int, turns: int = 4) -> list[Transition]:
    return [row for i in range(episodes) for row in make_episode(i, turns)]


def send_json(handler, payload: dict, status: int = 200) -> None:
    """Answer an http.server request with a JSON body (the stub OpenAI-compatible servers)."""
    import json

    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def built_and_trained(root, params, sft_steps: int | None = None, register: bool = False):
    """A workspace with 40 terminal episodes built into splits and corpora, and (with `sft_steps`)
    an SFT model trained from scratch; returns its StagePaths."""
    import stages.build
    import stages.sft
    import stages.tokenizer
    from agentworld.data.corpora import build_corpora
    from agentworld.data.io import write_jsonl
    from stages.paths import StagePaths

    paths = StagePaths(root)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=40))
    stages.build.run(params, root)
    build_corpora(paths.corpora, params.corpora.sources)
    stages.tokenizer.run(params, root)
    if sft_steps:
        trained = params.model_copy(update={"sft": params.sft.model_copy(update={"init": "scratch", "max_steps": sft_steps})})
        stages.sft.run(trained, root, register=register)
    return paths


def stop_process_group(proc) -> None:
    """SIGTERM a server started with `start_new_session=True` and everything it spawned; SIGKILL
    what is still there after 30 s."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 90.0) -> None:
    """Until something listens on 127.0.0.1:`port` (a TCP connect, so no request is recorded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.3)
    raise TimeoutError(f"{what} did not listen on {port} within {timeout:.0f}s")


@contextlib.contextmanager
def running(cmd: list[str], port: int, what: str, cwd: Path | None = None) -> Iterator[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        wait_for_port(port, proc, what)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(proc)


def save_tiny_model(out: Path, corpus: list[str]) -> Path:
    """A tiny fresh model of our architecture (smoke profile) with a tokenizer trained on `corpus`,
    saved as a checkpoint folder: a world model or an agent's starting point for tests."""
    from agentworld.config import load_params
    from agentworld.models.factory import build_model
    from tests.conftest import SMOKE_PARAMS

    model, tokenizer = build_model(load_params(SMOKE_PARAMS).model, corpus)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
