"""Retrieve-and-edit: a neighbour's observation with the current action's arguments put in
place of its own, offered to the candidate scorer next to the unedited neighbours."""

from __future__ import annotations

from agentworld.config import BuildParams
from agentworld.data.adapting import adapt, substitutions
from agentworld.data.build import build_datasets, load_examples
from agentworld.data.retrieval import ADAPTED_HEADER, RetrievalMemory
from agentworld.evaluation.baselines import RetrievalBaseline
from agentworld.scoring.metrics import exact_match
from tests.helpers import scripted_episode

NAMES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


def test_the_action_difference_is_applied_to_the_observation():
    assert adapt("You take the red apple from the table.", "take red apple", "take blue key") == \
        ("You take the blue key from the table.", 1)
    assert adapt("cat: notes.txt: No such file or directory", "cat notes.txt", "cat todo.md") == \
        ("cat: todo.md: No such file or directory", 2)                     # notes -> todo, txt -> md
    assert substitutions('{"issue_id": 25, "tool": "get"}', '{"issue_id": 5, "tool": "get"}') == {"25": "5"}


def test_only_whole_words_change_and_an_unchanged_answer_is_no_candidate():
    edited = adapt('{"id": 1, "count": 12, "ids": [1, 21]}', "get 1", "get 3")
    assert edited == ('{"id": 3, "count": 12, "ids": [3, 21]}', 2)       # not inside 12 or 21
    assert adapt("Done.", "take apple", "take key") is None               # no argument is repeated
    assert adapt("You see a key.", "look", "look") is None                # the same action: nothing to edit
    assert adapt("", "cat a", "cat b") is None


def _episode(index: int):
    """A missing file whose name differs in every episode: no real answer in the training split
    is right for a held-out episode, its edit to the held-out name is."""
    name = f"{NAMES[index % len(NAMES)]}{index}"
    trajectory_id = f"terminal-adapt-{index:04d}"
    steps = [("pwd", "/home/agent"), (f"cat {name}.log", f"cat: {name}.log: No such file or directory")]
    return scripted_episode(trajectory_id, index, steps, "read the log", exit_code=1)


def test_the_ranked_memory_shows_the_edited_neighbour_first_where_every_copy_is_wrong(tmp_path):
    transitions = [row for i in range(40) for row in _episode(i)]
    build_datasets(transitions, BuildParams(test_fraction=0.3, history_turns=3, retrieval_k=2, rerank=True),
                   tmp_path)
    train, test = load_examples(tmp_path / "sft" / "train.jsonl"), load_examples(tmp_path / "sft" / "test.jsonl")
    cats = [e for e in test if e.action.startswith("cat ")]
    assert cats
    retrieval = RetrievalBaseline(train).predict(cats)
    assert not any(exact_match(p, e.observation) for p, e in zip(retrieval, cats, strict=True))
    assert all(e.retrieved[0] == e.observation for e in cats)            # the edit is right and ranked first
    assert all(ADAPTED_HEADER in e.memory[-1] for e in cats)
    # The edit is made of a training observation: the memory holds no held-out episode.
    memory = RetrievalMemory.load(tmp_path / "sft")
    assert memory is not None and not memory.episodes & {e.id.rsplit(":", 1)[0] for e in test}
