"""`agentworld eval ...`: infer, judge, score (or all three with `run`) on any AgentWorldBench
directory, against a registered model, a local checkpoint or an OpenAI-compatible server; and
`compare` for two registered versions side by side."""

from __future__ import annotations

import json
import re
from enum import Enum
from pathlib import Path
from typing import Any, Optional, get_args

import typer

from agentworld.config import DEFAULT_PARAMS_PATH, EvaluateParams, Params, ParamsError, load_params

eval_app = typer.Typer(help="Evaluation: infer -> judge -> score on AgentWorldBench files, compare versions.",
                       no_args_is_help=True)

DataOpt = typer.Option(..., "--data", help="directory of AgentWorldBench `<domain>_test.jsonl` files (or one file)")
OutOpt = typer.Option(None, "--out", help="output directory (default: reports/eval-runs/<model>)")
ModelOpt = typer.Option(None, "--model", help="models:/NAME@ALIAS, models:/NAME/VERSION or a checkpoint directory")
BaseUrlOpt = typer.Option(None, "--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
ModelNameOpt = typer.Option(None, "--model-name", help="the model id the server at --base-url serves")
ParamsOpt = typer.Option(DEFAULT_PARAMS_PATH, "--params", help="params.yaml whose `evaluate` section sets the defaults")
# The choices of params.yaml's `evaluate` section, as enums so `--help` lists them.
Judge = Enum("Judge", {v: v for v in get_args(EvaluateParams.model_fields["judge"].annotation)}, type=str)
Engine = Enum("Engine", {v: v for v in get_args(EvaluateParams.model_fields["engine"].annotation)}, type=str)
JudgeOpt = typer.Option(None, "--judge", help="the judge (default: evaluate.judge)")
JudgeUrlOpt = typer.Option(None, "--judge-base-url", help="OpenAI-compatible endpoint of the LLM judge")
JudgeModelOpt = typer.Option(None, "--judge-model", help="model id of the LLM judge")
BaselinesOpt = typer.Option(None, "--baselines", help="comma-separated: retrieval,episode_retrieval,ranked_memory,copy_previous,untrained ('none': no baselines)")
EngineOpt = typer.Option(None, "--engine", help="generation engine for a local or registered model (default: evaluate.engine)")
MaxOpt = typer.Option(None, "--max-examples", help="score a fixed seeded sample of this many records (default: all)")
TrainOpt = typer.Option(None, "--train", help="training examples (data/sft/train.jsonl) the retrieval baseline "
                        "searches; without it, retrieval searches the other episodes of --data")


def fail(message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(2)


def settings_from(params: Params, judge: str | None, judge_base_url: str | None, judge_model: str | None,
                  baselines: str | None, engine: str | None) -> Any:
    update: dict[str, Any] = {}
    if judge:
        update["judge"] = getattr(judge, "value", judge)
    if judge_base_url:
        update["judge_base_url"] = judge_base_url
    if judge_model:
        update["judge_model"] = judge_model
    if baselines is not None:
        update["baselines"] = [] if baselines == "none" else [b.strip() for b in baselines.split(",") if b.strip()]
    if engine:
        update["engine"] = getattr(engine, "value", engine)
    return EvaluateParams.model_validate({**params.evaluate.model_dump(), **update})


def default_out(model: str | None, model_name: str | None) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", (model or model_name or "model").removeprefix("models:/")).strip("_")
    return Path("reports") / "eval-runs" / slug


def load_records(data: Path, max_examples: int | None, seed: int) -> tuple[list, list]:
    """The scored sample and every record of the directory (retrieval and rollouts draw on all)."""
    from agentworld.data.awbench import read_bench
    from agentworld.evaluation.run import sample_records

    everything = read_bench(data)
    return sample_records(everything, max_examples, seed), everything


def _open(settings: Any, params: Params, model: str | None, base_url: str | None, model_name: str | None):
    from agentworld.evaluation.run import open_world_model
    from agentworld.tracking.runs import configure, project_root

    configure(params.tracking.experiment)
    return open_world_model(settings, model=model, base_url=base_url, model_name=model_name,
                            cache_root=project_root() / ".cache" / "models", max_seq_len=params.model.max_seq_len)


def _guard(fn):
    """Bad input -> one clear line on stderr and exit code 2, not a traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from agentworld.data.awbench import BenchFormatError
        from agentworld.models.backends import BackendError
        from agentworld.models.factory import ModelLoadError

        try:
            return fn(*args, **kwargs)
        except (ParamsError, BenchFormatError, BackendError, ModelLoadError, FileNotFoundError, ValueError) as err:
            raise fail(f"eval {fn.__name__.removeprefix('eval_')}: {err}") from None
    return wrapper


def log_evaluation(summary: dict[str, Any], out: Path, params: Params) -> str:
    """One MLflow run per evaluation: metrics, the report files, and the model it scored."""
    import mlflow

    from agentworld.evaluation.run import flat_metrics
    from agentworld.tracking.runs import configure, lineage_tags

    configure(params.tracking.experiment)
    model = summary["model"]
    with mlflow.start_run(run_name=f"eval:{model['label']}") as run:
        mlflow.set_tags({"agentworld.kind": "evaluation", "model": model["label"], "data": summary["data"]["path"],
                         "data_md5": summary["data"]["md5"], "judge": summary["primary_judge"], **lineage_tags()})
        if model.get("registered_version"):
            mlflow.set_tags({"registered_model": model["registered_model"],
                             "registered_version": str(model["registered_version"])})
        mlflow.log_metrics(flat_metrics(summary))
        for name in ("summary.json", "summary.md", "worst_examples.md"):
            mlflow.log_artifact(str(out / name), artifact_path="eval")
        for sub in ("predictions", "judged", "rollout", "plots"):
            if (out / sub).exists():
                mlflow.log_artifacts(str(out / sub), artifact_path=f"eval/{sub}")
        return run.info.run_id


@eval_app.command("run")
@_guard
def eval_run(data: Path = DataOpt, model: Optional[str] = ModelOpt, base_url: Optional[str] = BaseUrlOpt,
             model_name: Optional[str] = ModelNameOpt, out: Optional[Path] = OutOpt, params_path: Path = ParamsOpt,
             judge: Optional[Judge] = JudgeOpt, judge_base_url: Optional[str] = JudgeUrlOpt,
             judge_model: Optional[str] = JudgeModelOpt, baselines: Optional[str] = BaselinesOpt,
             engine: Optional[Engine] = EngineOpt, max_examples: Optional[int] = MaxOpt, train: Optional[Path] = TrainOpt,
             track: bool = typer.Option(True, help="log the evaluation as an MLflow run")) -> None:
    """Infer, judge and score: predictions, judged scores and the summary table with baselines.

    Example: agentworld eval run --data data/agentworldbench --model models:/agentworld-world-model@champion
    """
    from agentworld.data.build import load_examples
    from agentworld.evaluation.run import evaluate

    params = load_params(params_path)
    settings = settings_from(params, judge, judge_base_url, judge_model, baselines, engine)
    records, pool = load_records(data, max_examples, params.build.seed)
    out = out or default_out(model, model_name)
    world_model = _open(settings, params, model, base_url, model_name)
    summary = evaluate(records, world_model, settings, out, data_path=str(data), model_params=params.model,
                       train=load_examples(train) if train else None, pool=pool, seed=params.build.seed)
    typer.echo((out / "summary.md").read_text())
    if track:
        typer.echo(f"MLflow run {log_evaluation(summary, out, params)}; files under {out}")


@eval_app.command("infer")
@_guard
def eval_infer(data: Path = DataOpt, out: Path = typer.Option(..., "--out", help="output directory"),
               model: Optional[str] = ModelOpt, base_url: Optional[str] = BaseUrlOpt,
               model_name: Optional[str] = ModelNameOpt, params_path: Path = ParamsOpt,
               baselines: Optional[str] = BaselinesOpt, engine: Optional[Engine] = EngineOpt,
               max_examples: Optional[int] = MaxOpt, train: Optional[Path] = TrainOpt) -> None:
    """Step 1: predictions of the model and the baselines (resumable: rerun after a crash).

    Example: agentworld eval infer --data data/agentworldbench --model models:/agentworld-world-model/3 --out runs/e3
    """
    from agentworld.data.build import load_examples
    from agentworld.evaluation.run import infer_step

    params = load_params(params_path)
    settings = settings_from(params, None, None, None, baselines, engine)
    records, pool = load_records(data, max_examples, params.build.seed)
    world_model = _open(settings, params, model, base_url, model_name)
    systems = infer_step(records, world_model, settings, out, data_path=str(data), model_params=params.model,
                         train=load_examples(train) if train else None, pool=pool, seed=params.build.seed)
    typer.echo(f"predictions of {', '.join(systems)} for {len(records)} records under {out / 'predictions'}")


@eval_app.command("judge")
@_guard
def eval_judge(out: Path = typer.Option(..., "--out", help="directory `eval infer` wrote"), params_path: Path = ParamsOpt,
               judge: Optional[Judge] = JudgeOpt, judge_base_url: Optional[str] = JudgeUrlOpt,
               judge_model: Optional[str] = JudgeModelOpt) -> None:
    """Step 2: five-dimension scores of every prediction (resumable).

    Example: agentworld eval judge --out runs/e3 --judge local
    """
    from agentworld.data.awbench import read_bench
    from agentworld.evaluation.run import judge_step

    params = load_params(params_path)
    settings = settings_from(params, judge, judge_base_url, judge_model, None, None)
    judged = judge_step(read_bench(out / "data"), settings, out)
    typer.echo(f"judged by {', '.join(judged)} under {out / 'judged'}")


@eval_app.command("score")
@_guard
def eval_score(out: Path = typer.Option(..., "--out", help="directory `eval infer` and `eval judge` wrote"),
               params_path: Path = ParamsOpt,
               track: bool = typer.Option(False, help="log the evaluation as an MLflow run")) -> None:
    """Step 3: the summary table, worst examples and plots.

    Example: agentworld eval score --out runs/e3
    """
    from agentworld.data.awbench import read_bench
    from agentworld.evaluation.run import score_step

    params = load_params(params_path)
    summary = score_step(read_bench(out / "data"), params.evaluate, out)
    typer.echo((out / "summary.md").read_text())
    if track:
        typer.echo(f"MLflow run {log_evaluation(summary, out, params)}")


def resolve_version(spec: str, name: str) -> tuple[str, str]:
    """`7`, `@champion`, `models:/NAME/7` or `models:/NAME@champion` -> (NAME, version)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from agentworld.models.backends import BackendError, parse_registry_uri

    if spec.isdigit():
        return name, spec
    if spec.startswith("@"):
        spec = f"models:/{name}{spec}"
    name, ref = parse_registry_uri(spec)
    if not ref.startswith("@"):
        return name, ref
    try:
        return name, str(MlflowClient().get_model_version_by_alias(name, ref[1:]).version)
    except MlflowException:
        raise BackendError(f"{spec}: no version of {name} has the alias {ref[1:]!r}") from None


def latest_summary(name: str, version: str) -> dict[str, Any]:
    """The summary of the latest evaluation MLflow logged for a version (stage or `eval run`)."""
    import mlflow

    runs = mlflow.search_runs(search_all_experiments=True, output_format="list", max_results=1,
                              filter_string=f"tags.registered_model = '{name}' and tags.registered_version = '{version}' "
                                            "and attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    for run in runs:
        try:
            path = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="eval/summary.json")
        except Exception:  # noqa: BLE001 - a training run with the same tags has no summary
            continue
        return json.loads(Path(path).read_text())
    raise FileNotFoundError(f"models:/{name}/{version} has no logged evaluation; pass --data to score it now")


@eval_app.command("compare")
@_guard
def eval_compare(a: str = typer.Argument(..., help="version A: 7, @champion, models:/NAME/7 ..."),
                 b: str = typer.Argument(..., help="version B"),
                 data: Optional[Path] = typer.Option(None, "--data", help="score both now on these AgentWorldBench files "
                                                     "(default: each version's latest logged evaluation)"),
                 params_path: Path = ParamsOpt, max_examples: Optional[int] = MaxOpt) -> None:
    """Two model versions side by side per domain, with B - A deltas.

    Example: agentworld eval compare 2 @champion
    """
    from agentworld.evaluation.report import compare_markdown
    from agentworld.evaluation.run import evaluate
    from agentworld.tracking.runs import configure

    params = load_params(params_path)
    configure(params.tracking.experiment)
    summaries = []
    for spec in (a, b):
        name, version = resolve_version(spec, params.tracking.registered_model)
        if data is None:
            summaries.append(latest_summary(name, version))
            continue
        settings = params.evaluate.model_copy(update={"baselines": [], "rollout_episodes": 0})
        records, _ = load_records(data, max_examples, params.build.seed)
        world_model = _open(settings, params, f"models:/{name}/{version}", None, None)
        summaries.append(evaluate(records, world_model, settings, default_out(f"{name}-v{version}", None),
                                  data_path=str(data), model_params=params.model, seed=params.build.seed))
    typer.echo(compare_markdown(summaries[0], summaries[1]))
