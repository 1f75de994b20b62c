"""The agent policy: a small causal LM that reads observations and writes the next action.

An episode is one token sequence in the chat layout — system, then the environment's
observations as user turns and the agent's actions as assistant turns — built incrementally
(`EpisodeTokens`), so the ids the agent acted on are exactly the ids RL trains on, and the
mask says which tokens the agent wrote (1) and which the environment did (0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from agentworld.domains import get_domain
from agentworld.envs.base import TEXT_CHARSET
from agentworld.models.tokenizer import IM_END

FIRST_OBSERVATION_CHARS = 400


def agent_prompt(domain: str) -> str:
    """What the agent is told (`Domain.agent_prompt`); the task itself arrives in the first observation."""
    prompt = get_domain(domain).agent_prompt
    if prompt is None:
        raise ValueError(f"domain {domain!r} declares no agent_prompt: agents are not trained on it")
    return prompt


def done_action(domain: str) -> str:
    """What the agent says when it is done (its system prompt tells it so). A real TextWorld game
    ends by itself when won; a simulated one ends on this action."""
    action = get_domain(domain).done_action
    if action is None:
        raise ValueError(f"domain {domain!r} declares no done_action: agents are not trained on it")
    return action


def clip(text: str, chars: int) -> str:
    """An observation cut to `chars` characters (the agent's context is small), marked when cut."""
    return text if len(text) <= chars else text[:chars] + " [...]"


def agent_messages(domain: str, observations: Sequence[str], actions: Sequence[str], observation_chars: int,
                   ) -> list[dict[str, str]]:
    """The chat of an episode: observations as user turns, actions as assistant turns (BC's layout)."""
    messages = [{"role": "system", "content": agent_prompt(domain)}]
    for i, observation in enumerate(observations):
        messages.append({"role": "user", "content": clip(observation, FIRST_OBSERVATION_CHARS if i == 0
                                                              else observation_chars)})
        if i < len(actions):
            messages.append({"role": "assistant", "content": actions[i]})
    return messages


@dataclass
class EpisodeTokens:
    """An episode's token ids so far: the prompt (system + first observation), then the
    completion (actions and later observations) with its agent mask."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    agent_mask: list[int] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add(self, ids: Sequence[int], by_agent: bool) -> None:
        self.completion_ids.extend(ids)
        self.agent_mask.extend([1 if by_agent else 0] * len(ids))


class LMAgent:
    """Acts for many episodes at once with one batched `generate` per step."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, domain: str, *,
                 max_new_tokens: int = 40, observation_chars: int = 160, temperature: float = 0.0) -> None:
        self.model, self.tokenizer, self.domain = model, tokenizer, domain
        self.max_new_tokens, self.observation_chars, self.temperature = max_new_tokens, observation_chars, temperature
        self.end_id = tokenizer.convert_tokens_to_ids(IM_END)

    def start(self, first_observation: str) -> EpisodeTokens:
        messages = agent_messages(self.domain, [first_observation], [], self.observation_chars)
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return EpisodeTokens(list(ids["input_ids"] if hasattr(ids, "keys") else ids))

    def observe(self, episode: EpisodeTokens, observation: str) -> None:
        """The environment's answer, closing the agent's turn and opening the next one."""
        text = f"\n<|im_start|>user\n{clip(observation, self.observation_chars)}{IM_END}\n<|im_start|>assistant\n"
        episode.add(self.tokenizer(text, add_special_tokens=False)["input_ids"], by_agent=False)

    @torch.no_grad()
    def act(self, episodes: Sequence[EpisodeTokens], temperature: float | None = None) -> list[str]:
        """The next action of every episode; its tokens (ending in <|im_end|>) join the episode."""
        if not episodes:
            return []
        temperature = self.temperature if temperature is None else temperature
        pad = self.tokenizer.pad_token_id
        width = max(len(e.ids) for e in episodes)
        input_ids = torch.full((len(episodes), width), pad, dtype=torch.long)
        attention = torch.zeros_like(input_ids)
        for row, episode in enumerate(episodes):  # left padding: every row ends at the generation point
            ids = episode.ids
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            attention[row, width - len(ids):] = 1
        was_training = self.model.training
        self.model.eval()
        if hasattr(self.model.config, "output_router_logits"):
            # a training-time signal (MoE aux loss) that trainers switch on; cached generation mis-sizes it
            self.model.config.output_router_logits = False
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} if temperature > 0 \
            else {"do_sample": False}
        out = self.model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=self.max_new_tokens,
                                  eos_token_id=self.end_id, pad_token_id=pad, **sampling)
        self.model.train(was_training)
        actions = []
        for row, episode in enumerate(episodes):
            new = out[row, width:].tolist()
            if self.end_id in new:
                new = new[:new.index(self.end_id) + 1]
                episode.add(new, by_agent=True)
            else:  # ran out of tokens: the turn is closed for it, and the closing token is not the agent's
                new = [t for t in new if t != pad]
                episode.add(new, by_agent=True)
                episode.add([self.end_id], by_agent=False)
            text = self.tokenizer.decode([t for t in new if t != self.end_id], skip_special_tokens=True)
            # the action space's charset (a sampled byte-level token can decode to NUL or a control byte)
            actions.append("".join(c for c in text if c in TEXT_CHARSET).strip())
        return actions
