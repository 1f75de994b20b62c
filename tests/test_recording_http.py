"""The HTTP path of bring-your-own-environment against a real HTTP JSON API started in the test
(MLflow's tracking server: stateful, with real error responses): the recording proxy is
transparent and records each exchange, grouped by session, with credentials redacted; the
recording validates as a domain; `agentworld serve http` answers a replayed session exactly as
recorded, an unknown route as the real API does, and a new request without a world model as a
well-formed 502."""

from __future__ import annotations

import json
import re
import sys

import httpx

import stages.collect
import stages.validate
from agentworld.data.io import read_transitions
from agentworld.data.recording.store import TRAJECTORIES_FILE
from tests.helpers import running
from tests.test_recording_mcp import free_port

SECRET = "sk-live-Hq7Rz2Lm9Vx4Nw8Tp3Kb6Yc1"
API = "/api/2.0/mlflow/experiments"


def session(base: str, name: str) -> list[tuple[int, object]]:
    """A scripted agent: create an experiment, read it back, miss one, create it twice."""
    headers = {"X-Session-Id": name, "Authorization": f"Bearer {SECRET}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        answers = [client.post(f"{API}/create", json={"name": f"exp-{name}"}),
                   client.get(f"{API}/get-by-name", params={"experiment_name": f"exp-{name}"}),
                   client.get(f"{API}/get-by-name", params={"experiment_name": "missing"}),
                   client.post(f"{API}/create", json={"name": f"exp-{name}"})]
    return [(a.status_code, a.json()) for a in answers]


def normalised(answers: list[tuple[int, object]], name: str) -> str:
    """Answers with the session's name, ids and clock readings blanked (they differ run to run)."""
    text = json.dumps(answers, sort_keys=True).replace(name, "NAME")
    text = re.sub(r'"(experiment_id|creation_time|last_update_time)": "?\d+"?', r'"\1": 0', text)
    text = re.sub(r"artifacts/\d+", "artifacts/ID", text)
    return re.sub(r"\d{10,}", "T", text)


def test_http_proxy_records_and_serve_http_answers_as_recorded(tmp_path, smoke_params, mlflow_store):
    api_port, proxy_port, sim_port = free_port(), free_port(), free_port()
    root = tmp_path / "ws"
    recording = root / "data" / "recordings" / "tracker"
    mlflow_api = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'api.db'}",
                  "--default-artifact-root", str(tmp_path / "api-artifacts"), "--host", "127.0.0.1",
                  "--port", str(api_port), "--workers", "1"]
    with running(mlflow_api, api_port, "the MLflow API") as api:
        proxy = [sys.executable, "-m", "agentworld.cli", "record", "http", "--name", "tracker", "--upstream", api,
                 "--port", str(proxy_port), "--out", str(recording)]
        with running(proxy, proxy_port, "the recording proxy") as proxied:
            recorded = {name: session(proxied, name) for name in ("s1", "s2")}
        direct = session(api, "d1")
        unknown_real = httpx.get(f"{api}/no/such/route", timeout=30).status_code

    # The proxy is transparent: the same answers as the API gives directly.
    assert normalised(recorded["s1"], "s1") == normalised(direct, "d1") == normalised(recorded["s2"], "s2")
    assert [status for status, _ in direct] == [200, 200, 404, 400]
    rows = read_transitions(recording / TRAJECTORIES_FILE)
    assert len(rows) == 8 and len({r.trajectory_id for r in rows}) == 2
    first = json.loads(rows[0].action)
    assert first["method"] == "POST" and first["path"] == f"{API}/create" and first["body"] == {"name": "exp-s1"}
    assert first["headers"]["authorization"] == "<REDACTED:authorization>"
    assert json.loads(rows[2].observation)["status"] == 404
    assert all(SECRET.encode() not in p.read_bytes() for p in recording.rglob("*") if p.is_file())

    # The recording is a domain: collected and validated by the normal stages with its shape rules.
    params = smoke_params.model_copy(update={"recordings": {"tracker": "data/recordings/tracker"}})
    stages.collect.run(params, root, domains=["tracker"])
    report = stages.validate.run(params, root, domains=["tracker"])["domains"]["tracker"]
    assert (report["clean"], report["rejected"]) == (8, 0)

    served_report = tmp_path / "served.json"
    serve = [sys.executable, "-m", "agentworld.cli", "serve", "http", "--name", "tracker", "--recording",
             str(recording), "--model", "none", "--port", str(sim_port), "--report", str(served_report)]
    with running(serve, sim_port, "serve http", cwd=root) as simulated:
        replayed = session(simulated, "s1")
        unknown = httpx.get(f"{simulated}/no/such/route", timeout=30)
        novel = httpx.get(f"{simulated}{API}/get-by-name", params={"experiment_name": "other"},
                          headers={"X-Session-Id": "s9"}, timeout=30)
    assert replayed == recorded["s1"]
    assert unknown.status_code == unknown_real == 404
    assert novel.status_code == 502 and novel.json()["error"].startswith("world model error:")
    counts = json.loads(served_report.read_text())
    assert (counts["cache"], counts["unknown_route"], counts["unanswered"]) == (4, 1, 1)
