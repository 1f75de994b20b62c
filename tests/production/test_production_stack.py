"""The production stack, for real: `scripts/prod_stack.sh up` (what `make prod-up` runs) brings up
PostgreSQL, Redis, moto's S3 server (standing in for S3/MinIO), the MLflow server (Postgres
backend, artifacts proxied to the object store, basic auth) and Airflow with the CeleryExecutor
and two workers, in a temporary folder with free ports, around a clone of this project. The
tests trigger `agentworld_pipeline` at smoke scale through the REST API and through the UI in
Chromium, kill a Celery worker with SIGKILL in the middle of a task, look for the runs, models and
datasets in the shared services, and finally take the stack down and look for leftovers.

`make test-prod` runs this module (about 15 minutes); `make test` does not.
Screenshots of the browser steps go to test-artifacts/production/ (AGENTWORLD_TEST_ARTIFACTS).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import PROJECT
from tests.production.stack import ProductionStack

pytestmark = pytest.mark.slow

PIPELINE = "agentworld_pipeline"
CONF = {"domains": ["terminal", "mcp"], "episodes_per_domain": 12, "cpt_steps": 4, "sft_steps": 4,
        "rl_steps": 1, "eval_examples": 6}
MODEL = "agentworld-world-model"
SHOTS = Path(os.environ.get("AGENTWORLD_TEST_ARTIFACTS", PROJECT / "test-artifacts")) / "production"


@pytest.fixture(scope="module")
def stack() -> ProductionStack:
    # Not under pytest's private (0700) temporary folder: Postgres runs as its own account when
    # the tests run as root, and must reach its data folder.
    tmp = Path(tempfile.mkdtemp(prefix="agentworld-prod-"))
    tmp.chmod(0o711)
    prod = ProductionStack(tmp)
    try:
        yield prod.start()
    finally:
        prod.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def runs() -> dict[str, str]:
    """Run ids of the module's pipeline runs, by the test that made them."""
    return {}


@pytest.fixture()
def mlflow_client(stack, monkeypatch):
    """An MLflow client configured only from the stack's environment file, as every client is."""
    from mlflow import MlflowClient

    for key in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.setenv(key, stack.settings[key])
    return MlflowClient()


def _s3_keys(stack: ProductionStack, prefix: str) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=stack.settings["AWS_ENDPOINT_URL_S3"],
                          aws_access_key_id=stack.settings["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=stack.settings["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=stack.settings["AGENTWORLD_BUCKET"], Prefix=prefix)
    return [obj["Key"] for page in pages for obj in page.get("Contents", [])]


def _worker_of(stack: ProductionStack, ti_id: str) -> str | None:
    """The Celery worker whose log shows it executing task instance `ti_id`."""
    for name in ("airflow-worker1", "airflow-worker2"):
        if f"id=UUID('{ti_id}')" in (stack.prod / "logs" / f"{name}.log").read_text(errors="replace"):
            return name
    return None


def _succeeded(stack: ProductionStack, run_id: str, timeout: float = 1500) -> dict[str, str]:
    run = stack.wait_for_run(PIPELINE, run_id, timeout)
    states = stack.task_states(PIPELINE, run_id)
    assert run["state"] == "success", f"{states}\n{stack.failure_logs(PIPELINE, run_id)}"
    return states


def _versions_of(client, run_dir: Path) -> list:
    name = f"airflow-{run_dir.name}"
    return [v for v in client.search_model_versions(f"name='{MODEL}'") if v.tags.get("dvc_experiment") == name]


