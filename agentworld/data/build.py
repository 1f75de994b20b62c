"""Dataset builders: validated transitions -> world-model examples, split by episode.

Splitting by episode (never by row) keeps every turn of an episode on one side, so the
held-out score measures prediction on unseen episodes, not recall of a neighbouring turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentworld.config import BuildParams, CollectParams, ParamsError
from agentworld.data.awbench import BenchRecord, write_bench
from agentworld.data.copying import best_copy
from agentworld.data.io import read_jsonl, write_jsonl
from agentworld.data.prompts import WorldModelExample, system_prompt
from agentworld.data.retrieval import RetrievalMemory
from agentworld.data.schema import Transition, first_observation, group_trajectories
from agentworld.envs.rationale import episode_rationales


def is_test_episode(trajectory_id: str, test_fraction: float, seed: int) -> bool:
    """Stable, order-free split: the same episode lands on the same side in every run."""
    digest = hashlib.sha256(f"{seed}:{trajectory_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < test_fraction


def planned_split(collect: CollectParams, build: BuildParams) -> dict[str, tuple[int, int]]:
    """(train, held-out) episodes per selected domain that collection and build will give.

    Exact before anything runs: trajectory ids depend only on (domain, collect.seed, index).
    """
    from agentworld.data.episodes import trajectory_id_for

    out = {}
    for domain in collect.domains:
        episodes = collect.episodes_for(domain)
        test = sum(is_test_episode(trajectory_id_for(domain, collect.seed, i), build.test_fraction, build.seed)
                   for i in range(episodes))
        out[domain] = (episodes - test, test)
    return out


def check_split(collect: CollectParams, build: BuildParams) -> dict[str, tuple[int, int]]:
    """Refuse settings whose build stage could not split off both a training and a held-out episode."""
    split = planned_split(collect, build)
    train, test = sum(t for t, _ in split.values()), sum(h for _, h in split.values())
    if train and test:
        return split
    sizes = ", ".join(f"{d}: {t + h}" for d, (t, h) in split.items())
    needed = _episodes_for_a_split(collect, build)
    raise ParamsError(
        f"collect.episodes_per_domain / collect.episodes ({sizes}) give {train} training and {test} held-out "
        f"episodes at build.test_fraction {build.test_fraction:g}; the build stage needs at least one of each. "
        f"Collect at least {needed} episodes per domain (or raise build.test_fraction).")


def _episodes_for_a_split(collect: CollectParams, build: BuildParams) -> int:
    from agentworld.data.episodes import trajectory_id_for

    for n in range(2, 100_000):
        sides = {is_test_episode(trajectory_id_for(d, collect.seed, i), build.test_fraction, build.seed)
                 for d in collect.domains for i in range(n)}
        if sides == {True, False}:
            return n
    return 100_000


def episode_examples(turns: list[Transition], params: BuildParams) -> list[WorldModelExample]:
    """One example per turn, with up to `history_turns` earlier turns as context, and the
    adapters' grounded rationale of the step (used by SFT when `sft.reasoning` is on)."""
    cap = params.max_observation_chars
    rationales = episode_rationales(turns)
    system = system_prompt(turns[0].domain, turns[0].instruction, first_observation(turns))
    examples = []
    for i, row in enumerate(turns):
        earlier = turns[max(0, i - params.history_turns): i] if params.history_turns else []
        examples.append(
            WorldModelExample(
                id=row.id,
                domain=row.domain,
                system=system,
                history=[(t.action, t.observation[:cap]) for t in earlier],
                action=row.action,
                observation=row.observation[:cap],
                reasoning=rationales[i] or None,
            )
        )
    return examples


