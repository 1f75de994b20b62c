"""Copy ops: targets point at a source only where copying it reproduces the real observation
closely enough, sources come from the training split alone, and every consumer of a
generation (predictions, RL rewards) sees the expanded text, never the op."""

from __future__ import annotations

from agentworld.config import BuildParams
from agentworld.data.build import build_datasets, load_examples
from agentworld.data.copying import COPY_EARLIER, COPY_PREVIOUS, best_copy, copy_memory, copy_sources, expand_copies
from agentworld.data.prompts import WorldModelExample
from agentworld.data.retrieval import episode_of
from agentworld.data.schema import Transition
from agentworld.training.rewards import trl_inputs
from tests.helpers import scripted_episode

HELP = "usage: tool [--all] NAME\n  --all  every entry"


def episode(index: int) -> list[Transition]:
    """help (the same answer in every episode), ls twice (the same answer within the episode),
    then a command whose answer no source holds."""
    trajectory_id = f"terminal-copy-{index:04d}"
    steps = [("tool --help", HELP), (f"ls dir{index}", f"file{index}.txt notes{index}.md"),
             (f"ls dir{index}", f"file{index}.txt notes{index}.md"), (f"cat file{index}.txt", f"unique {index} text")]
    return scripted_episode(trajectory_id, index, steps, "look around")


def test_best_copy_prefers_exact_then_f1_and_leaves_the_rest_literal():
    sources = copy_sources(previous="a b c", retrieved=["x y z", "a b c d"])
    assert list(sources) == [copy_memory(1), copy_memory(2), COPY_PREVIOUS]
    assert best_copy("a b c", sources, 1.0) == COPY_PREVIOUS           # exact beats a closer-ranked near miss
    assert best_copy("a b c d", sources, 1.0) == copy_memory(2)
    assert best_copy("a b c d e", sources, 1.0) is None                 # lossless: no exact source, literal
    assert best_copy("a b c d e", sources, 0.8) == copy_memory(2)       # F1 0.89 reaches 0.8
    assert best_copy("q r s", sources, 0.1) is None                     # nothing shares a token
    assert best_copy("", sources, 0.1) is None                          # no empty source: literal
    assert best_copy("", {copy_memory(1): "x", copy_memory(2): "", COPY_PREVIOUS: " "}, 1.0) == copy_memory(2)
    tie = copy_sources(previous="same", retrieved=["same"])
    assert best_copy("same", tie, 1.0) == copy_memory(1)                # ties: the most similar retrieved first
    tie = copy_sources(previous="same", retrieved=["same"], earlier="same")
    assert best_copy("same", tie, 1.0) == COPY_EARLIER                  # the episode's own answer beats a neighbour's


def test_expansion_replaces_ops_and_empties_ops_without_a_source():
    sources = copy_sources(previous="before", retrieved=["neighbour"])
    assert expand_copies("**Environment Observation:**\n[[copy memory 1]]", sources) == \
        "**Environment Observation:**\nneighbour"
    assert expand_copies("[[copy previous]] and [[copy memory 3]]", sources) == "before and "
    assert expand_copies("[[copy previous]]", copy_sources(None, None)) == ""   # first turn: no previous
    assert expand_copies("plain [[text]]", sources) == "plain [[text]]"


def test_build_targets_copy_only_training_sources_and_expand_back_to_the_truth(tmp_path):
    transitions = [row for i in range(30) for row in episode(i)]
    build_datasets(transitions, BuildParams(test_fraction=0.3, history_turns=3, retrieval_k=2, copy_min_f1=1.0),
                   tmp_path)
    train, test = load_examples(tmp_path / "sft" / "train.jsonl"), load_examples(tmp_path / "sft" / "test.jsonl")
    assert train and test
    train_observations = {e.observation for e in train}
    by_target: dict[str | None, int] = {}
    for example in train + test:
        assert example.retrieved is not None and len(example.retrieved) <= 2
        # Sources: the training split, and (ranked in by the scorer) the example's own history.
        assert set(example.retrieved) <= train_observations | {o for _, o in example.history}
        by_target[example.target] = by_target.get(example.target, 0) + 1
        if example.target is None:
            continue
        # Lossless at 1.0: the expanded target is the real observation.
        assert expand_copies(example.target, example.copy_sources()) == example.observation
        assert example.completion_messages()[0]["content"].endswith(example.target)
        assert example.target not in example.prompt_messages()[-1]["content"]
    assert by_target.get(COPY_EARLIER, 0) >= 25                  # the repeated ls: the same action a turn ago
    assert by_target.get(copy_memory(1), 0) >= 25                # the help text every episode shares
    assert by_target.get(None, 0) >= 25                          # unique answers stay literal
    # A training example copies from its own episode only what its history already shows.
    for example in train:
        own = int(episode_of(example.id).rsplit("-", 1)[1])
        history = {o for _, o in example.history}
        assert all(text in history for text in example.retrieved
                   if f"file{own}.txt " in text or f"unique {own} " in text)


def test_build_without_copy_ops_keeps_literal_targets(tmp_path):
    transitions = [row for i in range(30) for row in episode(i)]
    build_datasets(transitions, BuildParams(test_fraction=0.3, retrieval_k=1), tmp_path)
    assert all(e.target is None for e in load_examples(tmp_path / "sft" / "train.jsonl"))


def test_rl_rewards_read_the_expanded_completion():
    inputs = trl_inputs(prompts=[[{"role": "user", "content": "ls"}]],
                        completions=[[{"role": "assistant", "content": "**Environment Observation:**\n[[copy previous]]"}]],
                        observation=["a.txt"], domain=["terminal"], copy_sources=[[[COPY_PREVIOUS, "a.txt"]]])
    assert inputs[0].generation == "**Environment Observation:**\na.txt"


def test_a_repeated_action_is_flagged_and_copies_its_latest_earlier_answer():
    example = WorldModelExample(id="e:003", domain="terminal", system="s", action="ls",
                                history=[("ls", "a.txt"), ("touch b.txt", ""), ("ls", "a.txt b.txt"), ("pwd", "/w")],
                                memory=["Similar real transition: (same action)\n>>> ls\nc.txt"], retrieved=["c.txt"])
    assert example.earlier() == (2, "a.txt b.txt")                      # the latest repeat, not the first
    assert expand_copies(COPY_EARLIER, example.copy_sources()) == "a.txt b.txt"
    user = example.prompt_messages()[-1]["content"]
    assert user.startswith("ls\n\nSimilar real transition:") and user.endswith("\nc.txt\nSame action as 2 turns ago.")
    # No cue for a new action, nor for a model without retrieval memory (the official layout).
    assert "Same action" not in WorldModelExample(id="e:1", domain="terminal", system="s", action="cat a.txt",
                                                  history=[("ls", "a.txt")], memory=[""]).prompt_messages()[-1]["content"]
    plain = WorldModelExample(id="e:1", domain="terminal", system="s", action="ls", history=[("ls", "a.txt")])
    assert plain.prompt_messages()[-1]["content"] == "ls"
    assert plain.copy_sources()[COPY_EARLIER] == "a.txt"
