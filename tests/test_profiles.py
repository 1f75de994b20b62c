"""Profiles are overlays of params.yaml: they resolve onto the demo, and `agentworld profile`
writes params.yaml whole (DVC reads every value from it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from agentworld.config import ParamsError, load_params, merge_patch, resolve_profile
from agentworld.profiles import write_profile
from tests.conftest import PROJECT

SHIPPED = sorted(p.stem for p in (PROJECT / "profiles").glob("*.yaml"))


def _leaves(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_are_overlays_that_change_every_key_they_list(name):
    path = PROJECT / "profiles" / f"{name}.yaml"
    overlay = yaml.safe_load(path.read_text())
    base_name = overlay.pop("extends")
    base = resolve_profile(PROJECT / "params.yaml" if base_name == "demo" else path.parent / f"{base_name}.yaml")
    flat_base = _leaves(base)
    repeated = [key for key, value in _leaves(overlay).items() if key in flat_base and flat_base[key] == value]
    assert not repeated, f"{path} repeats its base's values (an overlay lists only what it changes): {repeated}"
    assert len(path.read_text().splitlines()) < 100  # not a copy of params.yaml


def test_merge_patch_merges_mappings_replaces_values_and_null_removes():
    base = {"a": {"x": 1, "y": [1, 2]}, "b": {"k": 1}, "c": 3}
    assert merge_patch(base, {"a": {"y": [3]}, "b": None, "d": {"e": 1}}) == {"a": {"x": 1, "y": [3]}, "c": 3,
                                                                             "d": {"e": 1}}
    assert base["b"] == {"k": 1}  # the base is not changed


def test_written_params_load_to_the_profile_and_keep_the_demos_comments(tmp_path):
    project = tmp_path / "project"
    (project / "profiles").mkdir(parents=True)
    shutil.copy(PROJECT / "params.yaml", project / "params.yaml")
    for name in SHIPPED:
        shutil.copy(PROJECT / "profiles" / f"{name}.yaml", project / "profiles")
    out = write_profile(project / "profiles" / "production.yaml", project / "params.yaml")
    written = out.read_text()
    assert load_params(out) == load_params(PROJECT / "profiles" / "production.yaml")
    assert load_params(out).profile == "production" and load_params(out).schedule.nightly
    assert "# Every knob of the pipeline" in written  # the demo's own comments stay
    assert "judge_base_url: http://127.0.0.1:8000/v1   # the judge LLM behind `vllm serve`" in written
    assert "extends" not in yaml.safe_load(written)
    # params.yaml now holds another profile: an overlay of the demo refuses to stack on it
    with pytest.raises(ParamsError, match="holds profile 'production'.*git checkout params.yaml"):
        write_profile(project / "profiles" / "smoke.yaml", project / "params.yaml")


@pytest.mark.parametrize("name", SHIPPED)
def test_written_params_hold_every_key_of_the_demo_that_dvc_tracks(tmp_path, name):
    """A key an overlay removes (null) is written with its default: a DVC stage that tracks it
    would otherwise fail with `Parameters ... are missing from 'params.yaml'`."""
    out = write_profile(PROJECT / "profiles" / f"{name}.yaml", tmp_path / "params.yaml")
    demo = _leaves(yaml.safe_load((PROJECT / "params.yaml").read_text()))
    written = _leaves(yaml.safe_load(out.read_text()))
    def present(key: str) -> bool:  # itself, or a mapping above or below it ({} vs {web: 40})
        return any(w == key or w.startswith(f"{key}.") or key.startswith(f"{w}.") for w in written)

    assert [key for key in demo if not present(key)] == []
    assert load_params(out).model_dump() == load_params(PROJECT / "profiles" / f"{name}.yaml").model_dump()
    tracked = {p for stage in yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"].values()
               for p in (stage.get("do", stage).get("params") or []) if isinstance(p, str)}
    assert tracked and [key for key in tracked if not present(key)] == []


def test_params_yaml_with_extends_is_refused_with_the_command_to_write_it(tmp_path):
    (tmp_path / "params.yaml").write_text("extends: demo\nprofile: smoke\n")
    with pytest.raises(ParamsError, match="agentworld profile smoke"):
        load_params(tmp_path / "params.yaml")


def test_overlays_that_extend_each_other_in_a_circle_are_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b\n")
    (tmp_path / "b.yaml").write_text("extends: a\n")
    with pytest.raises(ParamsError, match="circle"):
        load_params(tmp_path / "a.yaml")


def test_profile_command_writes_params_and_names_unknown_profiles(tmp_path):
    shutil.copy(PROJECT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(PROJECT / "profiles", tmp_path / "profiles")
    cli = [sys.executable, "-m", "agentworld.cli", "profile"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([*cli, "research-cpu"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert load_params(tmp_path / "params.yaml").model_dump() == \
        load_params(PROJECT / "profiles" / "research-cpu.yaml").model_dump()
    missing = subprocess.run([*cli, "nightly"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no such profile (profiles: production, research, research-cpu, smoke)" \
        in missing.stderr