def agentworldbench_records(turns: list[Transition], params: BuildParams) -> Iterable[BenchRecord]:
    """The public AgentWorldBench layout: one record per turn of a held-out episode, each holding
    the whole episode, its turn 1-indexed, our transition id kept as `transition_id`."""
    cap = params.max_observation_chars
    system = system_prompt(turns[0].domain, turns[0].instruction, first_observation(turns))
    actions = [t.action for t in turns]
    observations = [t.observation[:cap] for t in turns]
    for i, row in enumerate(turns):
        yield BenchRecord.from_episode(row.domain, row.trajectory_id, system, actions, observations, i + 1,
                                       transition_id=row.id)


def example_record(example: WorldModelExample) -> dict[str, Any]:
    return {
        "id": example.id,
        "domain": example.domain,
        "system": example.system,
        "history": [list(pair) for pair in example.history],
        "action": example.action,
        "observation": example.observation,
        "reasoning": example.reasoning,
        **({"memory": example.memory} if example.memory is not None else {}),
        **({"retrieved": example.retrieved} if example.retrieved is not None else {}),
        **({"target": example.target} if example.target is not None else {}),
    }


def with_memory(train: list[WorldModelExample], test: list[WorldModelExample], params: BuildParams
                ) -> tuple[list[WorldModelExample], list[WorldModelExample], RetrievalMemory | None]:
    """Both splits with retrieval memory blocks from the training split alone (the candidate
    scorer, with `build.rerank`, is fitted on it too); a training example never retrieves from
    its own episode."""
    if not params.retrieval_k:
        return train, test, None
    memory = RetrievalMemory.from_examples(train, params.retrieval_k, params.retrieval_max_chars,
                                           params.retrieval_pool)
    if params.rerank:
        memory.fit_scorer(train, params.seed)
    return memory.annotate(train, exclude_own_episode=True), memory.annotate(test), memory


def with_copy_targets(examples: list[WorldModelExample], min_f1: float | None) -> list[WorldModelExample]:
    """Examples whose target is a copy op where a source this turn shows is close enough to the
    real observation (both splits: the held-out loss then measures the trained objective; the
    scored prediction is always the expanded text against the real observation)."""
    if min_f1 is None:
        return examples
    return [replace(e, target=best_copy(e.observation, e.copy_sources(), min_f1)) for e in examples]


def load_examples(path: str | Path) -> list[WorldModelExample]:
    out = []
    for rec in read_jsonl(path):
        rec["history"] = [tuple(pair) for pair in rec["history"]]
        out.append(WorldModelExample(**rec))
    return out


def build_datasets(transitions: list[Transition], params: BuildParams, out_dir: Path) -> dict[str, int]:
    """Write sft/train.jsonl, sft/test.jsonl, sft/retrieval_memory.jsonl (the training split's
    transitions, when `build.retrieval_k`) and agentworldbench/<domain>_test.jsonl under out_dir."""
    train, test = [], []
    bench: list[BenchRecord] = []
    episodes = group_trajectories(transitions)
    for trajectory_id in sorted(episodes):
        turns = episodes[trajectory_id]
        examples = episode_examples(turns, params)
        if is_test_episode(trajectory_id, params.test_fraction, params.seed):
            test.extend(examples)
            bench.extend(agentworldbench_records(turns, params))
        else:
            train.extend(examples)
    if not train or not test:
        raise ParamsError(
            f"build: split gave {len(train)} train and {len(test)} test examples from {len(episodes)} episodes; "
            "collect more episodes (collect.episodes_per_domain) or change build.test_fraction"
        )
    train, test, memory = with_memory(train, test, params)
    train, test = with_copy_targets(train, params.copy_min_f1), with_copy_targets(test, params.copy_min_f1)
    RetrievalMemory.save_or_none(memory, out_dir / "sft", params.retrieval_max_chars)
    counts = {
        "train_examples": write_jsonl(out_dir / "sft" / "train.jsonl", map(example_record, train)),
        "test_examples": write_jsonl(out_dir / "sft" / "test.jsonl", map(example_record, test)),
        "episodes": len(episodes),
    }
    write_bench(bench, out_dir / "agentworldbench")
    return counts
