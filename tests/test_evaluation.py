"""Evaluation: resumable inference, `agentworld eval` on a registered model, compare, and the
champion/challenger promotion gate against a real MLflow registry."""

from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient
from typer.testing import CliRunner

import stages.build
import stages.evaluate
import stages.promote
import stages.sft
import stages.tokenizer
from agentworld.cli import app
from agentworld.data.awbench import read_bench
from agentworld.data.corpora import build_corpora
from agentworld.data.io import write_jsonl
from agentworld.data.prompts import assistant_turn
from agentworld.evaluation.baselines import copy_previous
from agentworld.evaluation.infer import infer
from agentworld.evaluation.promotion import decide
from stages.paths import StagePaths
from tests.helpers import make_transitions, send_json

MODEL = "agentworld-world-model"


@pytest.fixture()
def bench_workspace(tmp_path, smoke_params):
    paths = StagePaths(tmp_path)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=40))
    stages.build.run(smoke_params, tmp_path)
    build_corpora(paths.corpora, smoke_params.corpora.sources)  # the tokenizer stage reads them
    stages.tokenizer.run(smoke_params, tmp_path)
    return paths


class Crashing:
    """A real baseline as the backend, which dies after `crash_after` batches, counting its prompts."""

    def __init__(self, crash_after: int | None = None) -> None:
        self.crash_after, self.batches, self.prompts = crash_after, 0, []

    def __call__(self, examples):
        if self.crash_after is not None and self.batches == self.crash_after:
            raise KeyboardInterrupt("killed mid-file")
        self.batches += 1
        self.prompts += [e.id for e in examples]
        return [assistant_turn(o) for o in copy_previous(examples)]


def test_inference_resumes_after_a_crash_mid_file(bench_workspace, tmp_path):
    records = read_bench(bench_workspace.agentworldbench)
    assert len(records) > 12
    out = tmp_path / "predictions.jsonl"
    first = Crashing(crash_after=2)
    with pytest.raises(KeyboardInterrupt):
        infer("world_model", first, records, out, batch_size=4, progress=False)
    written = out.read_text().splitlines()
    assert len(written) == 8
    with out.open("a") as fh:  # the crash also cut a line in half
        fh.write('{"id": "' + records[8].key + '", "predic')
    second = Crashing()
    rows = infer("world_model", second, records, out, batch_size=4, progress=False)
    assert second.prompts == [r.key for r in records[8:]]  # nothing finished is generated again
    assert [r["id"] for r in rows] == [r.key for r in records]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["id"] for row in lines) == sorted(r.key for r in records)  # each once, file valid JSONL
    fresh = infer("world_model", Crashing(), records, tmp_path / "fresh.jsonl", batch_size=4, progress=False)
    assert rows == fresh


def summary_with(scores: dict[str, float], md5: str = "same", baselines: dict[str, float] | None = None) -> dict:
    def table(values: dict[str, float]) -> dict:
        return {domain: {"judge_overall": v, "token_f1": v / 100, "exact_match": 0.0} for domain, v in values.items()}

    systems = {"world_model": table(scores), **{name: table({"all": v}) for name, v in (baselines or {}).items()}}
    return {"systems": systems, "data": {"md5": md5}}


def test_promotion_rule_both_ways(smoke_params):
    rule = smoke_params.promote.model_copy(update={"margin": 2.0, "floors": {"judge_overall": 30.0},
                                                   "beat_baselines": []})
    champion = summary_with({"terminal": 50.0, "os": 40.0, "all": 45.0})
    better = decide(summary_with({"terminal": 55.0, "os": 41.0, "all": 48.0}), champion, rule)
    assert better.promote and better.champion_score == 45.0 and "+ margin 2.0" in better.reason
    close = decide(summary_with({"terminal": 52.0, "os": 40.0, "all": 46.0}), champion, rule)
    assert not close.promote and close.reason == "judge_overall 46.0000 < champion 45.0000 + margin 2.0"
    floor = decide(summary_with({"terminal": 90.0, "os": 20.0, "all": 55.0}), champion, rule)
    assert not floor.promote and floor.reason == "below floor: os judge_overall 20.0000 < floor 30.0"
    first = decide(summary_with({"terminal": 35.0, "all": 35.0}), None, rule)
    assert first.promote and "no champion yet" in first.reason
    with pytest.raises(ValueError, match="different records"):
        decide(summary_with({"all": 50.0}, md5="other"), champion, rule)


