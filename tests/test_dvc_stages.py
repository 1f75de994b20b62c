"""dvc.yaml's commands say what each stage reads and writes: `agentworld stage NAME --in PATH
--out PATH` names the same data paths as the stage's deps and outs, and the command holds the
stage to them (a missing input is refused before any work; an output the stage did not write
fails the command)."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from agentworld.cli import app
from tests.conftest import SMOKE_PARAMS

ROOT = Path(__file__).resolve().parents[1]
CODE = ("agentworld/", "stages/")


def _data_paths(entries: list | None) -> set[str]:
    """The non-code paths of a deps/outs/metrics/plots list (entries may carry options)."""
    paths = (next(iter(entry)) if isinstance(entry, dict) else entry for entry in entries or [])
    return {path for path in paths if not path.startswith(CODE)}


def _cmd_paths(cmd: str, flag: str) -> set[str]:
    words = shlex.split(cmd)
    return {words[i + 1] for i, word in enumerate(words) if word == flag}


def test_every_stage_command_names_its_data_inputs_and_outputs():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert len(stages) >= 13
    for name, stage in stages.items():
        body = stage.get("do", stage)
        assert body["cmd"].startswith("agentworld stage "), name
        assert _cmd_paths(body["cmd"], "--in") == _data_paths(body.get("deps")), f"{name}: --in differs from deps"
        outs = _data_paths(body.get("outs")) | _data_paths(body.get("metrics")) | _data_paths(body.get("plots"))
        assert _cmd_paths(body["cmd"], "--out") == outs, f"{name}: --out differs from outs, metrics and plots"


def test_a_stage_refuses_a_missing_input_and_fails_on_an_output_it_did_not_write(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(app, ["stage", "corpora", "--params", str(SMOKE_PARAMS), "--root", str(tmp_path),
                                  "--in", "data/sft/train.jsonl", "--out", "data/corpora"])
    assert missing.exit_code == 2 and "missing input(s)" in missing.output and "data/sft/train.jsonl" in missing.output
    assert not (tmp_path / "data" / "corpora").exists()  # refused before any work

    unwritten = runner.invoke(app, ["stage", "corpora", "--params", str(SMOKE_PARAMS), "--root", str(tmp_path),
                                    "--out", "data/corpora", "--out", "reports/corpora.json", "--out", "data/nothing"])
    assert unwritten.exit_code == 1, unwritten.output
    assert "not written" in unwritten.output and "data/nothing" in unwritten.output
    assert "data/corpora," not in unwritten.output.split("not written")[1]  # the written ones are not blamed
    assert (tmp_path / "data" / "corpora").is_dir() and (tmp_path / "reports" / "corpora.json").is_file()
