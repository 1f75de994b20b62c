"""Stage `corpora`: the offline professional corpora that CPT mixes with trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.data.corpora import build_corpora
from agentworld.tracking.runs import stage_run
from stages.paths import StagePaths


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    with stage_run("corpora", params, params.corpora, parent_run_id, root=root):
        counts = build_corpora(paths.corpora, params.corpora.sources, params.corpora.max_chars_per_doc)
        mlflow.log_metrics({f"{source}.{key}": value for source, c in counts.items() for key, value in c.items()})
    summary = {"sources": counts, "documents": sum(c["documents"] for c in counts.values()),
               "chars": sum(c["chars"] for c in counts.values())}
    paths.write_report("corpora.json", summary)
    return summary
