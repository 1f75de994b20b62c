"""Retrieval never sees held-out episodes: the memory shown to the world model and the retrieval
baseline are built from the training split only, and on a downloaded AgentWorldBench directory
(no training split) a record never retrieves from its own episode."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from agentworld.config import BuildParams
from agentworld.data.awbench import read_bench
from agentworld.data.build import build_datasets, load_examples
from agentworld.data.prompts import parse_observation
from agentworld.data.retrieval import (
    ADAPTED_HEADER,
    MEMORY_FILE,
    MEMORY_HEADER,
    OWN_HEADER,
    RetrievalMemory,
    episode_of,
)
from agentworld.evaluation.run import retrieval_generate
from tests.helpers import make_transitions

WORD = re.compile(r"\bw(\d+)_\d+\b")  # observations are w<episode>_<turn>: their episode is readable


def episodes_in(text: str) -> set[int]:
    return {int(m) for m in WORD.findall(text)}


def entries_of(block: str) -> list[tuple[str, str]]:
    """(header, text) of each entry of a memory block."""
    headers = "|".join(re.escape(h) for h in (ADAPTED_HEADER, MEMORY_HEADER, OWN_HEADER))  # longest first
    parts = re.split(f"^({headers})", block, flags=re.M)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]


@pytest.mark.parametrize("rerank", [False, True])
def test_memory_holds_the_training_split_and_no_example_sees_its_own_episode(tmp_path, rerank):
    """Retrieved transitions come from other training episodes only; with the scorer, the
    episode's own candidates are turns of the history the prompt already shows, and an edited
    neighbour holds nothing of another episode but what the current action itself says."""
    params = BuildParams(test_fraction=0.3, history_turns=3, retrieval_k=2, rerank=rerank)
    build_datasets(make_transitions(episodes=30, turns=4), params, tmp_path)
    train, test = load_examples(tmp_path / "sft" / "train.jsonl"), load_examples(tmp_path / "sft" / "test.jsonl")
    train_episodes = {episode_of(e.id) for e in train}
    test_episodes = {episode_of(e.id) for e in test}
    assert train_episodes and test_episodes and not train_episodes & test_episodes

    memory = RetrievalMemory.load(tmp_path / "sft")
    assert memory is not None and memory.k == 2
    assert memory.episodes == train_episodes  # the whole training split, nothing else

    held_out_words = {int(e.split("-")[-1]) for e in test_episodes}
    shown = 0
    for example in train + test:
        assert example.memory is not None and len(example.memory) == 1  # the current action's
        own = int(episode_of(example.id).split("-")[-1])
        for block in example.memory:
            shown += any(header in (MEMORY_HEADER, ADAPTED_HEADER) for header, _ in entries_of(block))
            for header, text in entries_of(block):
                if header == OWN_HEADER:
                    shown_text = text.split("\n", 2)[2].rstrip("\n")
                    assert rerank and shown_text in {o for _, o in example.history}, (example.id, block)
                    continue
                if header == ADAPTED_HEADER:
                    assert rerank, (example.id, block)
                    for word in example.action.split():  # the edit puts the action's words in
                        text = text.replace(word, "")
                seen = episodes_in(text)
                assert own not in seen, (example.id, block)  # never the example's own episode
                assert not seen & held_out_words, (example.id, block)  # never a held-out episode
    assert shown > len(train) * 0.9  # retrieved transitions are really shown

    # The memory is what the model's prompt carries after the current action; earlier turns
    # show their real observations and no memory.
    messages = test[-1].prompt_messages()
    assert messages[-1]["content"].startswith(test[-1].action + "\n\n")
    assert entries_of(messages[-1]["content"])
    assert [m["content"] for m in messages[1:-1:2]] == [action for action, _ in test[-1].history]


def test_no_memory_when_retrieval_is_off(tmp_path):
    build_datasets(make_transitions(episodes=30), BuildParams(test_fraction=0.3, retrieval_k=0), tmp_path)
    assert (tmp_path / "sft" / MEMORY_FILE).exists() and RetrievalMemory.load(tmp_path / "sft") is None
    example = load_examples(tmp_path / "sft" / "test.jsonl")[-1]
    assert example.memory is None and example.prompt_messages()[-1]["content"] == example.action


def test_downloaded_benchmark_retrieval_leaves_the_episode_out(tmp_path):
    build_datasets(make_transitions(episodes=30, turns=4), BuildParams(test_fraction=0.5, retrieval_k=0), tmp_path)
    records = read_bench(tmp_path / "agentworldbench")
    assert len({r.episode for r in records}) >= 5
    generate = retrieval_generate(records, train=None)  # no training split: leave-episode-out
    examples = [r.to_example() for r in records]
    for record, turn in zip(records, generate(examples)):
        own = int(record.episode.split("-")[-1])
        predicted = parse_observation(turn)[0]
        assert predicted and own not in episodes_in(predicted), (record.key, predicted)


def _turn(episode: str, turn: int, action: str, observation: str, previous: tuple[str, str] | None = None):
    from agentworld.data.prompts import WorldModelExample

    return WorldModelExample(id=f"{episode}:{turn}", domain="terminal", system="s", action=action,
                             observation=observation, history=[previous] if previous else [])


def test_the_same_action_ranks_first_and_the_memory_says_so():
    """A long previous observation must not outweigh the action itself (seen on real Terminal
    data: `echo $HOME` retrieved `echo "$DB_PASSWORD" > token.txt` ahead of a real `echo $HOME`)."""
    env_dump = ("env | sort", "DB_PASSWORD=hunter2\nHOME=/home/agent\nPATH=/usr/bin\nUSER=agent")
    train = [_turn("a", 1, 'echo "$DB_PASSWORD" > token.txt', "", env_dump),
             _turn("b", 1, "echo $HOME", "/home/agent\n", ("ls", "notes.txt"))]
    memory = RetrievalMemory.from_examples(train, k=2)
    query = _turn("c", 1, "echo $HOME", "/home/agent\n", env_dump)
    assert [e.action for e in memory.lookup("terminal", query.action, query.history[-1])] == \
        ["echo $HOME", 'echo "$DB_PASSWORD" > token.txt']
    block = memory.annotate([query])[0].memory[0]
    assert block.startswith(f"{MEMORY_HEADER} (same action)\n>>> echo $HOME\n/home/agent")
    assert f"{MEMORY_HEADER}\n>>> echo \"$DB_PASSWORD\"" in block  # a different action: no note


def test_the_retrieval_baseline_is_the_first_neighbour_a_memory_without_scorer_shows(tmp_path):
    from agentworld.evaluation.baselines import RetrievalBaseline

    build_datasets(make_transitions(episodes=30, turns=4), BuildParams(test_fraction=0.3, retrieval_k=2, rerank=False),
                   tmp_path)
    train, test = load_examples(tmp_path / "sft" / "train.jsonl"), load_examples(tmp_path / "sft" / "test.jsonl")
    predicted = RetrievalBaseline(train).predict(test)
    assert predicted == [e.retrieved[0] if e.retrieved else "" for e in test]
    assert sum(bool(p) for p in predicted) > len(test) * 0.9


def test_the_episode_retrieval_baseline_answers_a_repeated_action_as_before_and_looks_up_the_rest(tmp_path):
    from agentworld.evaluation.baselines import RetrievalBaseline, episode_first

    build_datasets(make_transitions(episodes=30, turns=4), BuildParams(test_fraction=0.3, retrieval_k=2), tmp_path)
    train, test = load_examples(tmp_path / "sft" / "train.jsonl"), load_examples(tmp_path / "sft" / "test.jsonl")
    last = test[-1]
    repeated = replace(last, history=[(last.action, "its answer earlier in this episode"), *last.history])
    examples = [*test, repeated]
    lookup = RetrievalBaseline(train).predict(examples)
    predicted = episode_first(examples, lookup)
    assert predicted[-1] == "its answer earlier in this episode" != lookup[-1]
    assert predicted[:-1] == lookup[:-1] or any(e.earlier() for e in test)
    for example, found, answer in zip(examples, lookup, predicted):
        earlier = example.earlier()
        assert answer == (earlier[1] if earlier else found)
