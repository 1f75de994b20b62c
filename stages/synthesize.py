"""Stage `synthesize`: synthetic trajectories from the world model (WorldModelEnv), validated by
the same Great Expectations suites as real data; DVC-tracked under data/synthetic/."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.data.io import write_jsonl
from agentworld.models.backends import TransformersBackend
from agentworld.simulation.synthesize import summary, synthesize_domain
from agentworld.tracking.runs import stage_run
from agentworld.validation import validate_file
from stages.paths import StagePaths
from stages.training import trained_report


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    settings = params.synthesize
    trained = trained_report(paths, settings.stage, "synthesize.stage")
    label = (f"models:/{trained['registered_model']}/{trained['registered_version']}"
             if trained.get("registered_version") else str(paths.stage_model(settings.stage)))
    backend = TransformersBackend(paths.stage_model(settings.stage), settings.max_new_tokens, settings.batch,
                                  params.model.max_seq_len)
    result: dict[str, Any] = {"world_model": label, "control": settings.control.model_dump(), "domains": {}}
    for domain in settings.domains:
        with stage_run("synthesize", params, settings, parent_run_id, domain=domain, root=root):
            mlflow.set_tag("world_model", label)
            start = time.monotonic()
            rows = list(synthesize_domain(domain, backend, settings, label))
            seconds = time.monotonic() - start
            raw = paths.synthetic(domain)
            write_jsonl(raw, (r.model_dump(mode="json") for r in rows))
            rules = params.validate_.model_copy(update={"max_rejected_share": settings.max_rejected_share})
            checked = validate_file(raw, paths.synthetic(domain, "clean"), paths.synthetic(domain, "quarantine"),
                                    rules, allowed_domains=[domain],
                                    reward_range=(params.validate_.reward_min, params.validate_.reward_max))
            stats = {**summary(rows), "clean": checked.clean, "rejected": checked.rejected,
                     "seconds": round(seconds, 1), "steps_per_s": round(len(rows) / seconds, 2) if seconds else 0.0}
            mlflow.log_metrics({k: float(v) for k, v in stats.items()})
            result["domains"][domain] = stats
    paths.write_report("synthesize.json", result)
    return result
