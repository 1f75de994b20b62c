"""The `agentworld` command line against the real components."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from agentworld.cli import app
from agentworld.data.io import write_jsonl
from agentworld.data.schema import Transition
from tests.conftest import PROJECT
from tests.helpers import make_transitions

runner = CliRunner()
PARAMS = ["--params", str(PROJECT / "params.yaml")]


def test_envs_list_shows_terminal_available():
    result = runner.invoke(app, ["envs", "list"])
    assert result.exit_code == 0
    assert "terminal" in result.stdout and "available" in result.stdout


def test_envs_play_prints_transitions_as_json_lines():
    result = runner.invoke(app, ["envs", "play", "terminal", "--seed", "1", "--steps", "3", *PARAMS])
    assert result.exit_code == 0, result.output
    rows = [Transition.model_validate(json.loads(line)) for line in result.stdout.splitlines()]
    assert 1 <= len(rows) <= 3
    assert [r.turn for r in rows] == list(range(len(rows)))
    assert all(r.domain == "terminal" and "exit_code" in r.info for r in rows)


def test_envs_play_unknown_domain_is_a_clear_error():
    result = runner.invoke(app, ["envs", "play", "mars", *PARAMS])
    assert result.exit_code == 2
    assert "unknown environment 'mars'" in result.output


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
    params.write_text((PROJECT / "params.yaml").read_text().replace("max_steps: 1000", "max_steps: -5"))
    result = runner.invoke(app, ["stage", "collect", "--params", str(params)])
    assert result.exit_code == 2
    assert "train.max_steps" in result.output