def test_promotion_refuses_a_model_a_baseline_beats(smoke_params):
    """Without a champion, and against one it beats, a challenger below a floor baseline is refused,
    and the reason names the baseline; a required baseline that was not evaluated is an error."""
    rule = smoke_params.promote
    assert rule.beat_baselines == ["retrieval", "copy_previous", "untrained"]
    floors = {"retrieval": 52.0, "copy_previous": 40.0, "untrained": 10.0}
    below = decide(summary_with({"terminal": 50.0, "all": 50.0}, baselines=floors), None, rule)
    assert not below.promote and below.reason == "does not beat the baselines: judge_overall 50.0000 <= baseline retrieval 52.0000"
    weak_champion = summary_with({"all": 30.0}, baselines=floors)
    assert not decide(summary_with({"all": 50.0}, baselines=floors), weak_champion, rule).promote
    tie = decide(summary_with({"all": 52.0}, baselines=floors), None, rule)
    assert not tie.promote and "baseline retrieval" in tie.reason
    above = decide(summary_with({"all": 53.0}, baselines=floors), weak_champion, rule)
    assert above.promote and above.reason.endswith("+ margin 0.0, beats retrieval, copy_previous, untrained")
    first = decide(summary_with({"all": 53.0}, baselines=floors), None, rule)
    assert first.promote and first.reason.endswith("beats retrieval, copy_previous, untrained")
    with pytest.raises(ValueError, match="promote.beat_baselines needs untrained"):
        decide(summary_with({"all": 53.0}, baselines={"retrieval": 1.0, "copy_previous": 1.0}), None, rule)


def _train_and_evaluate(params, root, steps: int) -> str:
    staged = params.model_copy(update={
        "sft": params.sft.model_copy(update={"init": "scratch", "max_steps": steps, "save_steps": 1000}),
        "evaluate": params.evaluate.model_copy(update={"stage": "sft", "baselines": ["copy_previous"],
                                                       "rollout_episodes": 2, "rollout_horizon": 2}),
        # the champion chain alone: barely trained models never beat copy-previous
        # (test_promotion_refuses_a_model_a_baseline_beats covers that rule)
        "promote": params.promote.model_copy(update={"beat_baselines": []}),
    })
    version = stages.sft.run(staged, root)["registered_version"]
    metrics = stages.evaluate.run(staged, root)
    assert metrics["registered_version"] == int(version)
    return staged


@pytest.mark.slow
def test_promotion_gate_against_the_registry(bench_workspace, smoke_params, mlflow_store):
    """v1 (barely trained) becomes champion; v2 (trained longer) beats it; v3 (barely trained)
    is refused, with the reason on its version, and the champion stays v2."""
    client = MlflowClient()
    root = bench_workspace.root
    params = _train_and_evaluate(smoke_params, root, steps=1)
    first = stages.promote.run(params, root)
    assert first["promoted"] and first["champion_version"] is None

    params = _train_and_evaluate(smoke_params, root, steps=60)
    second = stages.promote.run(params, root)
    assert second["promoted"], second["reason"]
    assert second["champion_version"] == first["challenger_version"]
    assert second["challenger_score"] > second["champion_score"]
    assert str(client.get_model_version_by_alias(MODEL, "champion").version) == str(second["challenger_version"])

    params = _train_and_evaluate(smoke_params, root, steps=1)
    third = stages.promote.run(params, root)
    assert not third["promoted"]
    refused = client.get_model_version(MODEL, str(third["challenger_version"])).tags
    assert refused["promotion"] == "refused"
    assert refused["promotion_reason"].startswith("judge_overall ") and "< champion" in refused["promotion_reason"]
    assert refused["compared_with"] == str(second["challenger_version"])
    assert str(client.get_model_version_by_alias(MODEL, "champion").version) == str(second["challenger_version"])
    saved = json.loads(bench_workspace.report("promotion.json").read_text())
    assert saved == third