# ---------------------------------------------------------------------------------------------- services
def test_services_listen_on_loopback_only_and_require_credentials(stack):
    status = stack.script("status")
    assert status.returncode == 0, status.stdout
    assert "airflow-worker1: running" in status.stdout and "airflow-worker2: running" in status.stdout
    # Every socket a process of the stack listens on is bound to 127.0.0.1.
    import psutil

    pids = set(stack.pids().values())
    for pid in list(pids):
        pids |= {child.pid for child in psutil.Process(pid).children(recursive=True)}
    listening = [c for c in psutil.net_connections("inet") if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert listening and {c.laddr.ip for c in listening} == {"127.0.0.1"}, listening
    # MLflow: basic auth (401 without credentials), Airflow: login (401 without a token).
    mlflow_url = stack.settings["MLFLOW_TRACKING_URI"]
    assert httpx.get(f"{mlflow_url}/api/2.0/mlflow/experiments/search", params={"max_results": 1}).status_code == 401
    auth = (stack.settings["MLFLOW_TRACKING_USERNAME"], stack.settings["MLFLOW_TRACKING_PASSWORD"])
    assert httpx.get(f"{mlflow_url}/api/2.0/mlflow/experiments/search", params={"max_results": 1},
                     auth=auth).status_code == 200
    assert httpx.get(f"{stack.url}/api/v2/dags").status_code == 401
    # The credentials file is its owner's alone.
    assert (stack.prod / "production.env").stat().st_mode & 0o077 == 0


# ---------------------------------------------------------------------------------------------- end to end
def test_pipeline_runs_on_celery_workers_and_lands_in_mlflow_s3_and_dvc(stack, runs, mlflow_client, tmp_path):
    stack.wait_for_dag(PIPELINE)
    stack.unpause(PIPELINE)
    run_id = runs["rest"] = stack.trigger(PIPELINE, CONF)
    states = _succeeded(stack, run_id)
    assert {"start", "collect[0]", "collect[1]", "build", "cpt", "sft", "rl", "evaluate", "promote",
            "save_experiment"} <= set(states)
    # Each task instance was executed by one of the two Celery workers; the training stages took
    # the `training` pool.
    instances = stack.task_instances(PIPELINE, run_id)
    workers = {ti["task_id"]: _worker_of(stack, ti["id"]) for ti in instances}
    assert None not in workers.values(), workers
    assert {ti["task_id"]: ti["pool"] for ti in instances if ti["task_id"] in ("tokenizer", "cpt", "sft", "rl")} == {
        "tokenizer": "training", "cpt": "training", "sft": "training", "rl": "training"}

    # MLflow: the runs are on the server, their artifacts go through it to the object store.
    run_dir = stack.run_dir(run_id)
    experiment = mlflow_client.get_experiment_by_name("agentworld")
    assert experiment.artifact_location.startswith("mlflow-artifacts:")
    stage_runs = [r for r in mlflow_client.search_runs([experiment.experiment_id], "tags.stage = 'sft'")
                  if r.data.tags.get("workspace") == str(run_dir)]
    assert len(stage_runs) == 1 and stage_runs[0].info.artifact_uri.startswith("mlflow-artifacts:")
    assert _s3_keys(stack, f"mlflow/{experiment.experiment_id}/{stage_runs[0].info.run_id}/")
    versions = _versions_of(mlflow_client, run_dir)
    assert versions, "the run registered no model version"
    assert not (stack.workspace / "mlflow" / "artifacts").exists() or not any((stack.workspace / "mlflow" / "artifacts").iterdir())

    # DVC: the run's outputs were pushed to the object-store remote; a clean clone of the project
    # pulls the run (its experiment) and gets the same datasets.
    assert _s3_keys(stack, "dvc/files/md5/")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(stack.workspace), str(clone)], check=True)
    stack.script("dvc-remote", str(clone))
    experiment_name = f"airflow-{run_dir.name}"
    env = {**stack._env(), **stack.settings}
    dvc = str(PROJECT / ".venv" / "bin" / "dvc")
    pulled = subprocess.run([dvc, "exp", "pull", "-r", "objectstore", "origin", experiment_name], cwd=clone, env=env,
                            capture_output=True, text=True)
    assert f"Pulled experiment '['{experiment_name}']'" in pulled.stdout + pulled.stderr, pulled.stdout + pulled.stderr
    subprocess.run([dvc, "exp", "apply", experiment_name], cwd=clone, env=env, capture_output=True, check=False)
    for rel in ("data/sft/train.jsonl", "data/sft/test.jsonl", "data/clean/terminal.jsonl", "data/clean/mcp.jsonl"):
        assert (clone / rel).read_bytes() == (run_dir / rel).read_bytes(), rel


