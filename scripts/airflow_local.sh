#!/usr/bin/env bash
# Airflow for one machine, loopback only: the API server (UI) on 127.0.0.1, plus scheduler,
# DAG processor and triggerer. `airflow standalone` would also start log servers listening on
# every interface; here they are skipped (the UI reads task logs from the shared log folder on
# this machine). Login is on: Airflow's simple auth manager, user admin, password in
# $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated. Ctrl-C stops every process.
set -euo pipefail
: "${AIRFLOW_HOME:?run through 'make airflow' (it sets AIRFLOW_HOME and the DAG folder)}"
port="${AIRFLOW__API__PORT:-8080}"
# The training stages run in the `training` pool, one at a time on one machine.
airflow pools set training 1 "world-model training stages (tokenizer, cpt, sft, rl)" >/dev/null
trap 'trap - EXIT; kill 0' EXIT INT TERM
airflow scheduler --skip-serve-logs &
airflow dag-processor &
airflow triggerer --skip-serve-logs &
airflow api-server --host 127.0.0.1 --port "$port" &
wait -n
