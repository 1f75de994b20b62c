"""params.yaml schema: bad settings stop the run with the key path named."""

from __future__ import annotations

import pytest
import yaml

from agentworld.config import ParamsError, load_params
from agentworld.profiles import write_profile
from tests.conftest import PROJECT, SMOKE_PARAMS


@pytest.mark.parametrize("path", [PROJECT / "params.yaml", SMOKE_PARAMS, PROJECT / "profiles" / "research.yaml",
                                  PROJECT / "profiles" / "research-cpu.yaml",
                                  PROJECT / "profiles" / "production.yaml"])
def test_shipped_profiles_are_valid(path):
    params = load_params(path)
    assert "terminal" in params.collect.domains and "android" not in params.collect.domains
    assert params.flat()["sft.max_steps"] == params.sft.max_steps


def test_demo_and_research_profiles_cover_every_one_machine_domain():
    every = {"terminal", "os", "mcp", "search", "swe", "web", "textworld", "scienceworld"}
    assert set(load_params(PROJECT / "params.yaml").collect.domains) == every
    research = load_params(PROJECT / "profiles" / "research.yaml").collect
    assert set(research.domains) == every
    # at least 1e5 transitions: every episode takes at least 4 steps in all eight domains' demo data
    assert sum(research.episodes_for(d) for d in research.domains) * 4 >= 100_000


def test_per_domain_episode_overrides():
    params = load_params(SMOKE_PARAMS, {"collect.episodes": {"web": 3}})
    assert params.collect.episodes_for("web") == 3
    assert params.collect.episodes_for("terminal") == params.collect.episodes_per_domain
    with pytest.raises(ParamsError, match="collect.episodes"):
        load_params(SMOKE_PARAMS, {"collect.episodes": {"web": 0}})
    with pytest.raises(ParamsError, match="collect.domains"):
        load_params(SMOKE_PARAMS, {"collect.domains": ["terminal", "mars"]})


def _write(tmp_path, mutate):
    raw = yaml.safe_load((PROJECT / "params.yaml").read_text())
    mutate(raw)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("mutate", "key_path", "hint"),
    [
        (lambda r: r["sft"].update(learnin_rate=0.1), "sft.learnin_rate", "unknown key"),
        (lambda r: r["cpt"].update(max_steps="many"), "cpt.max_steps", "integer"),
        (lambda r: r["rl"].update(learning_rate=-1), "rl.learning_rate", "greater than 0"),
        (lambda r: r["rl"].update(batch_size=6), "rl", "multiple of num_generations"),
        (lambda r: r["cpt"]["mix"].update(corpora=0.5), "cpt.mix", "sum to 1.0"),
        (lambda r: r["corpora"].update(sources=["wikipedia"]), "corpora.sources.0", "manpages"),
        (lambda r: r["validate"].update(max_rejected_share=1.5), "validate.max_rejected_share", "less than or equal to 1"),
        (lambda r: r["collect"].update(domains=["terminal", "mars"]), "collect.domains.1", "terminal"),
        (lambda r: r["collect"]["policy_mix"].update(scripted=0.9), "collect.policy_mix", "sum to 1.0"),
        (lambda r: r.update(extra_section={}), "extra_section", "unknown key"),
        (lambda r: r["model"].update(source="local", path=None), "model", "needs 'path'"),
    ],
)
def test_invalid_params_name_the_key_path(tmp_path, mutate, key_path, hint):
    with pytest.raises(ParamsError) as err:
        load_params(_write(tmp_path, mutate))
    message = str(err.value)
    assert f"  {key_path}:" in message
    assert hint in message
    assert str(tmp_path / "params.yaml") in message


def test_overrides_are_validated_with_dotted_keys():
    params = load_params(SMOKE_PARAMS, {"sft.max_steps": 7, "collect": {"episodes_per_domain": 3}})
    assert params.sft.max_steps == 7 and params.collect.episodes_per_domain == 3
    with pytest.raises(ParamsError, match=r"cpt\.batch_size"):
        load_params(SMOKE_PARAMS, {"cpt.batch_size": 0})


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ParamsError, match="file not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)


def test_airflow_trigger_form_values_become_the_runs_validated_settings(tmp_path, monkeypatch):
    from agentworld_dags.form import overrides_from_form
    from agentworld_dags.runs import resolve_run, run_params

    smoke = load_params(SMOKE_PARAMS)
    assert overrides_from_form({"sft_steps": 5, "unrelated": 1}, smoke) == {"sft.max_steps": 5}
    from tests.airflow_stack import clone_project

    project = tmp_path / "project"
    clone_project(project)  # a run's workspace is a git worktree of the project
    write_profile(SMOKE_PARAMS, project / "params.yaml")
    monkeypatch.setenv("AGENTWORLD_HOME", str(project))
    assert resolve_run({"episodes_per_domain": 9}, "r1").collect.episodes_per_domain == 9
    assert run_params("r1").collect.episodes_per_domain == 9  # later tasks read what the first one fixed
    assert load_params(project / "runs" / "airflow" / "r1" / "params.yaml").collect.episodes_per_domain == 9
    with pytest.raises(ParamsError, match="collect.episodes_per_domain"):
        resolve_run({"episodes_per_domain": 0}, "r2")
    assert not (project / "runs" / "airflow" / "r2").exists()  # refused before any workspace is made


def test_trigger_form_episodes_per_domain_applies_to_every_domain_unless_episodes_is_edited():
    from agentworld_dags.form import apply_overrides, overrides_from_form

    base = load_params(PROJECT / "params.yaml")  # the demo: per-domain counts for six domains
    assert base.collect.episodes
    changed = apply_overrides(base, overrides_from_form({"episodes_per_domain": 4, "episodes": base.collect.episodes},
                                                        base), "form")
    assert {changed.collect.episodes_for(d) for d in base.collect.domains} == {4}
    edited = apply_overrides(base, overrides_from_form({"episodes_per_domain": 4, "episodes": {"mcp": 7}}, base),
                             "form")
    assert edited.collect.episodes_for("mcp") == 7 and edited.collect.episodes_for("terminal") == 4
    untouched = apply_overrides(base, overrides_from_form({"episodes_per_domain": base.collect.episodes_per_domain,
                                                           "episodes": base.collect.episodes}, base), "form")
    assert untouched == base  # the form's defaults reproduce params.yaml


def test_trigger_form_fields_take_bounds_and_choices_from_the_schema():
    from agentworld_dags.form import FORM_FIELDS, field_schema

    params = load_params(PROJECT / "params.yaml")
    assert field_schema(params, "collect.episodes_per_domain") == {"type": "integer", "minimum": 1, "maximum": 1_000_000}
    assert field_schema(params, "synthesize.control.fault_rate")["maximum"] == 1.0
    assert field_schema(params, "agent.rl.env")["enum"] == ["sim", "real", "none"]
    assert field_schema(params, "synthesize.control.fiction")["type"] == ["string", "null"]
    assert "android" in field_schema(params, "synthesize.domains")["items"]["enum"]
    for key, _ in FORM_FIELDS.values():  # every form field names a real key
        assert field_schema(params, key)["type"]


def test_unworkable_split_is_refused_before_anything_runs():
    from agentworld.data.build import check_split, planned_split

    smoke = load_params(SMOKE_PARAMS)
    assert sum(h for _, h in planned_split(smoke.collect, smoke.build).values()) > 0
    one = smoke.collect.model_copy(update={"episodes_per_domain": 1})
    with pytest.raises(ParamsError, match=r"0 held-out episodes .* Collect at least \d+ episodes"):
        check_split(one, smoke.build)