def test_a_worker_killed_mid_task_is_retried_and_the_run_still_succeeds(stack, runs, mlflow_client):
    run_id = runs["killed"] = stack.trigger(PIPELINE, CONF)
    deadline = time.monotonic() + 900
    victim = None
    while time.monotonic() < deadline and victim is None:
        for ti in stack.task_instances(PIPELINE, run_id):
            if ti["task_id"] == "sft" and ti["state"] == "running":
                victim = (ti["id"], _worker_of(stack, ti["id"]))
        time.sleep(1)
    assert victim and victim[1], f"sft never ran: {stack.task_states(PIPELINE, run_id)}"
    stack.kill_worker(victim[1])
    # What a supervisor (systemd, Kubernetes) does for a dead worker: start it again.
    stack.script("up")
    states = _succeeded(stack, run_id)
    sft = next(ti for ti in stack.task_instances(PIPELINE, run_id) if ti["task_id"] == "sft")
    assert sft["try_number"] == 2 and states["sft"] == "success"
    # No duplicates: one registered version per trained stage (as in a run nothing killed), and
    # one copy of every training record.
    run_dir = stack.run_dir(run_id)
    stages = [v.tags.get("stage") for v in _versions_of(mlflow_client, run_dir)]
    clean_stages = [v.tags.get("stage") for v in _versions_of(mlflow_client, stack.run_dir(runs["rest"]))]
    assert sorted(stages) == sorted(clean_stages) and len(stages) == len(set(stages)), (stages, clean_stages)
    lines = (run_dir / "data" / "sft" / "train.jsonl").read_text().splitlines()
    assert lines and len(lines) == len(set(lines))


# ---------------------------------------------------------------------------------------------- browser
@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Our own UIs on loopback, not agent-controlled pages: Chromium's setuid sandbox is off
        # because the tests run as root here.
        chromium = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                              args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def test_airflow_ui_login_trigger_form_and_a_run_with_changed_values(stack, runs, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{stack.url}/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(stack.password)
    _shot(page, "airflow-1-login")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"^(?!.*/auth/login).*$"))
    page.goto(f"{stack.url}/dags/{PIPELINE}")
    page.get_by_role("button", name="Trigger").first.click()
    form = page.get_by_role("dialog")
    form.get_by_role("button", name="collect").click()
    episodes = form.locator("input[name=element_episodes_per_domain]")
    # The form shows params.yaml's value (the workspace holds the smoke profile)...
    params = yaml.safe_load((stack.workspace / "params.yaml").read_text())
    assert episodes.input_value() == str(params["collect"]["episodes_per_domain"])
    _shot(page, "airflow-2-trigger-form")
    # ...and refuses a value below the schema's minimum: it is corrected to the minimum.
    episodes.fill("0")
    episodes.press("Tab")
    assert episodes.input_value() == "1"
    _shot(page, "airflow-3-out-of-range-refused")
    # A run with changed values: 10 episodes per domain, 3 SFT steps.
    before = {r["dag_run_id"] for r in stack.runs(PIPELINE)}
    episodes.fill("10")
    episodes.press("Tab")
    form.get_by_role("button", name="sft").click()
    sft_steps = form.locator("input[name=element_sft_steps]")
    sft_steps.fill("3")
    sft_steps.press("Tab")
    form.get_by_role("button", name="Trigger").click()
    page.wait_for_url(re.compile(r"/runs/"), timeout=60_000)
    new = [r for r in stack.runs(PIPELINE) if r["dag_run_id"] not in before]
    assert len(new) == 1 and new[0]["conf"]["episodes_per_domain"] == 10 and new[0]["conf"]["sft_steps"] == 3
    runs["ui"] = new[0]["dag_run_id"]
    # Watch it in the UI until the run's state badge says it succeeded.
    deadline = time.monotonic() + 1500
    while time.monotonic() < deadline and stack.client.get(
            f"/dags/{PIPELINE}/dagRuns/{runs['ui']}").json()["state"] not in ("success", "failed"):
        time.sleep(5)
    page.reload()
    page.get_by_text("Success", exact=True).first.wait_for(timeout=60_000)
    _shot(page, "airflow-4-run-succeeded")
    assert json.loads((stack.run_dir(runs["ui"]) / "reports" / "train" / "sft.json").read_text())["global_step"] == 3
    page.close()


