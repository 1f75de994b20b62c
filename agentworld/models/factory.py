"""Model factory: a tiny from-scratch Qwen3-MoE on CPU, or any local checkpoint directory.

Both paths return a (model, tokenizer) pair through the same call, chosen in params.yaml.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase, Qwen3MoeConfig

from agentworld.config import ModelParams
from agentworld.models.tokenizer import CHAT_TEMPLATE, train_tokenizer


class ModelLoadError(RuntimeError):
    """A model path is missing or does not hold a loadable checkpoint."""


def tiny_moe_config(params: ModelParams, tokenizer: PreTrainedTokenizerBase) -> Qwen3MoeConfig:
    return Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=params.hidden_size,
        intermediate_size=params.moe_intermediate_size * 2,
        moe_intermediate_size=params.moe_intermediate_size,
        num_hidden_layers=params.num_layers,
        num_attention_heads=params.num_heads,
        num_key_value_heads=params.num_kv_heads,
        head_dim=params.hidden_size // params.num_heads,
        num_experts=params.num_experts,
        num_experts_per_tok=params.num_experts_per_tok,
        decoder_sparse_step=1,
        max_position_embeddings=params.max_seq_len,
        tie_word_embeddings=True,
        output_router_logits=False,
        router_aux_loss_coef=0.01,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )


def load_local(path: str | Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a Hugging Face checkpoint directory; never reaches for the hub."""
    path = Path(path)
    if not path.is_dir():
        raise ModelLoadError(f"model.path: {path} is not a directory (set model.path in params.yaml to a local checkpoint)")
    if not (path / "config.json").exists():
        raise ModelLoadError(f"model.path: {path} has no config.json; it is not a Hugging Face checkpoint directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"model.path: could not load {path}: {err}") from err
    if tokenizer.chat_template is None:
        tokenizer.chat_template = CHAT_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer


def build_model(params: ModelParams, corpus: Iterable[str], seed: int = 0) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The world model to train: from scratch (tokenizer trained on `corpus`) or a local checkpoint."""
    if params.source == "local":
        return load_local(params.path or "")
    tokenizer = train_tokenizer(corpus, params.vocab_size)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_moe_config(params, tokenizer), dtype=torch.float32)
    return model, tokenizer


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