@pytest.mark.slow
def test_eval_cli_scores_the_champion_with_baselines_and_compares_versions(bench_workspace, smoke_params, mlflow_store,
                                                                          monkeypatch, tmp_path):
    root = bench_workspace.root
    monkeypatch.setenv("AGENTWORLD_HOME", str(root))
    params = smoke_params.model_copy(update={"sft": smoke_params.sft.model_copy(update={"init": "scratch", "max_steps": 8})})
    v1 = stages.sft.run(params, root)["registered_version"]
    v2 = stages.sft.run(params.model_copy(update={"sft": params.sft.model_copy(update={"max_steps": 2})}), root)["registered_version"]
    MlflowClient().set_registered_model_alias(MODEL, "champion", v1)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(json.dumps(smoke_params.model_dump(mode="json", by_alias=True)))
    runner = CliRunner()
    out = tmp_path / "eval"
    result = runner.invoke(app, ["eval", "run", "--data", str(bench_workspace.agentworldbench), "--model",
                                 f"models:/{MODEL}@champion", "--out", str(out), "--params", str(params_file)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["registered_version"] == str(v1)
    # ranked_memory: the registered version's memory came with its scorer through the registry.
    assert set(summary["systems"]) == {"world_model", "retrieval", "episode_retrieval", "ranked_memory",
                                       "copy_previous", "untrained"}
    for system, table in summary["systems"].items():
        assert set(table) == {"terminal", "all"}
        for metric in ("format", "realism", "quality", "judge_overall"):  # apply to every record
            assert 0.0 <= table["all"][metric] <= 100.0
        for metric in ("factuality", "consistency"):  # null (n/a) when no record has anything to check
            assert table["all"][metric] is None or 0.0 <= table["all"][metric] <= 100.0
        assert 0.0 <= table["all"]["exact_match"] <= table["all"]["token_f1"] + 1e-9 <= 1.0 + 1e-9
    assert "| domain | n | format | factuality | consistency | realism | quality |" in result.output
    assert summary["rollout"]["world_model"] and summary["by_turn"]["untrained"]
    assert set(summary["rollout_below_baseline_from"]) == {"retrieval", "episode_retrieval", "ranked_memory",
                                                              "copy_previous", "untrained"}
    steps = len(summary["rollout"]["world_model"])
    assert f"Free-running over {steps} steps, the world model is" in (out / "summary.md").read_text()
    for name in ("predictions/world_model.jsonl", "judged/local/untrained.jsonl", "worst_examples.md",
                 "plots/judge_dimensions.png", "plots/rollout.png", "data/terminal_test.jsonl"):
        assert (out / name).exists(), name

    compared = runner.invoke(app, ["eval", "compare", str(v2), "@champion", "--params", str(params_file)])
    assert compared.exit_code != 0 and "has no logged evaluation" in compared.output  # v2 was never scored
    compared = runner.invoke(app, ["eval", "compare", str(v2), "@champion", "--data", str(bench_workspace.agentworldbench),
                                   "--params", str(params_file), "--max-examples", "6"])
    assert compared.exit_code == 0, compared.output
    assert f"A: models:/{MODEL}/{v2}" in compared.output and f"B: models:/{MODEL}/{v1}" in compared.output
    row = next(line for line in compared.output.splitlines() if line.startswith("| all |"))
    assert row.count("|") == 11  # domain + 3 metrics x (A, B, delta)


def test_eval_cli_errors_name_the_setting(tmp_path, bench_workspace, mlflow_store):
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "run", "--data", str(tmp_path / "nowhere"), "--model", "x"])
    assert result.exit_code == 2 and "no such file or directory" in result.output
    result = runner.invoke(app, ["eval", "run", "--data", str(bench_workspace.agentworldbench), "--model",
                                 str(tmp_path / "no-model")])
    assert result.exit_code == 2 and "--model" in result.output
    result = runner.invoke(app, ["eval", "run", "--data", str(bench_workspace.agentworldbench),
                                 "--base-url", "http://127.0.0.1:9/v1", "--model-name", "tiny"])
    assert result.exit_code == 2 and "--base-url http://127.0.0.1:9/v1: no OpenAI-compatible server answers" in result.output
    result = runner.invoke(app, ["eval", "run", "--data", str(bench_workspace.agentworldbench), "--model",
                                 f"models:/{MODEL}@champion"])
    assert result.exit_code == 2 and "not in the registry" in result.output