def test_mlflow_ui_login_compare_two_pipeline_runs_and_see_the_champion(stack, runs, browser, mlflow_client):
    settings = stack.settings
    # Basic auth: a browser without credentials is asked for them and gets nothing.
    from playwright.sync_api import Error as PlaywrightError

    anonymous = browser.new_context()
    with pytest.raises(PlaywrightError, match="ERR_INVALID_AUTH_CREDENTIALS"):
        anonymous.new_page().goto(settings["MLFLOW_TRACKING_URI"])
    anonymous.close()
    context = browser.new_context(viewport={"width": 1400, "height": 900}, http_credentials={
        "username": settings["MLFLOW_TRACKING_USERNAME"], "password": settings["MLFLOW_TRACKING_PASSWORD"]})
    page = context.new_page()
    experiment = mlflow_client.get_experiment_by_name("agentworld")
    page.goto(f"{settings['MLFLOW_TRACKING_URI']}/#/experiments/{experiment.experiment_id}/runs")
    rows = page.locator("[role=row]").filter(has_text="airflow-")
    rows.first.wait_for(timeout=60_000)
    _shot(page, "mlflow-1-experiment")
    parents = {r.info.run_id for r in mlflow_client.search_runs([experiment.experiment_id],
                                                                "tags.`agentworld.kind` = 'pipeline'")}
    assert rows.count() >= 2 and len(parents) >= 2
    for k in range(2):
        rows.nth(k).locator(".ag-selection-checkbox").click()
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(r"compare-runs"))
    compared = json.loads(re.search(r"runs=(\[[^&]*\])", page.url.replace("%22", '"')).group(1))
    assert len(compared) == 2 and set(compared) <= parents
    page.get_by_text("Run ID").first.wait_for(timeout=60_000)
    _shot(page, "mlflow-2-compare")
    # The registered world model: which version holds `champion`. Smoke models rarely beat every
    # baseline, so when no run promoted one, the newest version is made champion here (as a
    # reviewer would in this UI) and the page must show it.
    try:
        champion = mlflow_client.get_model_version_by_alias(MODEL, "champion").version
    except Exception:
        champion = max(int(v.version) for v in mlflow_client.search_model_versions(f"name='{MODEL}'"))
        mlflow_client.set_registered_model_alias(MODEL, "champion", str(champion))
    page.goto(f"{settings['MLFLOW_TRACKING_URI']}/#/models/{MODEL}")
    link = page.get_by_role("link", name=f"Version {champion}", exact=True)
    link.wait_for(timeout=60_000)
    row = link.locator("xpath=ancestor::*[@role='row'][1]")
    row.get_by_text("champion").first.wait_for(timeout=60_000)  # the alias tag, "@ champion"
    assert page.get_by_text("champion").count() == 1  # on that version's row only
    _shot(page, "mlflow-3-champion")
    context.close()


# ---------------------------------------------------------------------------------------------- teardown
def test_backup_then_down_snapshots_the_object_store_and_leaves_no_process(stack):
    import psutil

    keys = _s3_keys(stack, "")
    stack.script("backup")
    (backup,) = (stack.prod / "backups").iterdir()
    for db in ("airflow", "mlflow", "mlflow_auth"):
        listed = subprocess.run(["pg_restore", "--list", str(backup / f"{db}.dump")], capture_output=True, text=True)
        assert listed.returncode == 0 and "TABLE DATA" in listed.stdout, (db, listed.stderr)
    assert len([p for p in (backup / "s3").rglob("*") if p.is_file()]) == len(keys)
    started = [psutil.Process(pid) for pid in stack.pids().values()]
    started += [child for process in started for child in process.children(recursive=True)]
    stack.stop()
    assert not stack.processes_left(), stack.processes_left()
    running = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not running, [(p.pid, p.cmdline()) for p in running]
    snapshot = stack.prod / "s3"
    assert sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()) == sorted(keys)
