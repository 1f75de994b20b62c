"""agent_regression: test the production agent against its suite, on a schedule.

One task runs `agentworld agent test` with the suite `agent_test.suite` against the agent
`agent_test.agent` (by default the `agentworld-agent` version that holds the `production`
alias): its cases in the simulator and the real environments, clean and under injected faults.
The verdict and each case's success are recorded as tags on that registry version
(`agent_test.<suite>.*`), the report, transcripts and JUnit file in an MLflow run of the
`agentworld-agent-tests` experiment and under runs/agent_regression/<run>/. A missed threshold
fails the run (once: a verdict is not retried). It runs at `agent_test.cron` when
`schedule.nightly` is on (the production profile), else when triggered.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld_dags.alerts import task_defaults
from agentworld_dags.form import trigger_params
from agentworld_dags.launch import agent_test
from agentworld_dags.taskflow import nightly_schedule, settings_errors_fail_once


@dag(
    dag_id="agent_regression",
    schedule=nightly_schedule("agent_test.cron"),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(retries=1, retry_delay=timedelta(seconds=30), execution_timeout=timedelta(hours=2)),
    params=trigger_params(["agent_test_suite", "agent_test_agent"]),
    tags=["agentworld", "agents", "testing"],
    doc_md=__doc__,
)
def agent_regression():
    @task
    @settings_errors_fail_once
    def test_agent() -> dict:
        context = get_current_context()
        params = context["params"]
        return agent_test(params["agent_test_suite"], params["agent_test_agent"], context["run_id"])

    test_agent()


agent_regression()
