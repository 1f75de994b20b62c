"""Snapshot and restore one S3 bucket to and from a folder (`python -m agentworld.deploy.objectstore`).

The production stack's object store on this machine is moto's S3 server, which keeps objects in
memory: `prod_stack.sh down` snapshots the bucket to .prod/s3/ and `up` restores it, so MLflow
artifacts and the DVC remote survive a restart. Against a real S3 or MinIO the same commands are
a plain backup and restore of the bucket. Credentials and endpoint come from the AWS_* variables.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import typer


def _client():
    import boto3

    return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)


def snapshot(folder: Path, bucket: str) -> int:
    """Copy every object of `bucket` to `folder`/<key>, replacing the folder's previous contents;
    returns the number of objects."""
    client, count = _client(), 0
    staging = folder.with_name(folder.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            target = staging / obj["Key"]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(target))
            count += 1
    if folder.exists():
        shutil.rmtree(folder)
    staging.rename(folder)  # a snapshot interrupted half-way never replaces a whole one
    return count


def restore(folder: Path, bucket: str) -> int:
    """Create `bucket` if missing and upload every file under `folder` as its key; returns the
    number of objects uploaded (0 when there is no snapshot yet)."""
    client = _client()
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    for path in files:
        client.upload_file(str(path), bucket, path.relative_to(folder).as_posix())
    return len(files)


app = typer.Typer(add_completion=False, help=__doc__)


@app.command("snapshot")
def snapshot_cmd(folder: Path, bucket: str = typer.Option(..., help="the bucket to copy")) -> None:
    print(f"snapshot of s3://{bucket}: {snapshot(folder, bucket)} objects -> {folder}")


@app.command("restore")
def restore_cmd(folder: Path, bucket: str = typer.Option(..., help="the bucket to fill")) -> None:
    print(f"restored {restore(folder, bucket)} objects from {folder} -> s3://{bucket}")


if __name__ == "__main__":
    app()
