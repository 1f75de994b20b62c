"""The production stack, brought up by `scripts/prod_stack.sh` exactly as `make prod-up` does,
in a temporary folder with free ports, around a clone of this project (smoke params).

`ProductionStack` is an `AirflowStack` (same REST client: trigger, wait, task states, logs)
whose services are Postgres, Redis, moto's S3 server (standing in for S3/MinIO), the MLflow
server with basic auth, and Airflow with the CeleryExecutor and two workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from agentworld.profiles import write_profile
from tests.airflow_stack import AirflowStack, _wait_group_gone, clone_project
from tests.conftest import PROJECT, SMOKE_PARAMS

SCRIPT = PROJECT / "scripts" / "prod_stack.sh"


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of production.env (comments and blank lines skipped)."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


class ProductionStack(AirflowStack):
    def __init__(self, tmp: Path) -> None:
        self.tmp, self.prod = tmp, tmp / "prod"
        workspace = tmp / "workspace"
        clone_project(workspace)
        write_profile(SMOKE_PARAMS, workspace / "params.yaml")
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("MLFLOW_", "AIRFLOW", "AGENTWORLD_", "AWS_"))}
        self.base_env = {
            **base,
            "AGENTWORLD_PROD_DIR": str(self.prod),
            "AGENTWORLD_HOME": str(workspace),
            "AGENTWORLD_SWE_CACHE": str(PROJECT / ".cache" / "swe"),  # what `make setup` fetched
            # Tests want DAG files seen at once and a dead worker's task noticed within a minute
            # (the defaults, 5 minutes each, are right for production).
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "10",
        }
        self.prod.mkdir(parents=True, exist_ok=True)
        super().__init__(self.prod / "airflow", self.base_env)

    def script(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        done = subprocess.run(["bash", str(SCRIPT), *args], env=self.base_env, cwd=PROJECT, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0 and args[0] != "status":
            raise RuntimeError(f"prod_stack.sh {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def start(self, timeout: float = 600) -> "ProductionStack":
        self.script("up", timeout=timeout)
        settings = read_env_file(self.prod / "production.env")
        self.settings = settings
        self.env = {**self.base_env, **settings}
        self.url = settings["AIRFLOW__API__BASE_URL"]
        self.password = json.loads((self.prod / "airflow" / "passwords.json").read_text())["admin"]
        return self

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        self.script("down")

    def pids(self) -> dict[str, int]:
        """The running services' main processes, from their pid files."""
        return {p.stem: int(p.read_text()) for p in (self.prod / "run").glob("*.pid")}

    def processes_left(self) -> list[str]:
        """Command lines of any process still running from this stack (its folder in the command
        line, or a process group it started)."""
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
        return [line.strip() for line in out.splitlines() if str(self.prod) in line and "ps -eo" not in line]

    def kill_worker(self, name: str) -> None:
        """SIGKILL a Celery worker and every process it started (its session)."""
        pid = self.pids()[name]
        os.killpg(pid, signal.SIGKILL)
        _wait_group_gone(pid)
