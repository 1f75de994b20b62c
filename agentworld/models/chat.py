"""Rendering world-model examples into token sequences that fit the model's context."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from agentworld.data.prompts import WorldModelExample


def fit_prompt(
    example: WorldModelExample, tokenizer: PreTrainedTokenizerBase, max_prompt_tokens: int
) -> list[dict[str, str]]:
    """Prompt messages with as much history as fits in `max_prompt_tokens` (oldest turns dropped first)."""
    for keep in range(len(example.history), -1, -1):
        messages = example.prompt_messages(history_turns=keep)
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if len(ids) <= max_prompt_tokens:
            return messages
    return example.prompt_messages(history_turns=0)
