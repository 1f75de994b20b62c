"""Stage `collect`: play behaviour policies in the real environments, write trajectories."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.data.collect import collect_parallel
from agentworld.data.io import write_jsonl
from agentworld.tracking.runs import stage_run
from tasks.paths import StagePaths


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    summary: dict[str, Any] = {"transitions": 0, "episodes": 0, "domains": {}}
    with stage_run("collect", params, params.collect, parent_run_id):
        for domain in params.collect.domains:
            start = time.perf_counter()
            rows = collect_parallel(domain, params.collect, params.sandbox)
            seconds = time.perf_counter() - start
            write_jsonl(paths.domain_trajectories(domain), rows)
            episodes = len({r.trajectory_id for r in rows})
            policies = Counter(r.policy for r in rows)
            summary["domains"][domain] = {
                "transitions": len(rows),
                "episodes": episodes,
                "seconds": round(seconds, 2),
                "transitions_per_s": round(len(rows) / max(seconds, 1e-9), 2),
                "policies": dict(policies),
            }
            summary["transitions"] += len(rows)
            summary["episodes"] += episodes
            mlflow.log_metrics(
                {
                    f"{domain}.transitions": len(rows),
                    f"{domain}.episodes": episodes,
                    f"{domain}.transitions_per_s": len(rows) / max(seconds, 1e-9),
                    **{f"{domain}.policy.{name}": count for name, count in policies.items()},
                }
            )
        mlflow.log_metrics({"transitions": summary["transitions"], "episodes": summary["episodes"]})
        mlflow.log_dict(summary, "collect_summary.json")
    paths.write_report("collect.json", summary)
    return summary
