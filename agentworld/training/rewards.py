"""Hybrid reward for GRPO on next-observation prediction: rule components plus a rubric judge.

Rule components (`rule_reward`, each in [0, 1], deterministic):
- exact_match: the generation follows the layout and its observation equals the real one
  (after `metrics.normalise`);
- structure: same shape as the real observation: for JSON, Jaccard of the (key path, type)
  signatures; otherwise the mean of kind agreement (error line / URL page / ranked results /
  pytest summary / JSON / empty / text), line-count ratio and F1 of line templates (digits and
  words abstracted);
- format: half for the chat layout (`judge.layout_problems`), half for the domain's shape
  (`judge.shape_problems`);
- facts: F1 of the deterministic facts (`judge.deterministic_facts`: numbers, file names,
  paths, error types, JSON fields, URLs, ids), halved when the error signatures differ.

Rubric component (`rubric_reward`): a `Judge`'s five 1-5 scores, mapped to [0, 1] and averaged.

`HybridReward` returns, per completion, every component and `total` (the weighted mean of the
components, in [0, 1]). For TRL's `GRPOTrainer`, `trl_reward_funcs()` gives one reward function
per component (so TRL logs each as `rewards/<name>/mean`) to be used with `trl_reward_weights()`
as `GRPOConfig(reward_weights=...)`; `trl_total_reward()` gives one function returning the total
(and logging each component through TRL's `log_metric`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentworld.data.copying import expand_copies
from agentworld.data.prompts import parse_observation
from agentworld.scoring.judge import (
    ERROR_PHRASES,
    Judge,
    JudgeInput,
    JudgeScores,
    fact_match,
    json_leaves,
    layout_problems,
    parse_json,
    shape_problems,
)
from agentworld.scoring.metrics import exact_match, normalise, token_f1

RULE_COMPONENTS: tuple[str, ...] = ("exact_match", "structure", "format", "facts")
COMPONENTS: tuple[str, ...] = RULE_COMPONENTS + ("rubric",)


# --------------------------------------------------------------------------------------------
# Rule components
# --------------------------------------------------------------------------------------------


def observation_kind(text: str) -> str:
    """A coarse kind of observation shared by all domains."""
    body = normalise(text)
    if not body:
        return "empty"
    value = parse_json(body)
    if value is not None:
        if isinstance(value, dict) and isinstance(value.get("isError"), bool):
            return "json-error" if value["isError"] else "json-result"
        return "json"
    first = body.splitlines()[0]
    if first.startswith(("Error: ", "error: ")):
        return "error"
    if first.startswith("URL: "):
        return "page"
    if first.startswith("Results ") and " for " in first:
        return "results"
    if first.startswith("No results for "):
        return "no-results"
    if re.match(r"^\[[a-z]+:[^\]]+\]", first):
        return "document"
    if re.search(r"\d+ (?:passed|failed|errors?|skipped|no tests ran)[^\n]*\s*$", body):
        return "pytest"
    if "\n" not in body and any(p in body for p in ERROR_PHRASES):
        return "error"
    return "text"


def _line_template(line: str) -> str:
    line = re.sub(r"\d+", "0", line.rstrip())
    line = re.sub(r"[A-Za-z_]+", "a", line)
    return re.sub(r"\s+", " ", line)


def _multiset_f1(a: Counter, b: Counter) -> float:
    if not a and not b:
        return 1.0
    common = sum((a & b).values())
    if not common:
        return 0.0
    p, r = common / sum(a.values()), common / sum(b.values())
    return 2 * p * r / (p + r)


def json_signature(value: Any) -> set[str]:
    """(key path with list indices, leaf type) of every leaf."""
    return {f"{path}:{type(leaf).__name__}" for path, leaf in json_leaves(value)}


def structural_match(observation: str, reference: str) -> float:
    """Shape agreement in [0, 1]; see the module docstring."""
    ref_json = parse_json(reference)
    if ref_json is not None:
        pred_json = parse_json(observation)
        if pred_json is None:
            return 0.0
        a, b = json_signature(pred_json), json_signature(ref_json)
        return len(a & b) / len(a | b) if a | b else 1.0
    kind = float(observation_kind(observation) == observation_kind(reference))
    lp, lr = normalise(observation).splitlines(), normalise(reference).splitlines()
    lines = 1.0 if len(lp) == len(lr) else min(len(lp), len(lr)) / max(len(lp), len(lr))
    templates = _multiset_f1(Counter(map(_line_template, lp)), Counter(map(_line_template, lr)))
    return (kind + lines + templates) / 3


def format_validity(generation: str, domain: str, action: str = "", reference: str | None = None) -> float:
    """0.5 for a clean chat layout + 0.5 for the domain's observation shape."""
    observation, _ = parse_observation(generation)
    layout_ok = not layout_problems(generation)
    shape_ok = not shape_problems(domain, action, observation, reference)
    return 0.5 * layout_ok + 0.5 * shape_ok


