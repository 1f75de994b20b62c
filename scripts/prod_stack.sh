#!/usr/bin/env bash
# The production stack on one machine, every service on 127.0.0.1, every byte under one
# git-ignored folder ($AGENTWORLD_PROD_DIR, default .prod/):
#
#   postgres   PostgreSQL (Debian package): Airflow's metadata DB, MLflow's backend store and its users
#   redis      Redis (Debian package): the Celery broker
#   s3         moto's S3 server, STANDING IN for S3/MinIO (no MinIO is packaged for this machine);
#              moto keeps objects in memory, so `down` snapshots the buckets to s3/ and `up` restores them
#   mlflow     MLflow tracking server: Postgres backend store, proxied artifacts (--artifacts-destination
#              s3://agentworld/mlflow), basic auth (users in Postgres)
#   airflow    Airflow 3 on Postgres with the CeleryExecutor: API server (UI), scheduler, DAG processor,
#              triggerer and two Celery workers; a `training` pool that the training stages use
#
# Usage: prod_stack.sh up | down | status | backup | env | dvc-remote DIR
# `up` writes production.env (ports, generated passwords; git-ignored) on its first run and reuses it
# after; source it to point any shell at the stack: `set -a; . .prod/production.env; set +a`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PROD="${AGENTWORLD_PROD_DIR:-$ROOT/.prod}"
mkdir -p "$PROD"
PROD="$(cd "$PROD" && pwd)"
ENV_FILE="$PROD/production.env"
BIN="$ROOT/.venv/bin"
PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
RUN="$PROD/run"
LOGS="$PROD/logs"
export PATH="$BIN:$PATH"

