"""Stage `collect`: play behaviour policies in the real environments, one dataset per domain.

Each domain is its own DVC stage (`collect@<domain>`, see dvc.yaml) and its own MLflow run,
so adding a domain re-collects only that domain. Interrupted collection resumes from the
finished shards under data/.collect-parts/ (see `collect_parallel`).
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow
from rich.console import Console
from rich.table import Table

from agentworld.config import Params
from agentworld.data.collect import collect_parallel
from agentworld.data.io import write_jsonl
from agentworld.data.recording.recording import Recording
from agentworld.data.schema import Transition
from agentworld.tracking.runs import stage_run
from stages.paths import StagePaths


def run(params: Params, root: Path, parent_run_id: str | None = None,
        domains: Sequence[str] | None = None) -> dict[str, Any]:
    """Collect `domains` (default: collect.domains and the recordings); returns per-domain summaries.
    A recorded system's rows are taken from its recording (`recordings` in params.yaml)."""
    paths = StagePaths(root)
    summary: dict[str, Any] = {"transitions": 0, "episodes": 0, "domains": {}}
    for domain in domains or params.dataset_domains:
        with stage_run("collect", params, params.collect, parent_run_id, domain=domain, root=root):
            start = time.perf_counter()
            if domain in params.recordings:
                rows = recorded_rows(Recording.load(root / params.recordings[domain], domain))
            else:
                rows = collect_parallel(domain, params.collect, params.sandbox, parts_dir=paths.collect_parts)
            seconds = time.perf_counter() - start
            write_jsonl(paths.domain_trajectories(domain), rows)
            shutil.rmtree(paths.collect_parts / domain, ignore_errors=True)  # written: parts are spent
            stats = domain_stats(rows, seconds, params.collect.workers)
            mlflow.log_metrics({k: v for k, v in stats.items() if isinstance(v, (int, float))})
            mlflow.log_metrics({f"policy.{name}": n for name, n in stats["policies"].items()})
            mlflow.log_dict(stats, "collect_summary.json")
        paths.write_report(f"collect/{domain}.json", stats)
        summary["domains"][domain] = stats
        summary["transitions"] += stats["transitions"]
        summary["episodes"] += stats["episodes"]
    Console(stderr=True).print(summary_table(summary["domains"]))
    return summary


def recorded_rows(recording: Recording) -> list[Transition]:
    """A recording's rows as the domain it is declared as (its name in params.yaml)."""
    rows = recording.rows()
    if not rows:
        raise FileNotFoundError(f"collect {recording.name}: {recording.directory} holds no recorded calls yet")
    return [row if row.domain == recording.name else row.model_copy(update={"domain": recording.name})
            for row in rows]


def domain_stats(rows: list[Transition], seconds: float, workers: int) -> dict[str, Any]:
    episodes = {r.trajectory_id for r in rows}
    solved = {r.trajectory_id for r in rows if r.reward > 0}
    return {
        "transitions": len(rows),
        "episodes": len(episodes),
        "solved_share": round(len(solved) / max(len(episodes), 1), 4),
        "mean_steps": round(len(rows) / max(len(episodes), 1), 2),
        "seconds": round(seconds, 2),
        "transitions_per_s": round(len(rows) / max(seconds, 1e-9), 2),
        "workers": workers,
        "policies": dict(Counter(r.policy for r in rows)),
    }


def summary_table(domains: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="collected trajectories")
    for column in ("domain", "episodes", "transitions", "steps/episode", "solved", "seconds", "transitions/s",
                   "policies"):
        table.add_column(column, justify="left" if column in ("domain", "policies") else "right")
    for domain, s in domains.items():
        policies = " ".join(f"{k}={v}" for k, v in sorted(s["policies"].items()))
        table.add_row(domain, str(s["episodes"]), str(s["transitions"]), f"{s['mean_steps']:.1f}",
                      f"{s['solved_share']:.0%}", f"{s['seconds']:.1f}", f"{s['transitions_per_s']:.1f}", policies)
    return table
