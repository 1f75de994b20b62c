"""Which simulator verifier agrees with the real TextWorld game, on an agent experiment's episodes.

Reads the WM2Real rows (`seed*/<arm>/wm2real_episodes.jsonl`) of an `agentworld experiment
sim-rl` run folder (runs/experiments/sim_rl/<timestamp>): each row holds the actions an agent
chose inside the world model, the recorded verifier's claim and the real outcome of the same
actions. Next to it, what the `reference` verifier claims on the same actions (the game's
walkthrough's last command among them; the generated game is rebuilt from the row's seed).

    python scripts/textworld_verifiers.py runs/experiments/sim_rl/20261207-170114

Caveat: where the recorded verifier ended an episode early, reference is judged on that prefix.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentworld.agents.episodes import task_options
from agentworld.domains import make_env
from agentworld.simulation.verifiers import normalise

TEMPLATES = ["tw-coin_collector", "tw-treasure_hunter"]


def main(run_dir: Path) -> None:
    env = make_env("textworld")
    finals: dict[int, str] = {}
    counts: dict[str, dict[str, int]] = {}
    try:
        for path in sorted(run_dir.glob("seed*/*/wm2real_episodes.jsonl")):
            for row in map(json.loads, path.read_text().splitlines()):
                if row["seed"] not in finals:
                    env.reset(seed=row["seed"], options=task_options(TEMPLATES, row["seed"]))
                    finals[row["seed"]] = normalise(env.task.solution[-1])
                reference = any(normalise(a) == finals[row["seed"]] for a in row["actions"])
                recorded, real = bool(row["sim_success"]), bool(row["real_success"])
                c = counts.setdefault(path.parent.name, dict.fromkeys(
                    ("n", "real", "rec", "rec_agree", "rec_false", "ref", "ref_agree", "ref_false"), 0))
                c["n"] += 1
                c["real"] += real
                c["rec"] += recorded
                c["rec_agree"] += recorded == real
                c["rec_false"] += recorded and not real
                c["ref"] += reference
                c["ref_agree"] += reference == real
                c["ref_false"] += reference and not real
    finally:
        env.close()
    print("| arm | episodes | real success | recorded verifier: claimed / agreement / false success "
          "| reference: claimed / agreement / false success |")
    print("|---|---|---|---|---|")
    for arm, c in counts.items():
        n = c["n"]
        print(f"| {arm} | {n} | {c['real'] / n:.3f} | {c['rec'] / n:.3f} / {c['rec_agree'] / n:.3f} / "
              f"{c['rec_false'] / n:.3f} | {c['ref'] / n:.3f} / {c['ref_agree'] / n:.3f} / {c['ref_false'] / n:.3f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
