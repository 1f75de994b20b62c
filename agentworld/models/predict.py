"""Batched greedy next-observation prediction with a transformers model (the CPU backend)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from agentworld.data.copying import expand_copies
from agentworld.data.prompts import WorldModelExample, parse_observation
from agentworld.models.chat import fit_prompt
from agentworld.models.tokenizer import IM_END


def predict_observations(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[WorldModelExample],
    max_new_tokens: int,
    batch_size: int,
    max_seq_len: int,
    progress: bool = True,
) -> tuple[list[str], list[bool]]:
    """Predicted observation and format validity for each example, in input order."""
    generations = generate_turns(model, tokenizer, examples, max_new_tokens, batch_size, max_seq_len, progress)
    parsed = [parse_observation(text) for text in generations]
    return [p[0] for p in parsed], [p[1] for p in parsed]


@torch.inference_mode()
def generate_turns(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[WorldModelExample],
    max_new_tokens: int,
    batch_size: int,
    max_seq_len: int,
    progress: bool = True,
    temperature: float = 0.0,
) -> list[str]:
    """The assistant turn (optional `<think>`, marker, observation) generated for each example,
    its copy ops expanded (agentworld/data/copying.py); greedy at temperature 0, sampled above it."""
    model.eval()
    if hasattr(model.config, "output_router_logits"):
        # MoE router logits are a training-time signal (aux loss); during cached generation
        # transformers' aux-loss code mis-sizes its mask, and nothing needs them here.
        model.config.output_router_logits = False
    tokenizer.padding_side = "left"
    budget = max(16, max_seq_len - max_new_tokens)
    prompts = [
        tokenizer.apply_chat_template(fit_prompt(e, tokenizer, budget), add_generation_prompt=True, tokenize=False)
        for e in examples
    ]
    # Similar lengths share a batch, so little compute is spent on padding.
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    outputs: list[str] = [""] * len(prompts)
    stop_id = tokenizer.convert_tokens_to_ids(IM_END)
    for start in tqdm(range(0, len(order), batch_size), desc="predict", disable=not progress, unit="batch"):
        idx = order[start: start + batch_size]
        batch = tokenizer([prompts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False)
        generated = model.generate(
            **batch,
            max_new_tokens=max_new_tokens,
            **({"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}),
            eos_token_id=stop_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        new_tokens = generated[:, batch["input_ids"].shape[1]:]
        for i, ids in zip(idx, new_tokens):
            text = tokenizer.decode(ids, skip_special_tokens=False)
            text = text.split(IM_END, 1)[0].replace(tokenizer.pad_token, "")
            outputs[i] = expand_copies(text, examples[i].copy_sources())
    return outputs
