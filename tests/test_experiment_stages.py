"""The staged-training ablation: confidence intervals by hand, and a small real run whose
results land in MLflow as one comparable group."""

from __future__ import annotations

import json
import math

import pytest
from mlflow import MlflowClient

import stages.build
from agentworld.data.corpora import build_corpora
from agentworld.data.io import write_jsonl
from agentworld.experiments.stats import bootstrap_ci, mean_ci
from stages.ablation import render, run_stages_experiment, summarise
from stages.paths import StagePaths
from tests.helpers import make_transitions


def test_mean_ci_matches_students_t_by_hand():
    mean, half = mean_ci([0.2, 0.4, 0.6])
    assert mean == pytest.approx(0.4)
    assert half == pytest.approx(4.302653 * 0.2 / math.sqrt(3), rel=1e-5)  # t(0.975, 2) = 4.3027, sd = 0.2
    assert mean_ci([0.5, 0.5, 0.5]) == (pytest.approx(0.5), 0.0)
    assert math.isnan(mean_ci([0.3])[1])
    with pytest.raises(ValueError):
        mean_ci([])


def test_bootstrap_ci_matches_the_normal_approximation_for_many_records():
    values = [1.0] * 30 + [0.0] * 70  # exact match 0.3 on 100 records: se = sqrt(.3 * .7 / 100)
    low, high = bootstrap_ci(values)
    se = math.sqrt(0.3 * 0.7 / 100)
    assert low == pytest.approx(0.3 - 1.96 * se, abs=0.02) and high == pytest.approx(0.3 + 1.96 * se, abs=0.02)
    assert bootstrap_ci([0.5] * 5) == (0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def _result(em: float) -> dict:
    scores = {"terminal": {"exact_match": em, "token_f1": em + 0.1}, "all": {"exact_match": em, "token_f1": em + 0.1}}
    return {"metrics": {"world_model": scores, "retrieval": {"all": {"exact_match": 0.3, "token_f1": 0.5}}},
            "wall_s": 10.0, "steps": {"sft": 4}}


def test_summary_table_per_variant_and_domain():
    per_seed = {s: {"sft_only": _result(0.1 * s), "cpt_sft": _result(0.2)} for s in (0, 1, 2)}
    table = summarise(per_seed)
    assert list(table) == ["sft_only", "cpt_sft"]
    assert table["sft_only"]["terminal"]["exact_match"]["mean"] == pytest.approx(0.1)
    assert table["sft_only"]["terminal"]["exact_match"]["values"] == [0.0, 0.1, 0.2]
    assert table["cpt_sft"]["all"]["token_f1"]["ci95"] == pytest.approx(0.0)
    text = render(table, [0, 1, 2])
    assert "| sft_only | sft 4 | 10 | 0.100 ± 0.248 / 0.200 ± 0.248 | 0.100 ± 0.248 / 0.200 ± 0.248 |" in text
    assert "Retrieval baseline (all): exact match 0.300" in text


@pytest.mark.slow
def test_small_ablation_logs_one_comparable_group(tmp_path, smoke_params, mlflow_store):
    paths = StagePaths(tmp_path)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=30))
    stages.build.run(smoke_params, tmp_path)
    build_corpora(paths.corpora, smoke_params.corpora.sources)
    result = run_stages_experiment(smoke_params, [0, 1], ["sft_only", "cpt_sft", "cpt_sft_rl"], tmp_path,
                                   tmp_path / "runs")
    table = result["table"]
    assert set(table) == {"sft_only", "cpt_sft", "cpt_sft_rl"}
    assert table["sft_only"]["steps"] == {"sft": smoke_params.cpt.max_steps + smoke_params.sft.max_steps}
    assert table["cpt_sft_rl"]["steps"]["rl"] == smoke_params.rl.max_steps
    assert len(table["cpt_sft"]["terminal"]["exact_match"]["values"]) == 2
    saved = json.loads((tmp_path / "reports/experiments/stages.json").read_text())
    assert saved["seeds"] == [0, 1]

    client = MlflowClient()
    children = client.search_runs(
        [client.get_run(result["parent_run_id"]).info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{result['parent_run_id']}' and tags.`agentworld.kind` = 'experiment-result'")
    assert sorted((r.data.tags["variant"], r.data.tags["seed"]) for r in children) == sorted(
        (v, s) for v in ("sft_only", "cpt_sft", "cpt_sft_rl") for s in ("0", "1"))
    assert all("terminal.exact_match" in r.data.metrics for r in children)
    parent = client.get_run(result["parent_run_id"])
    assert "cpt_sft.all.exact_match.mean" in parent.data.metrics
    assert not client.search_registered_models()  # ablation models are not registered
