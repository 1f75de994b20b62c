"""Held-out fidelity along training: token F1 and exact match against training wall clock.

The loss curve says whether the model fits its targets; it does not say whether the
observations it writes get closer to the real ones, which is what a world model is for (a
model that learns the majority copy op drives the loss down and stays a lookup table). Every
`every` steps, and at the end, the callback predicts a fixed sample of held-out turns greedily
(copy ops expanded, as every backend does) and records the scores with the training seconds
so far, its own measuring time left out: the curve answers "what would more training buy".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase, TrainerCallback

from agentworld.data.prompts import WorldModelExample, parse_observation
from agentworld.data.sampling import balanced_sample
from agentworld.scoring.metrics import exact_match, token_f1

CURVE_COLUMNS = ["step", "train_s", "token_f1", "exact_match"]


@dataclass(frozen=True)
class CurvePoint:
    step: int
    train_s: float
    token_f1: float
    exact_match: float

    def row(self) -> tuple[int, float, float, float]:
        return self.step, round(self.train_s, 1), round(self.token_f1, 4), round(self.exact_match, 4)


def held_out_sample(examples: Sequence[WorldModelExample], size: int, seed: int) -> list[WorldModelExample]:
    """A fixed sample, the same at every point of the curve and for every model compared on it,
    balanced over domains as the evaluation's records are."""
    return balanced_sample(examples, size, seed, domain=lambda e: e.domain, key=lambda e: e.id)


def held_out_scores(generations: Sequence[str], examples: Sequence[WorldModelExample]) -> tuple[float, float]:
    """Mean token F1 and exact match of generations (copy ops expanded) against the real observations."""
    predictions = [parse_observation(g)[0] for g in generations]
    n = len(examples)
    return (sum(token_f1(p, e.observation) for p, e in zip(predictions, examples)) / n,
            sum(exact_match(p, e.observation) for p, e in zip(predictions, examples)) / n)


class HeldOutCurve(TrainerCallback):
    """Scores `examples` every `every` optimizer steps and at the end of training."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, examples: Sequence[WorldModelExample], every: int,
                 max_new_tokens: int, max_seq_len: int, batch_size: int = 16) -> None:
        self.tokenizer, self.examples, self.every = tokenizer, list(examples), every
        self.max_new_tokens, self.max_seq_len, self.batch_size = max_new_tokens, max_seq_len, batch_size
        self.points: list[CurvePoint] = []
        self._started, self._measuring_s = 0.0, 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self._started, self._measuring_s = time.monotonic(), 0.0

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every and state.global_step % self.every == 0:
            self.measure(model, state.global_step)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if not self.points or self.points[-1].step != state.global_step:
            self.measure(model, state.global_step)

    def measure(self, model, step: int) -> CurvePoint | None:
        from agentworld.models.predict import generate_turns

        if model is None or not self.examples:
            return None
        began = time.monotonic()
        was_training, padding_side = model.training, self.tokenizer.padding_side
        model.eval()
        generations = generate_turns(model, self.tokenizer, self.examples, self.max_new_tokens, self.batch_size,
                                     self.max_seq_len, progress=False)
        self.tokenizer.padding_side = padding_side  # generation pads on the left; training as before
        if was_training:
            model.train()
        f1, exact = held_out_scores(generations, self.examples)
        point = CurvePoint(step=step, train_s=began - self._started - self._measuring_s, token_f1=f1, exact_match=exact)
        self._measuring_s += time.monotonic() - began
        self.points.append(point)
        return point
