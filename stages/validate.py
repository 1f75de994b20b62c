"""Stage `validate`: Great Expectations suites per domain, clean rows kept, rejected rows quarantined.

One dataset per domain (DVC stage `validate@<domain>`): the common transition suite plus the
domain's own expectations (agentworld/validation/domains.py). Fails closed: a domain stops the
pipeline only when its rejected share exceeds `validate.max_rejected_share`, and even then
every valid row is already written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.data.recording.recording import register_recordings
from agentworld.tracking.runs import stage_run
from agentworld.validation import RejectedShareExceeded, ValidationReport, validate_file
from stages.paths import StagePaths


def run(params: Params, root: Path, parent_run_id: str | None = None,
        domains: Sequence[str] | None = None) -> dict[str, Any]:
    """Validate `domains` (default: collect.domains and the recordings); returns per-domain reports."""
    paths = StagePaths(root)
    summary: dict[str, Any] = {"total_rows": 0, "clean": 0, "rejected": 0, "domains": {}}
    register_recordings(params, root)
    for domain in domains or params.dataset_domains:
        source = paths.domain_trajectories(domain)
        if not source.exists():
            raise FileNotFoundError(f"validate: {source} not found; run the collect stage for {domain!r} first")
        with stage_run("validate", params, params.validate_, parent_run_id, domain=domain, root=root):
            try:
                report = validate_file(
                    source, paths.clean(domain), paths.quarantine(domain), params.validate_,
                    allowed_domains=[domain], docs_dir=paths.validation_docs(domain),
                    reward_range=(params.validate_.reward_min, params.validate_.reward_max),
                )
            except RejectedShareExceeded as err:
                _log(domain, err.report, paths)
                raise
            _log(domain, report, paths)
        summary["domains"][domain] = report.to_dict()
        for key in ("total_rows", "clean", "rejected"):
            summary[key] += getattr(report, key)
    summary["rejected_share"] = summary["rejected"] / summary["total_rows"] if summary["total_rows"] else 0.0
    return summary


def _log(domain: str, report: ValidationReport, paths: StagePaths) -> None:
    summary = report.to_dict()
    paths.write_report(f"validate/{domain}.json", summary)
    mlflow.log_metrics({"rows": report.total_rows, "clean_rows": report.clean, "rejected_rows": report.rejected,
                        "rejected_share": report.rejected_share})
    mlflow.log_dict(summary, "validation_report.json")
    docs = paths.validation_docs(domain)
    if docs.exists():
        mlflow.log_artifacts(str(docs), artifact_path="data_docs")
    if report.rejected:
        mlflow.log_artifact(str(paths.quarantine(domain)), artifact_path="quarantine")
