"""What every task and the nightly run report when something goes wrong: a failure callback on
every task and a Deadline alert (Airflow 3's successor of SLAs) on the nightly pipeline run.

Both append one JSON line to AGENTWORLD_ALERT_LOG (default $AIRFLOW_HOME/logs/alerts.jsonl) and,
when AGENTWORLD_ALERT_WEBHOOK is set, post `{"text": ...}` to it: the payload of a Slack incoming
webhook (and of most chat webhooks), so pointing the variable at Slack is all the set-up there is.
`task_defaults` is the default_args every DAG starts from: retries, an execution timeout and the
failure callback.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

#: A stage that runs longer than this is stuck (the research profile's longest stage takes about
#: an hour on 2 cores); the pipeline's own timeouts are the DAGs' `execution_timeout`.
DEFAULT_EXECUTION_TIMEOUT = timedelta(hours=6)


def alert_log() -> Path:
    default = Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "logs" / "alerts.jsonl"
    return Path(os.environ.get("AGENTWORLD_ALERT_LOG") or default)


def send_alert(kind: str, text: str, **fields: Any) -> dict[str, Any]:
    """Append the alert to the alert log and post it to the webhook, if one is set; returns it.
    A webhook that cannot be reached is reported in the log line, never raised: an alert must
    not fail the task or callback that sends it."""
    alert = {"time": datetime.now(timezone.utc).isoformat(), "kind": kind, "text": text, **fields}
    webhook = os.environ.get("AGENTWORLD_ALERT_WEBHOOK")
    if webhook:
        import httpx

        try:
            httpx.post(webhook, json={"text": text}, timeout=10).raise_for_status()
            alert["webhook"] = "sent"
        except httpx.HTTPError as err:
            alert["webhook"] = f"failed: {err}"
    path = alert_log()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(alert, default=str) + "\n")
    return alert


class FailureAlert(BaseNotifier):
    """on_failure_callback of every task: which task of which run failed, on which try, and why."""

    def notify(self, context: Any) -> None:
        ti = context["ti"]
        error = context.get("exception")
        send_alert("task_failed",
                   f"Airflow: {ti.dag_id}.{ti.task_id} failed in run {ti.run_id} (try {ti.try_number}): {error}",
                   dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=ti.map_index,
                   try_number=ti.try_number, error=str(error))


async def deadline_missed(dag_id: str, hours: float, context: Any = None) -> None:
    """The Deadline alert's callback (it runs in the triggerer): the run was not done in time.
    Airflow passes `context` = {"dag_run": <the run as the REST API shows it>, "deadline": ...}."""
    run = (context or {}).get("dag_run") or {}
    run_id = run.get("dag_run_id")
    send_alert("deadline_missed", f"Airflow: {dag_id} run {run_id} not finished {hours:g} h after it was queued",
               dag_id=dag_id, run_id=run_id, hours=hours)


def deadline_alert(dag_id: str, hours: float) -> Any:
    """A Deadline alert: `deadline_missed` if a run of `dag_id` is not done `hours` after it was queued."""
    from airflow.sdk.definitions.deadline import AsyncCallback, DeadlineAlert, DeadlineReference

    return DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=timedelta(hours=hours),
                         callback=AsyncCallback(deadline_missed, kwargs={"dag_id": dag_id, "hours": hours}))


def task_defaults(retries: int = 1, retry_delay: timedelta = timedelta(seconds=30),
                  execution_timeout: timedelta = DEFAULT_EXECUTION_TIMEOUT) -> dict[str, Any]:
    """default_args of every DAG: retries, a timeout, and the failure alert."""
    return {"retries": retries, "retry_delay": retry_delay, "execution_timeout": execution_timeout,
            "on_failure_callback": FailureAlert()}
