"""Model registry: every trained world model becomes a version with its lineage as tags."""

from __future__ import annotations

from importlib.metadata import version

import mlflow
import mlflow.transformers
from mlflow import MlflowClient
from transformers import PreTrainedModel, PreTrainedTokenizerBase

# Explicit requirements: MLflow's inference of them imports every package in the venv and
# added torchvision (absent by design) — with them log_model takes ~3 s instead of ~47 s.
RUNTIME_PACKAGES = ("torch", "transformers", "tokenizers", "accelerate", "safetensors")


def pip_requirements() -> list[str]:
    return [f"{name}=={version(name).split('+')[0]}" for name in RUNTIME_PACKAGES]


def log_and_register(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, registered_name: str, tags: dict[str, str]
) -> str:
    """Log the model with the transformers flavour into the active run, register it, tag the version."""
    info = mlflow.transformers.log_model(
        transformers_model={"model": model, "tokenizer": tokenizer},
        name="model",
        task="text-generation",
        pip_requirements=pip_requirements(),
        registered_model_name=registered_name,
    )
    model_version = str(info.registered_model_version)
    client = MlflowClient()
    for key, value in tags.items():
        client.set_model_version_tag(registered_name, model_version, key, value)
    return model_version