class RubricStubServer:
    """An OpenAI-compatible HTTP server standing in for an LLM judge (none can run here): it
    reads our rubric prompt and scores 5 when the prediction holds the reference, else 2."""

    def __init__(self) -> None:
        import re
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        def block(text: str, tag: str) -> str:
            found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
            return found.group(1) if found else ""

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # /v1/models
                send_json(self, {"object": "list", "data": [{"id": "judge", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                reference, prediction = block(prompt, "reference").strip(), block(prompt, "prediction")
                score = 5 if reference and reference in prediction else 2
                answer = json.dumps({d: score for d in ("format", "factuality", "consistency", "realism", "quality")})
                send_json(self, {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": answer}}]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_both_judges_score_every_system_and_report_their_agreement(bench_workspace, smoke_params, tmp_path):
    from agentworld.evaluation.run import WorldModel, evaluate

    records = read_bench(bench_workspace.agentworldbench)[:24]

    def half_right(examples):  # a stand-in world model: the real observation on every other turn
        return [assistant_turn(e.observation if i % 2 == 0 else "bash: nothing") for i, e in enumerate(examples)]

    stand_in = WorldModel(label="half-right stand-in", generate=half_right, identity="stand-in")
    with RubricStubServer() as url:
        settings = smoke_params.evaluate.model_copy(update={
            "judge": "both", "judge_base_url": url, "judge_model": "judge", "baselines": ["retrieval"],
            "rollout_episodes": 0})
        summary = evaluate(records, stand_in, settings, tmp_path / "eval", data_path="bench", model_params=smoke_params.model,
                           progress=False)
    assert summary["judges"] == ["llm", "local"] and summary["primary_judge"] == "llm"
    assert set(summary["secondary_systems"]) == {"world_model", "retrieval"}
    agreement = summary["judge_agreement"]
    assert set(agreement) == {"overall", "format", "factuality", "consistency", "realism", "quality"}
    assert agreement["overall"] > 0.3  # both judges reward predictions that hold the real observation
    assert (tmp_path / "eval" / "judged" / "llm" / "retrieval.jsonl").exists()
    assert "Judge agreement (Spearman rank correlation" in (tmp_path / "eval" / "summary.md").read_text()

    # the judge and score steps alone, from the CLI, on the same directory
    (tmp_path / "eval" / "judged" / "local" / "retrieval.jsonl").unlink()
    runner = CliRunner()
    judged = runner.invoke(app, ["eval", "judge", "--out", str(tmp_path / "eval"), "--judge", "local"])
    assert judged.exit_code == 0 and "judged by local" in judged.output, judged.output
    scored = runner.invoke(app, ["eval", "score", "--out", str(tmp_path / "eval")])
    assert scored.exit_code == 0, scored.output
    assert json.loads((tmp_path / "eval" / "summary.json").read_text())["systems"] == summary["systems"]


def test_baseline_comparison_counts_wins_per_domain_against_the_best_baseline():
    from agentworld.summary import baseline_comparison

    def row(f1, em, judge=50.0):
        return {"token_f1": f1, "exact_match": em, "judge_overall": judge, "n": 30,
                "token_f1_low": f1 - 0.1, "token_f1_high": f1 + 0.1}

    evaluate = {
        "world_model": {"os": row(0.6, 0.5, 70), "mcp": row(0.2, 0.1), "all": row(0.4, 0.3, 70)},
        "retrieval": {"os": row(0.5, 0.4), "mcp": row(0.3, 0.2), "all": row(0.4, 0.3, 60)},
        "copy_previous": {"os": row(0.1, 0.6), "mcp": row(0.1, 0.0), "all": row(0.1, 0.3, 40)},
    }
    lines = baseline_comparison(evaluate, ["retrieval", "copy_previous"])
    assert lines[-1].startswith("beats the best baseline in 1/2 domains on token F1, 0/2 on exact match")
    assert "judge overall 70.0 vs retrieval 60.0" in lines[-1]
    os_line = next(line for line in lines if line.startswith("os "))
    assert "0.600 [0.500, 0.700]" in os_line and "copy_previous 0.600" in os_line


def test_the_summary_compares_the_model_with_floors_and_its_ranked_memory_apart():
    """ranked_memory is part of the world model: it is shown beside it, never taken as the
    best baseline, so a model is not counted as losing to its own component."""
    from agentworld.summary import render_summary

    def row(value, judge):
        return {"token_f1": value, "exact_match": value, "judge_overall": judge, "n": 30}

    evaluate = {"examples": 60,
                "world_model": {"os": row(0.5, 70), "all": row(0.5, 70)},
                "ranked_memory": {"os": row(0.6, 75), "all": row(0.6, 75)},
                "retrieval": {"os": row(0.3, 60), "all": row(0.3, 60)}}
    text = render_summary({"evaluate": evaluate})
    assert "beats the best baseline in 1/1 domains on token F1, 1/1 on exact match; judge overall 70.0 vs " \
           "retrieval 60.0" in text
    assert "world model vs ranked_memory alone (overall): judge 70.0 vs 75.0, exact match 0.500 vs 0.600, " \
           "token F1 0.500 vs 0.600" in text


def test_the_evaluated_sample_is_balanced_over_domains_and_fixed():
    from agentworld.data.awbench import BenchRecord
    from agentworld.evaluation.run import sample_records

    def records(domain: str, episodes: int) -> list[BenchRecord]:
        return [BenchRecord.from_episode(domain, f"{domain}-{e}", "system", ["a", "b"], ["x", "y"], turn,
                                         transition_id=f"{domain}-{e}:{turn - 1}")
                for e in range(episodes) for turn in (1, 2)]

    pool = records("terminal", 200) + records("textworld", 20) + records("mcp", 50)  # 400, 40, 100 records
    sample = sample_records(pool, 120, seed=0)
    counts = {d: sum(r.domain == d for r in sample) for d in ("terminal", "textworld", "mcp")}
    assert counts == {"terminal": 40, "textworld": 40, "mcp": 40}   # not 89/9/22 as a plain random sample
    assert sample_records(list(reversed(pool)), 120, seed=0) == sample  # the same records for every caller
    small = sample_records(pool, 1000, seed=0)
    assert len(small) == len(pool)
    assert sum(r.domain == "textworld" for r in sample_records(pool, 300, seed=0)) == 40  # a small domain gives all
