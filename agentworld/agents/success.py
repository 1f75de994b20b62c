"""Task success and invalid actions, read from a step's reward and info.

Real and simulated environments answer alike: a real env's checker, or a WorldModelEnv's
verifier (agentworld/simulation/verifiers.py), gives reward 1.0 at the step that solves the task.
"""

from __future__ import annotations


def solved(reward: float, info: dict) -> bool:
    """A step that solved its task: the env's `won` flag where it has one (TextWorld scores
    points before the game is won), else a positive reward (the checker or verifier passed)."""
    return bool(info["won"]) if "won" in info else reward > 0


def invalid_action(action: str, info: dict) -> bool:
    """An action the real environment rejected: empty, failed (non-zero exit), timed out, or a
    game command that was not admissible where it was given (TextWorld). A simulated step
    carries none of these facts, so only real steps are counted."""
    if info.get("simulated"):
        return False
    return (not action.strip() or bool(info.get("timed_out")) or int(info.get("exit_code", 0) or 0) != 0
            or info.get("admissible") is False)
