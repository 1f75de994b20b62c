"""Stage `validate`: Great Expectations suite, clean rows kept, rejected rows quarantined.

Fails closed: the stage stops the pipeline only when the rejected share exceeds
`validate.max_rejected_share`, and even then every valid row is already written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.tracking.runs import stage_run
from agentworld.validation import RejectedShareExceeded, ValidationReport, validate_files
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
                reward_range=(params.validate_.reward_min, params.validate_.reward_max),
            )
        except RejectedShareExceeded as err:
            _log(err.report, paths)
            raise
        _log(report, paths)
    return report.to_dict()


def _log(report: ValidationReport, paths: StagePaths) -> None:
    summary = report.to_dict()
    paths.write_report("validate.json", summary)
    mlflow.log_metrics(
        {
            "rows": report.total_rows,
            "clean_rows": report.clean,
            "rejected_rows": report.rejected,
            "rejected_share": report.rejected_share,
        }
    )
    mlflow.log_dict(summary, "validation_report.json")
    if paths.validation_docs.exists():
        mlflow.log_artifacts(str(paths.validation_docs), artifact_path="data_docs")
    if report.rejected:
        mlflow.log_artifact(str(paths.quarantine), artifact_path="quarantine")
