"""Stage `build`: clean transitions -> SFT set and held-out set (split by episode),
plus the held-out split in the public AgentWorldBench JSONL layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.data.build import build_datasets
from agentworld.data.io import read_transitions
from agentworld.data.recording.recording import register_recordings
from agentworld.tracking.runs import file_md5, stage_run
from stages.paths import StagePaths


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    register_recordings(params, root)
    sources = [paths.clean(domain) for domain in params.dataset_domains]
    missing = [str(p) for p in sources if not p.exists()]
    if missing:
        raise FileNotFoundError(f"build: {', '.join(missing)} not found; run the validate stage first")
    with stage_run("build", params, params.build, parent_run_id, root=root):
        rows = [row for source in sources for row in read_transitions(source)]
        counts = build_datasets(rows, params.build, paths.sft_dir)
        counts.update(train_md5=file_md5(paths.sft_train), test_md5=file_md5(paths.sft_test))
        mlflow.log_metrics({k: v for k, v in counts.items() if isinstance(v, int)})
        mlflow.set_tags({"data.train_md5": counts["train_md5"], "data.test_md5": counts["test_md5"]})
    return counts
