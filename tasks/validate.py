"""Stage `validate`: Great Expectations suite, clean rows kept, rejected rows quarantined.

Fails closed: the stage stops the pipeline only when the rejected share exceeds
`validate.max_rejected_share`, and even then every valid row is already written.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.validation import RejectedShareExceeded, validate_files
from agentworld.tracking.runs import stage_run
from tasks.paths import StagePaths


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    inputs = sorted(paths.trajectories.glob("*.jsonl"))
    if not inputs:
        raise FileNotFoundError(f"validate: no trajectory files in {paths.trajectories}; run the collect stage first")
    with stage_run("validate", params, params.validate_, parent_run_id):
        try:
            report = validate_files(
                inputs,
                clean_path=paths.clean,
                quarantine_path=paths.quarantine,
                params=params.validate_,
                allowed_domains=params.collect.domains,
                docs_dir=paths.validation_docs,
            )
        except RejectedShareExceeded as err:
            _log(err.report)
            raise
        _log(report)
    summary = _summary(report)
    paths.report("validate.json").write_text(json.dumps(summary, indent=2))
    return summary


def _summary(report: Any) -> dict[str, Any]:
    data = asdict(report)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()}


def _log(report: Any) -> None:
    mlflow.log_metrics(
        {
            "rows": report.total,
            "clean_rows": report.clean,
            "rejected_rows": report.rejected,
            "rejected_share": report.rejected_share,
        }
    )
    mlflow.log_dict(_summary(report), "validation_report.json")
    docs = getattr(report, "docs_dir", None)
    if docs and Path(docs).exists():
        mlflow.log_artifacts(str(docs), artifact_path="data_docs")
    if report.rejected and Path(report.quarantine_path).exists():
        mlflow.log_artifact(str(report.quarantine_path), artifact_path="quarantine")
