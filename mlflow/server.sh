#!/usr/bin/env bash
# MLflow tracking server + model registry, loopback only (`make mlflow`).
# Embedded default: SQLite backend store, artifacts in this directory, both served (proxied) by the
# server, so clients of http://127.0.0.1:$MLFLOW_PORT never need the artifact store's path or keys.
# Scale out by configuration: MLFLOW_BACKEND_STORE_URI=postgresql+psycopg2://... and
# MLFLOW_ARTIFACTS_DESTINATION=s3://bucket/path (with MLFLOW_S3_ENDPOINT_URL and AWS_* for the
# server); MLFLOW_AUTH_CONFIG_PATH=<basic_auth.ini> turns on basic auth. scripts/prod_stack.sh
# starts the production server this way.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
backend="${MLFLOW_BACKEND_STORE_URI:-sqlite:///$here/mlruns.db}"
artifacts="${MLFLOW_ARTIFACTS_DESTINATION:-$here/artifacts}"
auth=()
if [ -n "${MLFLOW_AUTH_CONFIG_PATH:-}" ]; then auth=(--app-name basic-auth); fi
exec mlflow server \
  --backend-store-uri "$backend" \
  --artifacts-destination "$artifacts" \
  "${auth[@]}" \
  --host 127.0.0.1 \
  --port "${MLFLOW_PORT:-5000}"