def fact_reward(observation: str, reference: str) -> float:
    """F1 of the deterministic facts, halved when the error signatures differ; where neither
    side has a fact, the token F1 of the texts (so saying nothing earns nothing for free)."""
    f1, errors_agree = fact_match(observation, reference)
    if f1 is None:
        f1 = token_f1(observation, reference)
    return f1 if errors_agree else 0.5 * f1


def rule_reward(generation: str, reference: str, domain: str, action: str = "") -> dict[str, float]:
    """The four rule components of one generation, each in [0, 1]."""
    observation, followed = parse_observation(generation)
    return {
        "exact_match": exact_match(observation, reference) if followed else 0.0,
        "structure": structural_match(observation, reference),
        "format": format_validity(generation, domain, action, reference),
        "facts": fact_reward(observation, reference),
    }


def rubric_from_scores(scores: JudgeScores) -> float:
    """Mean of the applicable dimensions, each mapped 1-5 -> 0-1."""
    return scores.overall / 100


def rubric_reward(judge: Judge, inputs: Sequence[JudgeInput]) -> list[float]:
    """The judge's rubric reward of each input, in [0, 1]."""
    return [rubric_from_scores(s) for s in judge.score(list(inputs))]


# --------------------------------------------------------------------------------------------
# Hybrid reward
# --------------------------------------------------------------------------------------------


@dataclass
class HybridReward:
    """Weighted hybrid of the rule components and the judge's rubric reward.

    `total` = sum(weight * component) / sum(weights) over the components in use (the rubric only
    when a judge is given), so it stays in [0, 1]. Zero weights drop a component from the total
    but it is still computed and returned for logging.
    """

    judge: Judge | None = None
    exact_match: float = 1.0
    structure: float = 0.5
    format: float = 0.5
    facts: float = 1.0
    rubric: float = 1.0

    def __post_init__(self) -> None:
        for name in COMPONENTS:
            if getattr(self, name) < 0:
                raise ValueError(f"reward weight {name!r} must be >= 0, got {getattr(self, name)}")
        if sum(self.weights().values()) <= 0:
            raise ValueError("at least one reward weight in use must be positive")

    @property
    def components(self) -> tuple[str, ...]:
        return COMPONENTS if self.judge is not None else RULE_COMPONENTS

    def weights(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in self.components}

    def __call__(self, inputs: Sequence[JudgeInput]) -> list[dict[str, float]]:
        """Every component and `total` for each input, in input order."""
        rows = [rule_reward(i.generation, i.reference, i.domain, i.action) for i in inputs]
        if self.judge is not None:
            for row, value in zip(rows, rubric_reward(self.judge, inputs)):
                row["rubric"] = value
        weights = self.weights()
        norm = sum(weights.values())
        for row in rows:
            row["total"] = sum(weights[name] * row[name] for name in weights) / norm
        return rows

    def component(self, name: str, inputs: Sequence[JudgeInput]) -> list[float]:
        """One component for each input (the judge is only called for `rubric`)."""
        if name == "rubric":
            if self.judge is None:
                raise ValueError("the rubric component needs a judge")
            return rubric_reward(self.judge, inputs)
        if name not in RULE_COMPONENTS:
            raise KeyError(f"unknown reward component {name!r}; one of {COMPONENTS}")
        return [rule_reward(i.generation, i.reference, i.domain, i.action)[name] for i in inputs]

    # ---- TRL GRPOTrainer adapters ------------------------------------------------------------

    def trl_reward_funcs(self, **columns: str) -> list[Callable[..., list[float]]]:
        """One TRL reward function per component in use, named `reward_<component>` (TRL logs
        `rewards/reward_<component>/mean`). Pair with `GRPOConfig(reward_weights=trl_reward_weights())`.
        `columns` renames the dataset columns read (see `trl_inputs`)."""
        return [TRLComponentReward(self, name, columns) for name in self.components]

    def trl_reward_weights(self) -> list[float]:
        """The weights of `trl_reward_funcs()`, in order, normalised to sum to 1 (TRL sums
        weighted rewards, so the total then equals `HybridReward.__call__`'s `total`)."""
        weights = self.weights()
        norm = sum(weights.values())
        return [weights[name] / norm for name in self.components]

    def trl_total_reward(self, **columns: str) -> Callable[..., list[float]]:
        """A single TRL reward function returning `total`; it logs each component's batch mean
        through TRL's `log_metric` (as `hybrid/<component>`) when the trainer provides it."""
        return TRLTotalReward(self, columns)


