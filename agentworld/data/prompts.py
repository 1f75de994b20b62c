"""World-model prompts in the Qwen-AgentWorld chat layout.

system: the domain's world-model prompt, the episode's task and what the environment showed at
        the start (its reset observation, without the task it repeats);
user: the agent's action (earlier turns carry the history); the current one is followed, when
      the model was trained with retrieval memory (agentworld/data/retrieval.py), by the most
      similar real transitions and a note when it repeats an earlier action of the episode;
assistant: optional `<think>...</think>`, then `**Environment Observation:**` and the observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentworld.data.copying import copy_sources
from agentworld.domains import find_domain

OBSERVATION_MARKER = "**Environment Observation:**"


def user_turn(action: str, memory: str | None = None) -> str:
    """The user message of one turn: the action, then its retrieved transitions, if any."""
    return f"{action}\n\n{memory}" if memory else action


def repeat_note(turns_ago: int) -> str:
    """The cue that the current action repeats an earlier one of the episode (what
    `[[copy earlier]]` copies): spotting a repeat across the history is easy to state and hard
    for a small model to compute."""
    return f"Same action as {turns_ago} turn{'s' if turns_ago > 1 else ''} ago."


TASK_MARKER = "The agent's task: "
#: Heads the episode's opening state in the system prompt. It is context only, not turn 0's
#: previous observation: as that, it steered first-turn lookups to episodes that merely start
#: alike and made the ranked memory's first candidate worse (README, Opening state).
OPENING_MARKER = "The environment at the start:"
_OPENING_BLOCK = f"\n\n{OPENING_MARKER}\n"
#: Characters of the opening state kept in the system prompt. A constant, not a build setting:
#: the simulator must write the very prompt the model was trained on.
OPENING_MAX_CHARS = 480


def opening_state(instruction: str, first_observation: str) -> str:
    """What a reset showed beyond the task (a game's first room, a page, a tool list), capped.

    Without it a world model continues a TextWorld game whose layout it has never seen and
    invents rooms from training games."""
    state = first_observation.strip()
    if instruction.strip() and state.startswith(instruction.strip()):
        state = state[len(instruction.strip()):].strip()
    return state[:OPENING_MAX_CHARS]


def system_prompt(domain: str, instruction: str, first_observation: str | None = None) -> str:
    """The domain's world-model prompt, the task and, when known, the episode's opening state."""
    declared = find_domain(domain)
    base = declared.world_model_prompt if declared is not None else ""
    if not base:
        raise KeyError(f"no world-model system prompt for domain {domain!r}; declare world_model_prompt in "
                       f"agentworld/domains/{domain}/__init__.py")
    state = opening_state(instruction, first_observation) if first_observation else ""
    opening = f"{_OPENING_BLOCK}{state}" if state else ""
    return f"{base}\n\n{TASK_MARKER}{instruction}{opening}"


def task_of(system: str) -> str:
    """The task a system prompt of ours states ("" for another layout)."""
    if TASK_MARKER not in system:
        return ""
    return system.split(TASK_MARKER, 1)[1].split(_OPENING_BLOCK, 1)[0]


def opening_of(system: str) -> str | None:
    """The opening state a system prompt of ours carries, or None."""
    return system.split(_OPENING_BLOCK, 1)[1] if _OPENING_BLOCK in system else None


def assistant_turn(observation: str, reasoning: str | None = None) -> str:
    think = f"<think>{reasoning}</think>\n" if reasoning else ""
    return f"{think}{OBSERVATION_MARKER}\n{observation}"


#: The answer tag of the official AgentWorldBench models (`<predicted_observation>...</...>`).
ANSWER_TAG = "predicted_observation"


def parse_observation(generation: str) -> tuple[str, bool]:
    """Observation text of a generation, and whether it followed the format (our marker, or the
    official models' last `<predicted_observation>` block, as the official scorer parses it)."""
    text = generation
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    if f"<{ANSWER_TAG}>" in text:
        text = text.rsplit(f"<{ANSWER_TAG}>", 1)[1].split(f"</{ANSWER_TAG}>", 1)[0]
        return text.replace(OBSERVATION_MARKER, "").strip("\n"), True
    if OBSERVATION_MARKER not in text:
        return text.strip("\n"), False
    return text.split(OBSERVATION_MARKER, 1)[1].lstrip("\n").rstrip("\n"), True


@dataclass
class WorldModelExample:
    """One next-observation prediction: the context, the action and the real observation."""

    id: str
    domain: str
    system: str
    history: list[tuple[str, str]] = field(default_factory=list)  # (action, observation) pairs, oldest first
    action: str = ""
    observation: str = ""
    reasoning: str | None = None
    #: Rendered retrieved transitions of the last turns shown, oldest first (the retrieval
    #: memory writes one, for the current action), or None for a model without retrieval memory.
    memory: list[str] | None = None
    #: Full observations of the current action's retrieved transitions, most similar first:
    #: what `[[copy memory N]]` copies (agentworld/data/copying.py).
    retrieved: list[str] | None = None
    #: The training target when it differs from the real observation (a copy op); None: literal.
    target: str | None = None

    def earlier(self) -> tuple[int, str] | None:
        """(turns ago, observation) of the latest history turn whose action is the current one."""
        for back, (action, observation) in enumerate(reversed(self.history), start=1):
            if action == self.action:
                return back, observation
        return None

    def previous(self) -> tuple[str, str] | None:
        """(action, observation) of the turn before this one; None on the first turn (the
        opening state is context, not a previous turn)."""
        return self.history[-1] if self.history else None

    def copy_sources(self) -> dict[str, str]:
        """What this turn's copy ops stand for: the same action's earlier observation in this
        episode, the retrieved observations and the previous one."""
        earlier, previous = self.earlier(), self.previous()
        return copy_sources(previous[1] if previous else None, self.retrieved, earlier[1] if earlier else None)

    def current_user_turn(self) -> str:
        """The current action's user message: with retrieval memory (a model of ours, not the
        official layout) it is followed by the memory, then by a note when the action repeats an
        earlier turn."""
        memory = self.memory_of(len(self.history))
        earlier = self.earlier() if self.memory is not None else None
        if earlier is not None:
            # Last, next to the answer: a small model attends to what is near more easily.
            memory = "\n".join(part for part in (memory, repeat_note(earlier[0])) if part)
        return user_turn(self.action, memory)

    def memory_of(self, turn: int) -> str | None:
        """The memory block of history turn `turn` (len(history) = the current action)."""
        if not self.memory:
            return None
        offset = len(self.memory) - len(self.history) - 1  # memory may cover only the last turns
        return self.memory[turn + offset] if 0 <= turn + offset < len(self.memory) else None

    def prompt_messages(self, history_turns: int | None = None) -> list[dict[str, str]]:
        keep = len(self.history) if history_turns is None else min(history_turns, len(self.history))
        first = len(self.history) - keep
        messages = [{"role": "system", "content": self.system}]
        for turn in range(first, len(self.history)):
            action, observation = self.history[turn]
            messages.append({"role": "user", "content": user_turn(action, self.memory_of(turn))})
            messages.append({"role": "assistant", "content": assistant_turn(observation)})
        messages.append({"role": "user", "content": self.current_user_turn()})
        return messages

    def completion_messages(self) -> list[dict[str, str]]:
        observation = self.observation if self.target is None else self.target
        return [{"role": "assistant", "content": assistant_turn(observation, self.reasoning)}]
