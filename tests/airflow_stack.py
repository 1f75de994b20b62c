"""The real Airflow components, started the way `make airflow` starts them, for tests.

`AirflowStack` runs `scripts/airflow_local.sh` (API server, scheduler, DAG processor,
triggerer; LocalExecutor on SQLite) with a temporary AIRFLOW_HOME on a free 127.0.0.1 port,
logs in through the simple auth manager, and drives DAGs through the public REST API exactly
as the UI's trigger form does. `stop()` ends the whole process group it started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from agentworld.profiles import write_profile
from tests.conftest import PROJECT, SMOKE_PARAMS

FINISHED = {"success", "failed"}


def clone_project(dest: Path) -> None:
    """A git clone of this checkout, with its uncommitted changes and new files: a user's project,
    which Airflow runs are DVC experiments of."""
    subprocess.run(["git", "clone", "-q", "--shared", str(PROJECT), str(dest)], check=True)
    diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=PROJECT, capture_output=True, check=True).stdout
    if diff:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=dest, input=diff, check=True)
    new = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "-z"], cwd=PROJECT,
                         capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, new):
        if (PROJECT / rel).is_symlink() or not (PROJECT / rel).is_file():
            continue  # a linked .venv or cache of this checkout, not project content
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT / rel, dest / rel)


def project_env(tmp: Path) -> dict[str, str]:
    """The environment of a DAG run on its own copy of the project: a git+DVC clone holding the
    smoke params.yaml, a SQLite MLflow store and artifact root, the DAGs folder of this checkout."""
    workspace = tmp / "workspace"
    clone_project(workspace)
    write_profile(SMOKE_PARAMS, workspace / "params.yaml")
    env = {
        **os.environ,
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AGENTWORLD_HOME": str(workspace),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'mlruns.db'}",
        "AGENTWORLD_ARTIFACT_ROOT": (tmp / "artifacts").as_uri(),
        # As `make airflow` sets it: the triggerer imports the deadline callback from dags/agentworld_dags.
        "PYTHONPATH": os.pathsep.join([str(PROJECT), str(PROJECT / "dags")]),
        "AGENTWORLD_SWE_CACHE": str(PROJECT / ".cache" / "swe"),  # what `make setup` fetched
    }
    env.pop("AGENTWORLD_PARENT_RUN_ID", None)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AirflowStack:
    def __init__(self, home: Path, env: dict[str, str], password: str = "test-password") -> None:
        self.home, self.port, self.password = home, free_port(), password
        self.env = {
            **env,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{self.port}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            # Tests want the DAG processor to see DAG files at once, and tasks to start fast.
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        }
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = home / "stack.log"
        self._client: httpx.Client | None = None

    @property
    def workspace(self) -> Path:
        """The project root the DAGs' tasks work in (AGENTWORLD_HOME)."""
        return Path(self.env["AGENTWORLD_HOME"])

    def run_dir(self, run_id: str) -> Path:
        """Where a DAG run wrote its outputs (runs/airflow/<run> of the project)."""
        from agentworld_dags.runs import run_folder

        return self.workspace / "runs" / "airflow" / run_folder(run_id)

    def dvc_experiments(self) -> dict[str, dict[str, Any]]:
        """`dvc exp show --json` in the project: experiment name -> its metrics and params."""
        shown = subprocess.run([str(PROJECT / ".venv" / "bin" / "dvc"), "exp", "show", "--json"], cwd=self.workspace,
                               env=self._env(), capture_output=True, text=True, check=True)
        out = {}
        for baseline in json.loads(shown.stdout):
            for experiment in baseline.get("experiments") or []:
                for rev in experiment["revs"]:
                    data = rev["data"]
                    # A selected domain the run skipped (not available here) has no metrics file: left out.
                    out[rev["name"]] = {kind: {k: v["data"] for k, v in (data.get(kind) or {}).items() if "data" in v}
                                        for kind in ("metrics", "params")}
        return out

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 180) -> "AirflowStack":
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({"admin": self.password}))
        subprocess.run([str(PROJECT / ".venv" / "bin" / "airflow"), "db", "migrate"], env=self._env(), check=True,
                       capture_output=True)
        self.process = subprocess.Popen(["bash", str(PROJECT / "scripts" / "airflow_local.sh")], env=self._env(),
                                        cwd=PROJECT, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"airflow_local.sh exited with {self.process.returncode}:\n{self.tail()}")
            try:
                health = httpx.get(f"{self.url}/api/v2/monitor/health", timeout=5).json()
                if all(health.get(part, {}).get("status") == "healthy"
                       for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")):
                    return self
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(2)
        raise TimeoutError(f"Airflow not healthy after {timeout:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        _wait_group_gone(self.process.pid)

    def _env(self) -> dict[str, str]:
        return {**self.env, "PATH": f"{PROJECT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"}

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    # ------------------------------------------------------------------ REST API
    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            token = httpx.post(f"{self.url}/auth/token", json={"username": "admin", "password": self.password},
                               timeout=30)
            token.raise_for_status()
            self._client = httpx.Client(base_url=f"{self.url}/api/v2", timeout=60,
                                        headers={"Authorization": f"Bearer {token.json()['access_token']}"})
        return self._client

    def wait_for_dag(self, dag_id: str, timeout: float = 120) -> dict[str, Any]:
        """The DAG as the API serves it, once the DAG processor has parsed it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            response = self.client.get(f"/dags/{dag_id}")
            if response.status_code == 200:
                return response.json()
            time.sleep(2)
        errors = self.client.get("/importErrors").json()
        raise TimeoutError(f"DAG {dag_id} not parsed after {timeout:.0f} s; import errors: {errors}")

    def dag_details(self, dag_id: str) -> dict[str, Any]:
        response = self.client.get(f"/dags/{dag_id}/details")
        response.raise_for_status()
        return response.json()

    def unpause(self, dag_id: str) -> None:
        self.client.patch(f"/dags/{dag_id}", json={"is_paused": False}).raise_for_status()

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        """POST a DAG run with `conf`, the call the trigger form makes; returns the run id."""
        response = self.client.post(f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
        if response.status_code >= 400:
            raise RuntimeError(f"trigger {dag_id}: {response.status_code} {response.text}")
        return response.json()["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.client.get(f"/dags/{dag_id}/dagRuns").json()["dag_runs"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 900) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.client.get(f"/dags/{dag_id}/dagRuns/{run_id}").json()
            if run["state"] in FINISHED:
                return run
            time.sleep(3)
        raise TimeoutError(f"{dag_id} run {run_id} not finished after {timeout:.0f} s; "
                           f"tasks: {self.task_states(dag_id, run_id)}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return self.client.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                               params={"limit": 1000}).json()["task_instances"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        """`task_id` (or `task_id[map_index]` for mapped tasks) -> state."""
        out = {}
        for ti in self.task_instances(dag_id, run_id):
            key = ti["task_id"] if ti["map_index"] < 0 else f"{ti['task_id']}[{ti['map_index']}]"
            out[key] = ti["state"]
        return out

    def task_log(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, try_number: int = 1) -> str:
        response = self.client.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
                                   params={"map_index": map_index, "full_content": True},
                                   headers={"Accept": "application/json"})
        content = response.json().get("content", [])
        if isinstance(content, str):
            return content
        return "\n".join(_log_line(entry) for entry in content)

    def failure_logs(self, dag_id: str, run_id: str) -> str:
        """The last lines of every failed task's log, for an assertion message."""
        parts = []
        for ti in self.task_instances(dag_id, run_id):
            if ti["state"] in ("failed", "up_for_retry"):
                log = self.task_log(dag_id, run_id, ti["task_id"], ti["map_index"], max(ti["try_number"], 1))
                parts.append(f"--- {ti['task_id']}[{ti['map_index']}] try {ti['try_number']}\n{log[-4000:]}")
        return "\n".join(parts)

    def asset_events(self, source_run_id: str) -> list[dict[str, Any]]:
        """The Asset events that one DAG run emitted."""
        response = self.client.get("/assets/events", params={"source_run_id": source_run_id, "limit": 100})
        if response.status_code != 200:
            raise RuntimeError(f"GET /assets/events: {response.status_code} {response.text}")
        return response.json()["asset_events"]

    def run_dag(self, dag_id: str, conf: dict[str, Any], timeout: float = 900) -> tuple[dict[str, Any], dict[str, str]]:
        """Unpause, trigger, wait: the run as the API reports it, and each task instance's state."""
        self.wait_for_dag(dag_id)
        self.unpause(dag_id)
        run_id = self.trigger(dag_id, conf)
        run = self.wait_for_run(dag_id, run_id, timeout)
        return run, self.task_states(dag_id, run_id)


def _log_line(entry: Any) -> str:
    """One structured task-log entry as text, with the exception it carries, if any."""
    if not isinstance(entry, dict):
        return str(entry)
    errors = [f"{e.get('exc_type')}: {e.get('exc_value')}" for e in entry.get("error_detail") or []]
    return "\n".join([entry.get("event", ""), *errors])


def _wait_group_gone(pgid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.killpg(pgid, signal.SIGKILL)
