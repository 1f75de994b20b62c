"""The production stack's object store keeps its bucket across restarts through snapshots: tested
against moto's S3 server (the stand-in for S3/MinIO that `make prod-up` runs), on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from agentworld.deploy.objectstore import restore, snapshot
from agentworld.tracking.runs import artifact_root
from tests.airflow_stack import free_port


@pytest.fixture()
def s3_server(monkeypatch):
    """A fresh moto S3 server (its objects live in its memory) and the AWS variables pointing at it."""
    port = free_port()
    moto = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "moto_server"), "-H", "127.0.0.1",
                             "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/moto-api/", timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.3)
    for key, value in {"AWS_ENDPOINT_URL_S3": url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    yield moto
    moto.terminate()
    moto.wait(timeout=30)


def _reset() -> None:
    """Empty the server, as restarting moto would (it keeps objects in memory only)."""
    httpx.post(f"{os.environ['AWS_ENDPOINT_URL_S3']}/moto-api/reset").raise_for_status()


def test_snapshot_and_restore_keep_a_bucket_across_a_restart(s3_server, tmp_path):  # noqa: ARG001
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"])
    assert restore(tmp_path / "none-yet", "agentworld") == 0  # creates the bucket, nothing to upload
    client.put_object(Bucket="agentworld", Key="mlflow/1/run/artifacts/model.bin", Body=b"\x00weights")
    client.put_object(Bucket="agentworld", Key="dvc/files/md5/ab/cdef", Body=b"records\n")
    assert snapshot(tmp_path / "s3", "agentworld") == 2
    _reset()
    assert "agentworld" not in [b["Name"] for b in client.list_buckets()["Buckets"]]
    assert restore(tmp_path / "s3", "agentworld") == 2
    body = client.get_object(Bucket="agentworld", Key="mlflow/1/run/artifacts/model.bin")["Body"].read()
    assert body == b"\x00weights"
    # A later snapshot replaces the earlier one whole (a deleted object does not come back).
    client.delete_object(Bucket="agentworld", Key="dvc/files/md5/ab/cdef")
    assert snapshot(tmp_path / "s3", "agentworld") == 1
    assert not (tmp_path / "s3" / "dvc").exists()


def test_experiments_on_a_tracking_server_store_artifacts_where_the_server_says(monkeypatch, tmp_path):
    monkeypatch.delenv("AGENTWORLD_ARTIFACT_ROOT", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert artifact_root(tmp_path) is None  # the server assigns mlflow-artifacts:/ and proxies uploads
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlruns.db")
    assert artifact_root(tmp_path) == (tmp_path / "mlflow" / "artifacts").as_uri()
    monkeypatch.setenv("AGENTWORLD_ARTIFACT_ROOT", "s3://bucket/mlflow")
    assert artifact_root(tmp_path) == "s3://bucket/mlflow"
