"""The validated-trajectories Assets: what collect_and_validate publishes and the training
DAGs are scheduled on. URIs name the logical datasets; where a run wrote them is in each
event's `extra`."""

from __future__ import annotations

from typing import Any

from agentworld_dags.runs import run_root

VALIDATED_URI = "agentworld://datasets/validated-trajectories"
VALIDATED_DOMAIN_URI = "agentworld://datasets/validated/{domain}"
VALIDATED_ALIAS = "agentworld-validated-domain"


def validated_asset() -> Any:
    """All validated domains of a run: what the training DAGs are scheduled on."""
    from airflow.sdk import Asset

    return Asset(uri=VALIDATED_URI, name="validated_trajectories", group="agentworld")


def validated_domain_asset(domain: str) -> Any:
    from airflow.sdk import Asset

    return Asset(uri=VALIDATED_DOMAIN_URI.format(domain=domain), name=f"validated_{domain}", group="agentworld")


def validated_alias() -> Any:
    """Per-domain assets are resolved at run time through this alias (domains come from params)."""
    from airflow.sdk import AssetAlias

    return AssetAlias(VALIDATED_ALIAS)


def validated_domain_event(domain: str, report: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Extra of a per-domain Asset event: where the run wrote the validated rows, and how many."""
    return {"domain": domain, "run_id": run_id, "path": report["clean_path"], "clean_rows": report["clean"],
            "rejected_rows": report["rejected"]}


def validated_set_event(events: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    """Extra of the whole validated set's Asset event: the run's workspace and each domain's rows."""
    return {"run_id": run_id, "workspace": str(run_root(run_id)),
            "domains": {e["domain"]: {"clean_rows": e["clean_rows"], "path": e["path"]} for e in events}}


def triggering_validated_extra(triggering_asset_events: Any) -> dict[str, Any] | None:
    """The extra of the latest validated-set Asset event that triggered a run (None: run by hand)."""
    validated = None
    for asset_events in (triggering_asset_events or {}).values():
        if asset_events:
            validated = asset_events[-1].extra
    return validated

