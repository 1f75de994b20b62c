#!/usr/bin/env bash
# MLflow tracking server + model registry, loopback only.
# Embedded default: SQLite backend store and an artifact folder in this directory.
# Scale out by configuration: MLFLOW_BACKEND_STORE_URI=postgresql://... and
# MLFLOW_ARTIFACTS_DESTINATION=s3://bucket/path (then point clients at MLFLOW_TRACKING_URI).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
backend="${MLFLOW_BACKEND_STORE_URI:-sqlite:///$here/mlruns.db}"
artifacts="${MLFLOW_ARTIFACTS_DESTINATION:-$here/artifacts}"
exec mlflow server \
  --backend-store-uri "$backend" \
  --default-artifact-root "$artifacts" \
  --host 127.0.0.1 \
  --port "${MLFLOW_PORT:-5000}"
