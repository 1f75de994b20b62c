"""The scienceworld domain, declared for the shared layers (see `agentworld.domains.base.Domain`).

ScienceWorld (bundled Java simulator): short science tasks, one train variation per episode.
"""

from agentworld.domains import lazy
from agentworld.domains.base import Domain, ShapeRule
from agentworld.domains.scienceworld.rationale import describe_scienceworld

WORLD_MODEL_PROMPT = (
    "You are a world model of ScienceWorld, a text-based simulation of a house, a greenhouse, a "
    "workshop and the outdoors, with objects that obey simple physics, chemistry and biology. Given "
    "the agent's action, answer with exactly what the simulator prints: room descriptions, object "
    "states, inventory, or 'No known action matches that input.' Keep the world consistent across "
    "turns."
)

DOMAIN = Domain(
    name="scienceworld",
    description="ScienceWorld (bundled Java simulator): short science tasks, one train variation per episode",
    entry_point="agentworld.domains.scienceworld.env:factory",
    max_episode_steps=100,
    probe=lazy("agentworld.domains.scienceworld.env", "probe"),
    policies=lazy("agentworld.domains.scienceworld.env", "scienceworld_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    shape_rules=(ShapeRule("the simulator answers every action with some text", "non_empty"),),
    describer=describe_scienceworld,
    judge_title="the ScienceWorld simulator",
    judge_format="Simulator text only.",
    judge_notes=(
        "Object states, locations, the inventory and action effects must match; descriptive prose "
        "need only be plausible."
    ),
    corpus_sources={"game_rules": lazy("agentworld.domains.scienceworld.cpt_corpus", "scienceworld_rules")},
)
