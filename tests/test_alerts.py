"""The DAGs' alerts, sent for real: a failure callback and a missed deadline append a JSON line to
the alert log and post Slack's `{"text": ...}` payload to a webhook served here on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace

import pytest

from agentworld_dags.alerts import FailureAlert, deadline_missed, send_alert


@pytest.fixture()
def webhook():
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()
    server.server_close()


def test_a_failed_task_alerts_the_log_and_the_webhook(tmp_path, monkeypatch, webhook):
    url, received = webhook
    log = tmp_path / "alerts.jsonl"
    monkeypatch.setenv("AGENTWORLD_ALERT_LOG", str(log))
    monkeypatch.setenv("AGENTWORLD_ALERT_WEBHOOK", url)
    ti = SimpleNamespace(dag_id="agentworld_pipeline", task_id="sft", run_id="manual__1", map_index=-1, try_number=2)
    FailureAlert().notify({"ti": ti, "exception": RuntimeError("out of memory")})
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["kind"] == "task_failed" and line["task_id"] == "sft" and line["try_number"] == 2
    assert line["webhook"] == "sent"
    assert received == [{"text": "Airflow: agentworld_pipeline.sft failed in run manual__1 (try 2): out of memory"}]


def test_a_missed_deadline_alerts_and_a_dead_webhook_does_not_raise(tmp_path, monkeypatch):
    log = tmp_path / "alerts.jsonl"
    monkeypatch.setenv("AGENTWORLD_ALERT_LOG", str(log))
    monkeypatch.setenv("AGENTWORLD_ALERT_WEBHOOK", "http://127.0.0.1:9/nothing-listens-here")
    asyncio.run(deadline_missed(dag_id="agentworld_pipeline", hours=8, context={"dag_run": {"dag_run_id": "r1"}, "deadline": {}}))
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["kind"] == "deadline_missed" and line["run_id"] == "r1" and line["hours"] == 8
    assert line["webhook"].startswith("failed:")
    monkeypatch.delenv("AGENTWORLD_ALERT_WEBHOOK")
    assert "webhook" not in send_alert("test", "no webhook set")
