"""The textworld domain, declared for the shared layers (see `agentworld.domains.base.Domain`).

TextWorld (games generated locally with tw-make): simple, coin-collector, treasure-hunter and
cooking text adventures, one game per seed.
"""

from agentworld.domains import lazy
from agentworld.domains.base import Domain, ShapeRule
from agentworld.domains.textworld.rationale import describe_textworld

#: Actions that end an episode (the agents’ done action).
END_ACTIONS = frozenset({"submit"})
#: What the game prints when it is won, and only then: its closing banner and a full score
#: ("*** The End ***" ... "You scored 3 out of a possible 3, in 11 turns."). A lost game prints
#: "*** You lost! ***" and a lower score.
SUCCESS_MARKER = r"\*\*\* The End \*\*\*\s+You scored (\d+) out of a possible \1\b"
#: The game types `tw-make` generates here (a task's "template" is its game type).
GAME_TYPES: tuple[str, ...] = ("tw-simple", "tw-coin_collector", "tw-treasure_hunter", "tw-cooking")
WORLD_MODEL_PROMPT = (
    "You are a world model of a TextWorld text adventure: rooms, doors, containers and objects the "
    "player can take, open, cook and eat. Given the player's command, answer with exactly what the "
    "game prints: room descriptions, the effect of the command, the inventory, or the game's refusal."
    " Keep the world consistent across turns."
)

DOMAIN = Domain(
    name="textworld",
    description=(
        "TextWorld (games generated locally with tw-make): simple, coin-collector, treasure-hunter "
        "and cooking text adventures, one game per seed"
    ),
    entry_point="agentworld.domains.textworld.env:factory",
    probe=lazy("agentworld.domains.textworld.env", "probe"),
    policies=lazy("agentworld.domains.textworld.env", "textworld_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    shape_rules=(ShapeRule("the game answers every command with some text", "non_empty"),),
    describer=describe_textworld,
    judge_title="a TextWorld text adventure",
    judge_format="Game text only.",
    judge_notes=(
        "Rooms, exits, objects, the inventory and the effects of commands must match the reference; "
        "flavour text need only be plausible."
    ),
    end_actions=END_ACTIONS,
    success_marker=SUCCESS_MARKER,
    agent_prompt=(
        "You play the text adventure in the first message until you win it. Reply with exactly one "
        "game command per turn (go north, take ..., open ...). Reply submit when the game is won."
    ),
    done_action="submit",
    corpus_sources={"game_rules": lazy("agentworld.domains.textworld.cpt_corpus", "textworld_rules")},
    task_templates=lambda: GAME_TYPES,
    agent_templates=("tw-coin_collector", "tw-treasure_hunter"),  # games an agent can win in a few moves
)