def _content(message: Any) -> str:
    """The text of a TRL completion: a string, or a list of chat messages (conversational)."""
    if isinstance(message, str):
        return message
    if isinstance(message, dict):
        return str(message.get("content", ""))
    if isinstance(message, Sequence):
        return "".join(_content(m) for m in message if not isinstance(m, dict) or m.get("role", "assistant") == "assistant")
    return str(message)


def _context_from_prompt(prompt: Any) -> tuple[str, list[tuple[str, str]], str]:
    """(instruction, history, action) from a conversational prompt in the world-model layout."""
    if not isinstance(prompt, Sequence) or isinstance(prompt, str):
        return "", [], ""
    messages = [m for m in prompt if isinstance(m, dict)]
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    instruction = system.split("The agent's task: ", 1)[1] if "The agent's task: " in system else ""
    turns = [m for m in messages if m.get("role") in ("user", "assistant")]
    action = turns[-1]["content"] if turns and turns[-1].get("role") == "user" else ""
    history, pending = [], None
    for message in turns[:-1] if action else turns:
        if message["role"] == "user":
            pending = message["content"]
        elif pending is not None:
            history.append((pending, parse_observation(message["content"])[0]))
            pending = None
    return instruction, history, action


def trl_inputs(prompts: Sequence[Any], completions: Sequence[Any], columns: dict[str, str] | None = None,
               **kwargs: Any) -> list[JudgeInput]:
    """JudgeInputs from TRL's reward-function arguments.

    Dataset columns (default names; rename with `columns={"reference": "my_col", ...}`):
    `observation` (the real observation, required), `domain` (required), and optionally `action`,
    `history` (list of [action, observation]) and `instruction`; when absent they are read from
    the conversational prompt (system prompt's task, user/assistant turns, last user message).
    A `copy_sources` column (list of [op, text]) expands the completion's copy ops before scoring.
    """
    names = {"reference": "observation", "domain": "domain", "action": "action", "history": "history",
             "instruction": "instruction", "copy_sources": "copy_sources", **(columns or {})}
    for key in ("reference", "domain"):
        if names[key] not in kwargs:
            raise KeyError(f"the GRPO dataset needs a {names[key]!r} column (the {key}); columns given: "
                           f"{sorted(k for k in kwargs if k not in ('trainer_state', 'log_extra', 'log_metric'))}")
    inputs = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        instruction, history, action = _context_from_prompt(prompt)
        if names["action"] in kwargs:
            action = kwargs[names["action"]][i]
        if names["history"] in kwargs and kwargs[names["history"]][i] is not None:
            history = [tuple(pair) for pair in kwargs[names["history"]][i]]
        if names["instruction"] in kwargs:
            instruction = kwargs[names["instruction"]][i]
        generation = _content(completion)
        if names["copy_sources"] in kwargs and kwargs[names["copy_sources"]][i]:
            generation = expand_copies(generation, dict(kwargs[names["copy_sources"]][i]))
        inputs.append(JudgeInput(domain=kwargs[names["domain"]][i], generation=generation,
                                 reference=kwargs[names["reference"]][i], action=action or "",
                                 history=tuple(history), instruction=instruction or ""))
    return inputs


class TRLComponentReward:
    """A TRL reward function (`f(prompts, completions, **columns) -> list[float]`) for one component."""

    def __init__(self, hybrid: HybridReward, component: str, columns: dict[str, str] | None = None) -> None:
        self.hybrid, self.component, self.columns = hybrid, component, dict(columns or {})
        self.__name__ = f"reward_{component}"  # TRL names the logged reward after __name__

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        inputs = trl_inputs(prompts, completions, self.columns, **kwargs)
        return self.hybrid.component(self.component, inputs)


class TRLTotalReward:
    """A TRL reward function returning the hybrid total, logging each component's mean."""

    __name__ = "hybrid_reward"

    def __init__(self, hybrid: HybridReward, columns: dict[str, str] | None = None) -> None:
        self.hybrid, self.columns = hybrid, dict(columns or {})

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        rows = self.hybrid(trl_inputs(prompts, completions, self.columns, **kwargs))
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and rows:
            for name in self.hybrid.components:
                log_metric(f"hybrid/{name}", sum(r[name] for r in rows) / len(rows))
        return [r["total"] for r in rows]


__all__ = [
    "COMPONENTS", "HybridReward", "RULE_COMPONENTS", "TRLComponentReward", "TRLTotalReward", "fact_reward",
    "format_validity", "observation_kind", "rubric_from_scores", "rubric_reward", "rule_reward",
    "structural_match", "trl_inputs",
]
