"""How the ranked memory grows with data: held-out scores against the number of training episodes.

    .venv/bin/python bench/memory_scaling.py [--data data/sft] [--fractions 0.125 0.25 0.5 1] [--seeds 0 1]

The pipeline's world model copies its ranked memory's first candidate (README: Evaluation), so
what that memory reaches bounds what the model reaches. This bench rebuilds the memory as the
build stage does (TF-IDF index and candidate scorer, `build.*` of params.yaml) from a random
share of the training episodes of a built split (`data/sft/train.jsonl`; run `agentworld stage
build` or a pipeline first), a few seeds per share, and scores every held-out turn
(`data/sft/test.jsonl`): the first ranked candidate (what the model copies), the best candidate
of its pool (a perfect ranking: the ceiling of copying), and the retrieval baseline (TF-IDF's
nearest neighbour). Scores are means over domains (the evaluate stage samples each domain
equally), exact match and token F1, with the spread over seeds. It says whether more data of
the same kind would help, and how much per doubling; it trains no language model, so it runs in
about a minute on the demo's data. Results also go to reports/bench/memory_scaling.{json,csv}
(the CSV is the DVC plot `memory_scaling`).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentworld.config import BuildParams, load_params  # noqa: E402
from agentworld.data.build import load_examples  # noqa: E402
from agentworld.data.prompts import WorldModelExample  # noqa: E402
from agentworld.data.retrieval import RetrievalMemory, episode_of  # noqa: E402
from agentworld.evaluation.baselines import RetrievalBaseline  # noqa: E402
from agentworld.scoring.metrics import exact_match, token_f1  # noqa: E402

SYSTEMS = ("ranked_first", "ranked_oracle", "retrieval")


def domain_mean(per_turn: Sequence[tuple[str, float]]) -> float:
    """Mean over domains of each domain's mean (every domain weighs the same)."""
    by_domain: dict[str, list[float]] = defaultdict(list)
    for domain, value in per_turn:
        by_domain[domain].append(value)
    return statistics.fmean(statistics.fmean(v) for v in by_domain.values())


def score(train: Sequence[WorldModelExample], test: Sequence[WorldModelExample], build: BuildParams
          ) -> dict[str, dict[str, float]]:
    """Exact match and token F1 (domain means) of each system with a memory of `train`."""
    memory = RetrievalMemory.from_examples(train, build.retrieval_k, build.retrieval_max_chars, build.retrieval_pool)
    memory.fit_scorer(train, build.seed)
    rows: dict[str, dict[str, list[tuple[str, float]]]] = {s: {"exact_match": [], "token_f1": []} for s in SYSTEMS}
    for example, pool, nearest in zip(test, memory.ranked(test), RetrievalBaseline(train).predict(test), strict=True):
        real = example.observation
        texts = {"ranked_first": [pool[0].observation] if pool else [""],
                 "ranked_oracle": [c.observation for c in pool] or [""],
                 "retrieval": [nearest]}
        for system, options in texts.items():
            rows[system]["exact_match"].append((example.domain, max(exact_match(o, real) for o in options)))
            rows[system]["token_f1"].append((example.domain, max(token_f1(o, real) for o in options)))
    return {s: {m: domain_mean(v) for m, v in metrics.items()} for s, metrics in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/sft"), help="a built split (train.jsonl, test.jsonl)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="whose build.* settings to use")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.125, 0.25, 0.5, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=Path("reports/bench/memory_scaling"))
    args = parser.parse_args()
    for name in ("train.jsonl", "test.jsonl"):
        if not (args.data / name).exists():
            sys.exit(f"{args.data / name} not found: build a split first (agentworld stage build, or make demo)")
    if any(not 0 < f <= 1 for f in args.fractions):
        sys.exit(f"--fractions {args.fractions}: each must be in (0, 1]")
    build = load_params(args.params).build
    train, test = load_examples(args.data / "train.jsonl"), load_examples(args.data / "test.jsonl")
    episodes = sorted({episode_of(e.id) for e in train})
    print(f"{len(train)} training turns in {len(episodes)} episodes, {len(test)} held-out turns "
          f"({len({e.domain for e in test})} domains); domain means, mean (min-max) over seeds")
    header = f"{'episodes':>9} {'turns':>6} " + " ".join(f"{s + ' EM / F1':>30}" for s in SYSTEMS) + f" {'s':>5}"
    print(header)
    results = []
    for fraction in sorted(args.fractions):
        runs = []
        for seed in args.seeds if fraction < 1 else args.seeds[:1]:  # all episodes: one draw
            keep = set(random.Random(seed).sample(episodes, max(1, round(len(episodes) * fraction))))
            subset = [e for e in train if episode_of(e.id) in keep]
            start = time.perf_counter()
            runs.append({"seed": seed, "episodes": len(keep), "turns": len(subset), "scores": score(subset, test, build),
                         "seconds": time.perf_counter() - start})
        cells = []
        for system in SYSTEMS:
            em = [r["scores"][system]["exact_match"] for r in runs]
            f1 = [r["scores"][system]["token_f1"] for r in runs]
            cells.append(f"{statistics.fmean(em):.3f} ({min(em):.2f}-{max(em):.2f}) / {statistics.fmean(f1):.3f}")
        print(f"{runs[0]['episodes']:>9} {round(statistics.fmean(r['turns'] for r in runs)):>6} "
              + " ".join(f"{c:>30}" for c in cells) + f" {statistics.fmean(r['seconds'] for r in runs):>5.0f}",
              flush=True)
        results.append({"fraction": fraction, "runs": runs})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"data": str(args.data), "results": results}, indent=1))
    with args.out.with_suffix(".csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["episodes", *(f"{s}_{m}" for s in SYSTEMS for m in ("exact_match", "token_f1"))])
        for result in results:
            runs = result["runs"]
            writer.writerow([runs[0]["episodes"], *(round(statistics.fmean(r["scores"][s][m] for r in runs), 4)
                                                    for s in SYSTEMS for m in ("exact_match", "token_f1"))])
    print(f"wrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
