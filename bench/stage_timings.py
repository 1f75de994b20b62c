"""Stage timings of the latest pipeline run, read from its MLflow child runs.

Run `make demo` first (or pass --tracking-uri of another store). Prints each stage's wall
time, its share of the pipeline, and the median over the last N pipeline runs that ran it.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from mlflow import MlflowClient

STAGES = ("collect", "validate", "corpora", "build", "tokenizer", "cpt", "sft", "rl", "evaluate", "promote")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tracking-uri", default=f"sqlite:///{Path('mlflow/mlruns.db').resolve()}")
    parser.add_argument("--experiment", default="agentworld")
    parser.add_argument("--last", type=int, default=5, help="pipeline runs to take the median over")
    args = parser.parse_args()

    client = MlflowClient(tracking_uri=args.tracking_uri)
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        raise SystemExit(f"no experiment {args.experiment!r} in {args.tracking_uri}; run `make demo` first")
    runs = client.search_runs([experiment.experiment_id], "tags.`agentworld.kind` = 'stage'", max_results=500,
                              order_by=["attributes.start_time DESC"])
    seconds: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for run in runs:
        stage = run.data.tags.get("stage")
        if stage in seconds and run.info.end_time and len(seconds[stage]) < args.last:
            seconds[stage].append((run.info.end_time - run.info.start_time) / 1000)
    latest = {stage: values[0] for stage, values in seconds.items() if values}
    if not latest:
        raise SystemExit("no finished stage runs yet; run `make demo` first")
    total = sum(latest.values())
    print(f"{'stage':10s} {'latest s':>9s} {'share':>7s} {'median s':>9s} {'runs':>5s}")
    for stage in STAGES:
        if stage in latest:
            values = seconds[stage]
            print(f"{stage:10s} {latest[stage]:9.1f} {latest[stage] / total:7.1%} {statistics.median(values):9.1f} {len(values):5d}")
    print(f"{'total':10s} {total:9.1f}")


if __name__ == "__main__":
    main()
