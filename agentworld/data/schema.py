"""Trajectory schema: the one record layout every domain writes and every stage reads.

A trajectory is stored as one JSON line per transition (flat rows), so a broken line loses
one transition, never a whole file, and validation can name the exact row and field.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

Source = Literal["real", "synthetic"]

#: Fields every transition row must carry, in file order.
REQUIRED_FIELDS = (
    "id", "trajectory_id", "turn", "domain", "env_id", "task_id", "instruction", "action",
    "observation", "reward", "done", "source", "policy", "env_version", "seed", "timestamp",
)

#: The `info` key of an episode's first row (turn 0) holding what the environment's reset
#: showed: the world model's system prompt carries it as the opening state.
FIRST_OBSERVATION = "first_observation"


class Transition(BaseModel):
    """(history, action, observation, reward, done) of one step; history = earlier turns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: StrictStr = Field(min_length=1)
    trajectory_id: StrictStr = Field(min_length=1)
    turn: StrictInt = Field(ge=0)
    domain: StrictStr = Field(min_length=1)
    env_id: StrictStr = Field(min_length=1)
    task_id: StrictStr = Field(min_length=1)
    instruction: StrictStr
    action: StrictStr = Field(min_length=1)
    observation: StrictStr
    reward: StrictFloat | StrictInt
    done: StrictBool
    source: Source
    policy: StrictStr = Field(min_length=1)
    env_version: StrictStr = Field(min_length=1)
    seed: StrictInt
    timestamp: StrictStr = Field(min_length=1)
    info: dict[str, Any] = Field(default_factory=dict)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def transition_id(trajectory_id: str, turn: int) -> str:
    return f"{trajectory_id}:{turn:03d}"


def first_observation(turns: list[Transition]) -> str | None:
    """What the reset of an episode (its rows in turn order) showed, when its first row kept it."""
    if not turns or turns[0].turn != 0:
        return None
    value = turns[0].info.get(FIRST_OBSERVATION)
    return value if isinstance(value, str) else None


def group_trajectories(rows: list[Transition]) -> dict[str, list[Transition]]:
    """Rows by trajectory, each list in turn order (file order is not trusted)."""
    out: dict[str, list[Transition]] = {}
    for row in rows:
        out.setdefault(row.trajectory_id, []).append(row)
    for turns in out.values():
        turns.sort(key=lambda r: r.turn)
    return out