log() { echo "[prod] $*" >&2; }
die() { echo "[prod] error: $*" >&2; exit 1; }
secret() { python3 -c 'import secrets; print(secrets.token_urlsafe(24))'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---------------------------------------------------------------------------------------- settings
write_env() {
  # Ports: the PROD_*_PORT variables when set, else free ones chosen once and kept in the file.
  local pg="${PROD_PG_PORT:-$(free_port)}" redis="${PROD_REDIS_PORT:-$(free_port)}" s3="${PROD_S3_PORT:-$(free_port)}"
  local mlflow="${PROD_MLFLOW_PORT:-$(free_port)}" airflow="${PROD_AIRFLOW_PORT:-$(free_port)}"
  local pg_pw redis_pw mlflow_pw airflow_pw
  pg_pw="$(secret)"; redis_pw="$(secret)"; mlflow_pw="$(secret)"; airflow_pw="$(secret)"
  touch "$ENV_FILE" && chmod 600 "$ENV_FILE"  # credentials: owner only
  cat > "$ENV_FILE" <<EOF
# The production stack's settings, written by scripts/prod_stack.sh on its first \`up\`.
# It holds credentials: keep it out of git (.prod/ is ignored) and readable by its owner only.
AGENTWORLD_PROD_DIR=$PROD
PROD_PG_PORT=$pg
PROD_REDIS_PORT=$redis
PROD_S3_PORT=$s3
PROD_MLFLOW_PORT=$mlflow
PROD_AIRFLOW_PORT=$airflow
PROD_PG_PASSWORD=$pg_pw
PROD_REDIS_PASSWORD=$redis_pw
PROD_AIRFLOW_PASSWORD=$airflow_pw

# Object store (S3 API). Any S3 endpoint works here; this one is moto's server.
MLFLOW_S3_ENDPOINT_URL=http://127.0.0.1:$s3
AWS_ENDPOINT_URL_S3=http://127.0.0.1:$s3
AWS_ACCESS_KEY_ID=agentworld
AWS_SECRET_ACCESS_KEY=$(secret)
AWS_DEFAULT_REGION=us-east-1
AGENTWORLD_BUCKET=agentworld

# MLflow: every client (stages, DAG tasks, your shell) reads these.
MLFLOW_TRACKING_URI=http://127.0.0.1:$mlflow
MLFLOW_TRACKING_USERNAME=admin
MLFLOW_TRACKING_PASSWORD=$mlflow_pw
MLFLOW_FLASK_SERVER_SECRET_KEY=$(secret)

# DVC: Airflow runs push their outputs to this remote of the project (configured by \`up\`).
AGENTWORLD_DVC_REMOTE=objectstore

# Airflow 3 on Postgres with Celery workers and a Redis broker.
AIRFLOW_HOME=$PROD/airflow
AIRFLOW__CORE__EXECUTOR=CeleryExecutor
AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgresql+psycopg2://airflow:$pg_pw@127.0.0.1:$pg/airflow
AIRFLOW__CELERY__BROKER_URL=redis://:$redis_pw@127.0.0.1:$redis/0
AIRFLOW__CELERY__RESULT_BACKEND=db+postgresql+psycopg2://airflow:$pg_pw@127.0.0.1:$pg/airflow
AIRFLOW__CELERY__WORKER_CONCURRENCY=2
# Redis redelivers a task whose worker vanished after this long: longer than any task may run.
AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT=28800
AIRFLOW__CORE__FERNET_KEY=$(python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')
AIRFLOW__API_AUTH__JWT_SECRET=$(secret)
AIRFLOW__API__SECRET_KEY=$(secret)
AIRFLOW__API__HOST=127.0.0.1
AIRFLOW__API__PORT=$airflow
AIRFLOW__API__BASE_URL=http://127.0.0.1:$airflow
AIRFLOW__CORE__EXECUTION_API_SERVER_URL=http://127.0.0.1:$airflow/execution/
AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=admin:admin
AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=$PROD/airflow/passwords.json
AIRFLOW__CORE__LOAD_EXAMPLES=False
# Failure callbacks and deadline alerts append here; set AGENTWORLD_ALERT_WEBHOOK to a Slack
# incoming-webhook URL to get them in a channel too.
AGENTWORLD_ALERT_LOG=$PROD/logs/alerts.jsonl
EOF
  log "wrote $ENV_FILE"
}

load_env() {
  [ -f "$ENV_FILE" ] || write_env
  set -a; # shellcheck disable=SC1090
  . "$ENV_FILE"; set +a
  export AGENTWORLD_HOME="${AGENTWORLD_HOME:-$ROOT}"
  export AIRFLOW__CORE__DAGS_FOLDER="${AIRFLOW__CORE__DAGS_FOLDER:-$ROOT/dags}"
  export PYTHONPATH="$ROOT:$ROOT/dags${PYTHONPATH:+:$PYTHONPATH}"
}

# Postgres refuses to run as root: as root the server runs as the `postgres` account.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# ---------------------------------------------------------------------------------------- processes
# A long-running service: its own session (so `down` ends it and every child), a pid file, a log.
spawn() {
  local name="$1"; shift
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$RUN/$name.pid"
}

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

stop_group() {
  local name="$1" pid
  [ -f "$RUN/$name.pid" ] || return 0
  pid="$(cat "$RUN/$name.pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/$name.pid"
}

wait_for() {  # wait_for NAME SECONDS COMMAND...: until COMMAND succeeds, or fail with NAME's log
  local name="$1" seconds="$2"; shift 2
  for _ in $(seq "$seconds"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [ -f "$RUN/$name.pid" ] && ! alive "$name"; then break; fi  # it exited: no point waiting
    sleep 1
  done
  tail -n 40 "$LOGS/$name.log" >&2 || true
  die "$name did not come up (log: $LOGS/$name.log)"
}

# ---------------------------------------------------------------------------------------- services
start_postgres() {
  [ -x "$PG_BIN/pg_ctl" ] || die "PostgreSQL is not installed (run \`make prod-setup\`)"
  local data="$PROD/postgres"
  if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$PROD"; then
    die "the postgres account cannot reach $PROD: make its parent folders traversable (chmod o+x) or set AGENTWORLD_PROD_DIR to a folder it can reach"
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    install -d -m 700 "$data"
    [ "$(id -u)" = 0 ] && chown postgres "$data"
    local pwfile; pwfile="$(mktemp)"; echo "$PROD_PG_PASSWORD" > "$pwfile"; chmod 644 "$pwfile"
    as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      --pwfile="$pwfile" -E UTF8 >>"$LOGS/postgres.log"
    rm -f "$pwfile"
  fi
  [ "$(id -u)" = 0 ] && chown postgres "$LOGS/postgres.log" "$RUN"
  if ! as_pg "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_pg "$PG_BIN/pg_ctl" -D "$data" -w -l "$LOGS/postgres.log" \
      -o "-c listen_addresses=127.0.0.1 -p $PROD_PG_PORT -k $RUN" start >/dev/null
  fi
  local db
  for db in airflow mlflow mlflow_auth; do
    psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname='${db%_auth}'" | grep -q 1 \
      || psql_admin -c "CREATE ROLE ${db%_auth} LOGIN PASSWORD '$PROD_PG_PASSWORD'" >/dev/null
    psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname='$db'" | grep -q 1 \
      || psql_admin -c "CREATE DATABASE $db OWNER ${db%_auth}" >/dev/null
  done
  log "postgres on 127.0.0.1:$PROD_PG_PORT (data: $data)"
}

psql_admin() { PGPASSWORD="$PROD_PG_PASSWORD" psql -h 127.0.0.1 -p "$PROD_PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }

start_redis() {
  command -v redis-server >/dev/null || die "Redis is not installed (run \`make prod-setup\`)"
  mkdir -p "$PROD/redis"
  alive redis && return 0
  spawn redis redis-server --bind 127.0.0.1 --port "$PROD_REDIS_PORT" --requirepass "$PROD_REDIS_PASSWORD" \
    --dir "$PROD/redis" --appendonly yes --save 60 1 --daemonize no
  wait_for redis 30 redis-cli -p "$PROD_REDIS_PORT" -a "$PROD_REDIS_PASSWORD" --no-auth-warning ping
  log "redis on 127.0.0.1:$PROD_REDIS_PORT (data: $PROD/redis)"
}

start_s3() {
  alive s3 || spawn s3 moto_server -H 127.0.0.1 -p "$PROD_S3_PORT"
  wait_for s3 60 python3 -c "import urllib.request; urllib.request.urlopen('$AWS_ENDPOINT_URL_S3/moto-api/')"
  python -m agentworld.deploy.objectstore restore "$PROD/s3" --bucket "$AGENTWORLD_BUCKET"
  log "object store (moto, standing in for S3) on $AWS_ENDPOINT_URL_S3 (snapshot: $PROD/s3)"
}

start_mlflow() {
  mkdir -p "$PROD/mlflow"
  cat > "$PROD/mlflow/basic_auth.ini" <<EOF
[mlflow]
default_permission = READ
database_uri = postgresql+psycopg2://mlflow:$PROD_PG_PASSWORD@127.0.0.1:$PROD_PG_PORT/mlflow_auth
admin_username = $MLFLOW_TRACKING_USERNAME
admin_password = $MLFLOW_TRACKING_PASSWORD
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
EOF
  chmod 600 "$PROD/mlflow/basic_auth.ini"
  alive mlflow || MLFLOW_AUTH_CONFIG_PATH="$PROD/mlflow/basic_auth.ini" spawn mlflow mlflow server \
    --backend-store-uri "postgresql+psycopg2://mlflow:$PROD_PG_PASSWORD@127.0.0.1:$PROD_PG_PORT/mlflow" \
    --artifacts-destination "s3://$AGENTWORLD_BUCKET/mlflow" \
    --app-name basic-auth --host 127.0.0.1 --port "$PROD_MLFLOW_PORT" --workers 2
  wait_for mlflow 180 python3 -c "import urllib.request; urllib.request.urlopen('$MLFLOW_TRACKING_URI/health')"
  log "mlflow on $MLFLOW_TRACKING_URI (user $MLFLOW_TRACKING_USERNAME; password in $ENV_FILE)"
}

start_airflow() {
  mkdir -p "$AIRFLOW_HOME"
  printf '{"admin": "%s"}\n' "$PROD_AIRFLOW_PASSWORD" > "$AIRFLOW_HOME/passwords.json"
  chmod 600 "$AIRFLOW_HOME/passwords.json"
  airflow db migrate >>"$LOGS/airflow-migrate.log" 2>&1 || { tail -n 30 "$LOGS/airflow-migrate.log" >&2; die "airflow db migrate failed"; }
  # One training stage at a time on this machine; a GPU cluster sizes `gpu` to its GPU count (docs/cluster.md).
  airflow pools set training 1 "world-model training stages (tokenizer, cpt, sft, rl)" >/dev/null
  alive airflow-scheduler || spawn airflow-scheduler airflow scheduler --skip-serve-logs
  alive airflow-dag-processor || spawn airflow-dag-processor airflow dag-processor
  alive airflow-triggerer || spawn airflow-triggerer airflow triggerer --skip-serve-logs
  alive airflow-api-server || spawn airflow-api-server airflow api-server --host 127.0.0.1 --port "$PROD_AIRFLOW_PORT"
  local n
  for n in 1 2; do
    alive "airflow-worker$n" || spawn "airflow-worker$n" airflow celery worker --celery-hostname "worker$n@%h" \
      --skip-serve-logs --without-gossip --without-mingle
  done
  wait_for airflow-api-server 240 python3 -c "
import json, sys, urllib.request
health = json.load(urllib.request.urlopen('$AIRFLOW__API__BASE_URL/api/v2/monitor/health'))
sys.exit(0 if all(health.get(k, {}).get('status') == 'healthy'
                  for k in ('metadatabase', 'scheduler', 'triggerer', 'dag_processor')) else 1)"
  for n in 1 2; do  # a worker that cannot reach the broker or result backend exits at start
    wait_for "airflow-worker$n" 60 grep -q "worker$n@.* ready" "$LOGS/airflow-worker$n.log"
  done
  log "airflow on $AIRFLOW__API__BASE_URL (user admin; password in $AIRFLOW_HOME/passwords.json), Celery workers worker1, worker2"
}

# Point a checkout's DVC at the object store: a remote in its git-ignored .dvc/config.local, so the
# committed default remote (the local one of the embedded set-up) stays the default: name it,
# `dvc push -r objectstore`, as the Airflow runs do.
dvc_remote() {
  local dir="$1"
  (cd "$dir" && dvc remote add --local --force "$AGENTWORLD_DVC_REMOTE" "s3://$AGENTWORLD_BUCKET/dvc" \
    && dvc remote modify --local "$AGENTWORLD_DVC_REMOTE" endpointurl "$AWS_ENDPOINT_URL_S3")
  log "dvc remote $AGENTWORLD_DVC_REMOTE -> s3://$AGENTWORLD_BUCKET/dvc in $dir"
}

SERVICES=(airflow-worker1 airflow-worker2 airflow-api-server airflow-triggerer airflow-dag-processor
          airflow-scheduler mlflow s3 redis)

up() {
  mkdir -p "$RUN" "$LOGS"
  load_env
  start_postgres
  start_redis
  start_s3
  start_mlflow
  dvc_remote "$AGENTWORLD_HOME"
  start_airflow
  log "up; settings in $ENV_FILE"
}

down() {
  [ -f "$ENV_FILE" ] || { log "nothing to stop ($ENV_FILE missing)"; return 0; }
  load_env
  if alive s3; then python -m agentworld.deploy.objectstore snapshot "$PROD/s3" --bucket "$AGENTWORLD_BUCKET" || true; fi
  local name
  for name in "${SERVICES[@]}"; do stop_group "$name"; done
  if [ -f "$PROD/postgres/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$PROD/postgres" status >/dev/null 2>&1; then
    as_pg "$PG_BIN/pg_ctl" -D "$PROD/postgres" -m fast -w stop >/dev/null
  fi
  log "down"
}

# A consistent copy of everything that is not rebuilt by `up`: the three databases (pg_dump, custom
# format: restore with pg_restore) and the bucket, into backups/<UTC time>/.
backup() {
  load_env
  local dest="$PROD/backups/$(date -u +%Y%m%dT%H%M%SZ)" db
  mkdir -p "$dest"
  for db in airflow mlflow mlflow_auth; do
    PGPASSWORD="$PROD_PG_PASSWORD" pg_dump -h 127.0.0.1 -p "$PROD_PG_PORT" -U postgres -Fc -f "$dest/$db.dump" "$db"
  done
  python -m agentworld.deploy.objectstore snapshot "$dest/s3" --bucket "$AGENTWORLD_BUCKET"
  cp "$ENV_FILE" "$dest/production.env"
  log "backup in $dest"
}

status() {
  load_env
  local name rc=0
  for name in "${SERVICES[@]}"; do
    if alive "$name"; then echo "$name: running (pid $(cat "$RUN/$name.pid"))"; else echo "$name: stopped"; rc=1; fi
  done
  if as_pg "$PG_BIN/pg_ctl" -D "$PROD/postgres" status >/dev/null 2>&1; then echo "postgres: running"; else echo "postgres: stopped"; rc=1; fi
  return $rc
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  env) load_env; echo "$ENV_FILE" ;;
  backup) backup ;;
  dvc-remote) load_env; dvc_remote "${2:?usage: prod_stack.sh dvc-remote DIR}" ;;
  *) echo "usage: $0 up | down | status | backup | env | dvc-remote DIR" >&2; exit 2 ;;
esac
