"""The `agentworld` command line against the real components."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from typer.testing import CliRunner

from agentworld.cli import app
from agentworld.data.io import write_jsonl
from agentworld.data.schema import Transition
from tests.conftest import PROJECT
from tests.helpers import make_transitions

runner = CliRunner()
PARAMS = ["--params", str(PROJECT / "params.yaml")]


ONE_MACHINE_DOMAINS = ("terminal", "os", "mcp", "search", "swe", "web", "textworld", "scienceworld")


def test_envs_list_shows_every_domain_and_why_android_cannot_run():
    result = runner.invoke(app, ["envs", "list"])
    assert result.exit_code == 0
    status = {line.split()[0]: line.split(None, 1)[1] for line in result.stdout.splitlines() if line.strip()}
    assert set(status) == {*ONE_MACHINE_DOMAINS, "android"}
    assert status["android"].startswith("unavailable: no Android emulator")
    if os.environ.get("CI"):  # CI installs every dependency: all eight must run there
        assert all(status[d] == "available" for d in ONE_MACHINE_DOMAINS), status


@pytest.mark.parametrize("domain", ONE_MACHINE_DOMAINS)
def test_envs_play_prints_real_transitions_for_every_domain(domain):
    result = runner.invoke(app, ["envs", "play", domain, "--seed", "1", "--steps", "5", *PARAMS])
    if result.exit_code != 0 and "is unavailable" in result.output and not os.environ.get("CI"):
        pytest.skip(result.output.strip())
    assert result.exit_code == 0, result.output
    rows = [Transition.model_validate(json.loads(line)) for line in result.stdout.splitlines()]
    assert 1 <= len(rows) <= 5
    assert [r.turn for r in rows] == list(range(len(rows)))
    assert all(r.domain == domain and r.source == "real" for r in rows)
    assert any(r.observation.strip() for r in rows)  # the environment answered something


def test_envs_play_unknown_domain_is_a_clear_error():
    result = runner.invoke(app, ["envs", "play", "mars", *PARAMS])
    assert result.exit_code == 2
    assert "'mars' is not one of" in result.output and "'terminal'" in result.output  # the choices, named


def test_choices_are_listed_in_help_and_refused_otherwise():
    def help_of(*command: str) -> str:  # wide, so the choices are not wrapped
        return runner.invoke(app, [*command, "--help"], env={"COLUMNS": "240", "TERMINAL_WIDTH": "240"}).output

    assert "collect|validate|corpora|build|tokenizer|cpt|sft|rl|evaluate|promote|synthesize" in help_of("stage")
    assert "scripted|exploratory|erroneous" in help_of("envs", "play")
    assert "local|openai|both" in help_of("eval", "run") and "transformers|vllm" in help_of("eval", "run")
    refused = runner.invoke(app, ["stage", "train", *PARAMS])
    assert refused.exit_code == 2 and "'train' is not one of" in refused.output


def test_validate_exit_codes(tmp_path):
    clean = tmp_path / "clean.jsonl"
    write_jsonl(clean, make_transitions(episodes=3))
    ok = runner.invoke(app, ["validate", str(clean), *PARAMS])
    assert ok.exit_code == 0, ok.output

    bad = tmp_path / "bad.jsonl"
    lines = clean.read_text().splitlines()
    row = json.loads(lines[1])
    row["action"] = ""
    lines[1] = json.dumps(row)
    bad.write_text("\n".join(lines) + "\n")
    failed = runner.invoke(app, ["validate", str(bad), *PARAMS])
    assert failed.exit_code == 1
    assert ":2:" in failed.output and "action" in failed.output

    missing = runner.invoke(app, ["validate", str(tmp_path / "nope.jsonl"), *PARAMS])
    assert missing.exit_code == 2 and "file not found" in missing.output


def test_invalid_params_exit_with_key_path(tmp_path):
    params = tmp_path / "params.yaml"
    data = yaml.safe_load((PROJECT / "params.yaml").read_text())
    data["sft"]["max_steps"] = -5
    params.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["stage", "collect", "--params", str(params)])
    assert result.exit_code == 2
    assert "sft.max_steps" in result.output


def test_the_console_script_reports_a_failed_pipeline_tool_without_a_traceback(tmp_path):
    """`agentworld pipeline` where `dvc repro` fails (here: not a DVC repository), run as the
    installed console script: one message naming the command and exit 1, no traceback."""
    import shutil
    import subprocess

    shutil.copy(PROJECT / "params.yaml", tmp_path / "params.yaml")
    env = {**os.environ, "AGENTWORLD_HOME": str(tmp_path), "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([shutil.which("agentworld") or "agentworld", "pipeline", "--no-push"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "pipeline: `dvc repro` failed" in done.stderr and "Traceback" not in done.stderr
