"""The `agentworld` command line: environments, validation, stages and the demo pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from agentworld.config import DEFAULT_PARAMS_PATH, KNOWN_DOMAINS, Params, ParamsError, load_params
from agentworld.data.recording.commands import import_app, record_app
from agentworld.envs.behaviour import POLICY_NAMES
from agentworld.evaluation.commands import eval_app
from agentworld.tracking.runs import SUMMARY_ENV
from stages import STAGE_ORDER

app = typer.Typer(
    help="AgentWorld: language world models of agent environments.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
envs_app = typer.Typer(help="Real environments.", no_args_is_help=True)
app.add_typer(envs_app, name="envs")
experiment_app = typer.Typer(help="Experiments: ablations over seeds, logged to MLflow as one group.",
                             no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")
app.add_typer(eval_app, name="eval")
agent_app = typer.Typer(help="Agents trained in the world model and evaluated on real environments.",
                        no_args_is_help=True)
app.add_typer(agent_app, name="agent")
app.add_typer(record_app, name="record")
app.add_typer(import_app, name="import")
# Choices as enums, so `--help` lists them and typer refuses anything else.
Domain = Enum("Domain", {name: name for name in KNOWN_DOMAINS}, type=str)
BehaviourPolicy = Enum("BehaviourPolicy", {name: name for name in POLICY_NAMES}, type=str)
StageName = Enum("StageName", {name: name for name in STAGE_ORDER}, type=str)
DownstreamRL = Enum("DownstreamRL", {name: name for name in ("none", "sim", "real")}, type=str)

SetOpt = typer.Option(None, "--set", help="params override KEY=VALUE (e.g. agent.rl.budget_s=60); repeatable")

ParamsOpt = typer.Option(DEFAULT_PARAMS_PATH, "--params", help="params.yaml to read")

# `serve mcp` and `serve http`: which recording, and which world model answers what it cannot.
RecordingNameOpt = typer.Option(..., "--name", help="the recording's name (data/recordings/NAME)")
RecordingDirOpt = typer.Option(None, "--recording", help="recording folder [default: data/recordings/NAME]")
SimulatorModelOpt = typer.Option("models:/agentworld-world-model@champion",
                                 help="models:/NAME@ALIAS, models:/NAME/VERSION, a checkpoint directory, or none "
                                      "(answer from the recording only)")


def _load(params_path: Path):
    try:
        return load_params(params_path)
    except ParamsError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None


def _load_with(params_path: Path, override: list[str] | None):
    """params.yaml with `--set KEY=VALUE` overrides (values parsed as YAML); exit 2 on a bad one."""
    import yaml

    overrides = {}
    for item in override or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--set")
        overrides[key] = yaml.safe_load(value)
    try:
        return load_params(params_path, overrides)
    except ParamsError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None


def _seeds(seeds: str) -> list[int]:
    try:
        out = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise typer.BadParameter(f"{seeds!r}: seeds must be integers", param_hint="--seeds") from None
    if not out:
        raise typer.BadParameter("give at least one seed", param_hint="--seeds")
    return out


@envs_app.command("list")
def envs_list() -> None:
    """Every domain, whether it runs on this machine, and why not.

    Example: agentworld envs list
    """
    from agentworld.domains import list_envs

    for env in list_envs():
        status = "available" if env.available else f"unavailable: {env.reason}"
        typer.echo(f"{env.name:14s} {status}")


@envs_app.command("play")
def envs_play(
    domain: Domain,
    seed: int = typer.Option(0, help="episode seed (task and its set-up)"),
    steps: int = typer.Option(5, help="maximum steps"),
    policy: BehaviourPolicy = typer.Option("scripted", help="behaviour policy"),
    params_path: Path = ParamsOpt,
) -> None:
    """Play one episode with a behaviour policy and print its transitions as JSON lines.

    Example: agentworld envs play terminal --seed 3 --policy exploratory
    """
    from agentworld.data.collect import play_episode
    from agentworld.domains import EnvUnavailable

    params = _load(params_path) if params_path.exists() else None
    sandbox = params.sandbox if params else None
    try:
        for row in play_episode(domain.value, seed=seed, max_steps=steps, policy_name=policy.value,
                                sandbox_params=sandbox):
            typer.echo(json.dumps(row.model_dump(mode="json"), ensure_ascii=False))
    except (KeyError, ValueError, EnvUnavailable) as err:
        typer.echo(f"envs play: {err.args[0] if err.args else err}", err=True)
        raise typer.Exit(2) from None


@app.command()
def validate(
    path: Path,
    params_path: Path = ParamsOpt,
    domains: Optional[str] = typer.Option(None, help="comma-separated allowed domains (default: params collect.domains)"),
) -> None:
    """Check a trajectory JSONL file: exit 0 when every row is valid, 1 with a report otherwise.

    Example: agentworld validate data/raw/terminal.jsonl --domains terminal
    """
    from agentworld.validation import check_file, format_report

    params = _load(params_path)
    allowed = domains.split(",") if domains else list(params.collect.domains)
    if not path.exists():
        typer.echo(f"{path}: file not found", err=True)
        raise typer.Exit(2)
    report = check_file(path, params.validate_, allowed)
    typer.echo(format_report(report))
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def stage(
    name: StageName,
    params_path: Path = ParamsOpt,
    root: Path = typer.Option(Path("."), help="workspace root the stage reads and writes under"),
    domain: list[str] = typer.Option(None, help="per-domain stages (collect, validate): only this domain "
                                                "(repeatable; default: every domain in collect.domains)"),
    summary_path: Optional[Path] = typer.Option(None, "--summary", help="also write the stage's summary (JSON) here"),
    inputs: list[Path] = typer.Option(None, "--in", help="a data input the stage reads (under --root; repeatable): "
                                                        "refused before any work if it is missing"),
    outputs: list[Path] = typer.Option(None, "--out", help="an output the stage writes (under --root; repeatable): "
                                                          "the command fails if the stage did not write it"),
) -> None:
    """Run one pipeline stage (what each dvc.yaml stage and each Airflow task calls).

    dvc.yaml's commands name every data input and output (`--in`, `--out`, the same paths as the
    stage's deps and outs; tests/test_dvc_stages.py keeps them equal), so a command read alone
    says what the stage consumes and produces, and run by hand it says what is missing.

    Example: agentworld stage collect --domain terminal --root runs/try1
    Example: agentworld stage cpt --in data/sft/train.jsonl --in models/tokenizer --out models/cpt
    """
    from stages import PER_DOMAIN_STAGES, get_stage

    name = name.value
    missing = [str(path) for path in inputs or [] if not (root / path).exists()]
    if missing:
        typer.echo(f"stage {name}: missing input(s) under {root}: {', '.join(missing)} (run the stages that "
                   "write them first: `dvc repro` runs them in order)", err=True)
        raise typer.Exit(2)
    params = _load(params_path)
    if domain and name not in PER_DOMAIN_STAGES:
        raise typer.BadParameter(f"stage {name!r} covers every domain; --domain applies to "
                                 f"{', '.join(PER_DOMAIN_STAGES)}", param_hint="--domain")
    unknown = sorted(set(domain or []) - set(params.dataset_domains))
    if unknown:
        raise typer.BadParameter(f"{', '.join(unknown)} not in collect.domains or recordings of {params_path} "
                                 f"({', '.join(params.dataset_domains)})", param_hint="--domain")
    from agentworld.data.recording.recording import RecordingError, register_recordings

    try:
        register_recordings(params, root)
    except RecordingError as err:
        typer.echo(f"recordings: {err}", err=True)
        raise typer.Exit(2) from None
    if summary_path is None and os.environ.get(SUMMARY_ENV):
        summary_path = Path(os.environ[SUMMARY_ENV])
    if _launch_on_cluster(name, params, params_path, root):
        summary = json.loads((root / "reports" / "train" / f"{name}.json").read_text())
    else:
        stage_fn = get_stage(name)
        summary = stage_fn(params, root.resolve(), None, domain) if domain else stage_fn(params, root.resolve(), None)
    text = json.dumps(summary, indent=2, default=str)
    if summary_path is not None:
        summary_path.parent.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(text)
    typer.echo(text)
    unwritten = [str(path) for path in outputs or [] if not (root / path).exists()]
    if unwritten:
        typer.echo(f"stage {name}: declared output(s) not written under {root}: {', '.join(unwritten)}", err=True)
        raise typer.Exit(1)


def _launch_on_cluster(name: str, params: Params, params_path: Path, root: Path) -> bool:
    """With `distributed.compute: cluster`, a training stage started on the head node (by `dvc
    repro`, an Airflow task or by hand) starts itself on every rank through the multi-node
    launcher (deepspeed or accelerate) and waits; the ranks (LOCAL_RANK set) train. False: train here."""
    from stages import TRAINING_STAGES

    if name not in TRAINING_STAGES or params.distributed.compute != "cluster" or "LOCAL_RANK" in os.environ:
        return False
    from agentworld.training.distributed import deepspeed_config, launch_command, write_deepspeed_config

    config = write_deepspeed_config(root / "deepspeed" / f"{name}.json",
                                    deepspeed_config(params.distributed, getattr(params, name)))
    argv = launch_command(params.distributed, ["stage", name, "--params", str(params_path), "--root", str(root)],
                          deepspeed_config_path=config)
    typer.echo("launching: " + " ".join(argv))
    subprocess.run(argv, check=True)
    return True


@app.command()
def pipeline(
    params_path: Path = ParamsOpt,
    push: bool = typer.Option(True, help="dvc push the outputs to the local remote afterwards"),
) -> None:
    """Run the DVC pipeline under one MLflow parent run, then print the demo summary.

    Example: agentworld profile research-cpu && agentworld pipeline
    """
    from agentworld.data.build import check_split
    from agentworld.summary import log_summary, render_summary
    from agentworld.tracking.runs import PARENT_RUN_ENV, start_pipeline_run

    params = _load(params_path)
    check_split(params.collect, params.build)
    parent = start_pipeline_run(params)
    env = {**os.environ, PARENT_RUN_ENV: parent}
    for command in (["dvc", "repro"], ["dvc", "push", "-q"] if push else None):
        if command and subprocess.run(command, env=env).returncode != 0:
            typer.echo(f"pipeline: `{' '.join(command)}` failed; its error is above. Stages that finished are "
                       "cached: fix the cause and run the pipeline again to go on from there.", err=True)
            raise typer.Exit(1)
    summary = log_summary(Path("."), parent, params.collect.domains)
    typer.echo(render_summary(summary))


@app.command()
def profile(
    name: str = typer.Argument(..., help="a profile in profiles/ (smoke, research-cpu, research, production) or its path"),
    out: Path = typer.Option(DEFAULT_PARAMS_PATH, "--out", help="the params file to write"),
) -> None:
    """Write params.yaml from a profile: the demo's params.yaml with the profile's keys applied
    (profiles/ hold only the keys they change; DVC reads every value from params.yaml).

    Example: agentworld profile research-cpu && agentworld pipeline
    """
    from agentworld.profiles import write_profile

    try:
        written = write_profile(name, out)
    except ParamsError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{written}: profile {load_params(written).profile}; `git checkout {written}` restores the demo")


@app.command()
def summary() -> None:
    """Print the summary of the last pipeline run from its reports.

    Example: agentworld summary
    """
    from agentworld.summary import collect_summary, render_summary

    params = _load(DEFAULT_PARAMS_PATH) if DEFAULT_PARAMS_PATH.exists() else None
    typer.echo(render_summary(collect_summary(Path("."), params.collect.domains if params else None)))


@experiment_app.command("stages")
def experiment_stages(
    params_path: Path = ParamsOpt,
    seeds: str = typer.Option("0,1,2", help="comma-separated seeds (at least 3 for a confidence interval)"),
    variants: str = typer.Option("sft_only,cpt_sft,cpt_sft_rl,cpt_sft_no_reasoning",
                                 help="comma-separated: sft_only, cpt_sft, cpt_sft_rl, cpt_sft_no_reasoning"),
    override: list[str] = typer.Option(None, "--set", help="params override KEY=VALUE (e.g. sft.max_steps=200); "
                                                            "repeatable"),
) -> None:
    """SFT-only vs CPT->SFT vs CPT->SFT->RL on the same data and step budget over seeds: held-out
    exact match and token F1 per domain, mean and 95% CI (reports/experiments/stages.md).

    Example: agentworld experiment stages --seeds 0,1,2
    """
    from stages.ablation import run_stages_experiment

    params = _load_with(params_path, override)
    result = run_stages_experiment(params, _seeds(seeds), [v.strip() for v in variants.split(",") if v.strip()],
                                   Path(".").resolve(), Path("runs/experiments/stages").resolve())
    typer.echo(result["markdown"])


@experiment_app.command("sim-rl")
def experiment_sim_rl(
    params_path: Path = ParamsOpt,
    seeds: str = typer.Option("0,1,2", help="comma-separated seeds (at least 3 for a confidence interval)"),
    override: list[str] = SetOpt,
) -> None:
    """BC vs BC + RL in the simulator vs BC + RL in the real env at the same wall-clock budget, on
    held-out real tasks; real-env interactions counted (reports/experiments/sim_rl_<domain>.md).

    Example: agentworld experiment sim-rl --seeds 0,1,2 --set agent.domain=textworld
    """
    from agentworld.experiments.agents import run_sim_rl

    result = _run_agents(lambda: run_sim_rl(_load_with(params_path, override), _seeds(seeds), Path(".").resolve()))
    typer.echo(result["markdown"])


@experiment_app.command("warmup")
def experiment_warmup(
    params_path: Path = ParamsOpt,
    seeds: str = typer.Option("0,1,2", help="comma-separated seeds (at least 3 for a confidence interval)"),
    rl: DownstreamRL = typer.Option("none", help="downstream RL after BC for both arms"),
    override: list[str] = SetOpt,
) -> None:
    """An agent initialised from the world model vs from scratch, same downstream training, on
    held-out real tasks (reports/experiments/warmup_<domain>.md).

    Example: agentworld experiment warmup --seeds 0,1,2 --set agent.rl.budget_s=60
    """
    from agentworld.experiments.agents import run_warmup

    result = _run_agents(lambda: run_warmup(_load_with(params_path, override), _seeds(seeds), Path(".").resolve(),
                                            rl.value))
    typer.echo(result["markdown"])


class AgentPhase(str, Enum):
    all = "all"
    start = "start"
    train = "train"
    evaluate = "evaluate"


@agent_app.command("train")
def agent_train(
    params_path: Path = ParamsOpt,
    override: list[str] = SetOpt,
    out: Path = typer.Option(Path("runs/agents/latest"), help="folder for the agent's checkpoints and episodes"),
    phase: AgentPhase = typer.Option(AgentPhase.all, help="all, or one phase: start (open the MLflow run), "
                                                          "train (BC then RL), evaluate (real tasks, register)"),
    run_id: Optional[str] = typer.Option(None, help="the agent's MLflow run (from --phase start) for train/evaluate"),
    tag: list[str] = typer.Option(None, help="extra MLflow tag KEY=VALUE on the agent's run (repeatable)"),
    summary_path: Optional[Path] = typer.Option(None, "--summary", help="also write the result (JSON) here"),
) -> None:
    """Train one agent (BC on real demonstrations, then agent.rl.env RL), evaluate it on held-out
    real tasks, log it to MLflow and register it as a version of agent.registered_model.

    Example: agentworld agent train --set agent.rl.env=sim --set agent.rl.budget_s=60
    """
    from agentworld.agents.train import evaluate_and_register, start_agent_run, train_agent, train_in_environment

    params = _load_with(params_path, override)
    root, out = Path(".").resolve(), out.resolve()
    tags = dict(item.split("=", 1) for item in tag or [] if "=" in item)
    if phase in (AgentPhase.train, AgentPhase.evaluate) and not run_id:
        raise typer.BadParameter(f"--phase {phase.value} needs --run-id (the id --phase start printed)",
                                 param_hint="--run-id")
    steps = {
        AgentPhase.all: lambda: train_agent(params, root, out, tags=tags),
        AgentPhase.start: lambda: {"run_id": start_agent_run(params, root, tags=tags)},
        AgentPhase.train: lambda: train_in_environment(params, root, out, run_id),
        AgentPhase.evaluate: lambda: evaluate_and_register(params, root, out, run_id),
    }
    out.mkdir(parents=True, exist_ok=True)
    result = _run_agents(steps[phase])
    text = json.dumps(result, indent=2, default=str)
    if summary_path is not None:
        summary_path.parent.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(text)
    typer.echo(text)


@agent_app.command("test")
def agent_test(
    suite_path: Path = typer.Argument(..., metavar="SUITE", help="the suite file (YAML; see agentworld/suites/suite.py)"),
    agent: Optional[str] = typer.Option(None, help="the agent under test: module:function (observations, actions "
                                                   "-> action), models:/agentworld-agent/N|@alias, or a checkpoint folder"),
    agent_base_url: Optional[str] = typer.Option(None, help="an OpenAI-compatible chat endpoint of the agent "
                                                            "(e.g. http://127.0.0.1:8001/v1)"),
    agent_model: Optional[str] = typer.Option(None, help="the model name the endpoint serves"),
    agent_api_key_env: str = typer.Option("AGENT_API_KEY", help="environment variable holding the endpoint's key"),
    agent_tools: bool = typer.Option(True, help="offer each domain's actions as function tools (--no-agent-tools: "
                                                "plain chat, the reply is the action)"),
    agent_max_tokens: int = typer.Option(256, min=1, help="the most tokens the agent may generate per action"),
    simulator_url: Optional[str] = typer.Option(None, help="answer `sim` cases with this OpenAI-compatible world "
                                                          "model server (e.g. `agentworld serve`'s), not the suite's"),
    simulator_model: str = typer.Option("agentworld-world-model", help="the model name --simulator-url serves"),
    out: Path = typer.Option(Path("reports/agent_test"), help="folder for report.json, report.md, transcripts"),
    junit: Optional[Path] = typer.Option(None, help="the JUnit XML file (default: OUT/junit.xml)"),
    baseline: Optional[str] = typer.Option(None, help="a previous run's report.json, or a registered agent "
                                                      "version (models:/agentworld-agent@production) whose last "
                                                      "run of this suite is compared: significant drops in "
                                                      "success are regressions (and fail the run)"),
    mlflow_run: bool = typer.Option(True, "--mlflow/--no-mlflow", help="log the run to MLflow"),
    tag: list[str] = typer.Option(None, help="extra MLflow tag KEY=VALUE (repeatable)"),
) -> None:
    """Test an agent against a suite of tasks in the simulator and/or the real environments,
    with injected faults; exit 1 when a threshold is missed or success regressed.

    Example: agentworld agent test examples/agent-tests/terminal.yaml --agent examples.agent_tests.scripted:act
    Example: agentworld agent test suite.yaml --agent-base-url http://127.0.0.1:8001/v1 --agent-model my-agent
    """
    from agentworld.suites.agents import AgentError, agent_factory
    from agentworld.suites.report import (
        compare,
        log_to_mlflow,
        print_table,
        record_on_version,
        registry_baseline,
        report_data,
        write_outputs,
    )
    from agentworld.suites.run import run_suite
    from agentworld.suites.suite import SimulatorSpec, SuiteError, load_suite

    try:
        suite = load_suite(suite_path)
        if simulator_url:
            verifier = suite.simulator.verifier if suite.simulator else "reference"
            suite = suite.model_copy(update={"simulator": SimulatorSpec(base_url=simulator_url, model_name=simulator_model,
                                                                        verifier=verifier)})
        simulator = suite.simulator.model if suite.simulator else None
        if any((spec or "").startswith("models:/") for spec in (agent, simulator, baseline)):
            from agentworld.tracking.runs import configure

            configure("agentworld-agent-tests")  # the registry the models are read from
        factory, registered = agent_factory(agent, agent_base_url, agent_model, concurrency=8,
                                            api_key=os.environ.get(agent_api_key_env, "none"),
                                            tools=agent_tools, max_new_tokens=agent_max_tokens)
        if baseline and baseline.startswith("models:/"):
            previous = registry_baseline(baseline, suite.name, out / "baseline")
        else:
            previous = json.loads(Path(baseline).read_text()) if baseline else None
    except (OSError, json.JSONDecodeError) as err:
        typer.echo(f"agent test: --baseline {baseline}: {err}", err=True)
        raise typer.Exit(2) from None
    except (SuiteError, AgentError, ValueError) as err:
        typer.echo(f"agent test: {err}", err=True)
        raise typer.Exit(2) from None
    name = agent or f"{agent_model}@{agent_base_url}"
    from agentworld.domains import EnvUnavailable

    try:
        results = _run_agents(lambda: run_suite(suite, factory))
    except (AgentError, EnvUnavailable) as err:
        typer.echo(f"agent test: {err}", err=True)
        raise typer.Exit(2) from None
    report = report_data(suite.name, name, results)
    if previous is not None:
        report = report_data(suite.name, name, results, compare(report, previous))
        report["baseline"] = {"agent": previous.get("agent"), "source": baseline}
    paths = write_outputs(report, results, out, junit)
    print_table(report)
    run_id = None
    if mlflow_run:
        tags = dict(item.split("=", 1) for item in tag or [] if "=" in item)
        if registered is not None:
            tags.update({"agent_model": registered.name, "agent_version": registered.version})
        run_id = log_to_mlflow(report, paths, Path(".").resolve(), tags)
        typer.echo(f"MLflow run {run_id}")
    if registered is not None:
        record_on_version(registered.name, registered.version, report, run_id)
        typer.echo(f"recorded on models:/{registered.name}/{registered.version} (tags agent_test.{suite.name}.*)")
    typer.echo(f"report: {paths['markdown']}  JUnit: {paths['junit']}")
    regressed = any(case["regressions"] for case in report["cases"])
    raise typer.Exit(0 if report["passed"] and not regressed else 1)


def _run_agents(work):
    """Run agent work; a missing world model or data is one line naming the setting, exit 2."""
    from agentworld.models.backends import BackendError
    from agentworld.models.factory import ModelLoadError

    try:
        return work()
    except (BackendError, ModelLoadError, FileNotFoundError, ValueError) as err:
        typer.echo(f"agent: {err}", err=True)
        raise typer.Exit(2) from None


serve_app = typer.Typer(help="Serve a world model: an OpenAI-compatible endpoint (no subcommand), or a recorded "
                             "system simulated in its own protocol (`serve mcp`).", invoke_without_command=True)
app.add_typer(serve_app, name="serve")


@serve_app.callback()
def serve(
    ctx: typer.Context,
    model: str = typer.Option("models:/agentworld-world-model@champion",
                              help="models:/NAME@ALIAS, models:/NAME/VERSION or a checkpoint directory"),
    name: str = typer.Option("agentworld-world-model", help="the model id clients ask for"),
    host: str = typer.Option("127.0.0.1", help="address to bind (loopback by default)"),
    port: int = typer.Option(8000, help="port of the OpenAI-compatible API"),
    max_model_len: Optional[int] = typer.Option(None, help="context length (default: the model's)"),
) -> None:
    """Serve a world model as an OpenAI-compatible endpoint (vLLM's server) until interrupted.

    Example: agentworld serve --model models:/agentworld-world-model@champion --port 8000
    """
    if ctx.invoked_subcommand is not None:
        return
    import torch

    from agentworld.models.backends import BackendError, local_model_dir
    from agentworld.models.factory import ModelLoadError
    from agentworld.simulation.serve import server_env, vllm_server_command
    from agentworld.tracking.runs import configure, project_root

    params = load_params(DEFAULT_PARAMS_PATH) if DEFAULT_PARAMS_PATH.exists() else None
    configure(params.tracking.experiment if params else "agentworld")
    try:
        path, registered = local_model_dir(model, project_root() / ".cache" / "models")
    except (BackendError, ModelLoadError) as err:
        typer.echo(f"serve: {err}", err=True)
        raise typer.Exit(2) from None
    gpu = torch.cuda.is_available()
    cmd = vllm_server_command(path, name, host, port, max_model_len, gpu)
    label = f"models:/{registered.name}/{registered.version}" if registered else str(path)
    typer.echo(f"serving {label} as {name!r} on http://{host}:{port}/v1 (vLLM, {'GPU' if gpu else 'CPU'})", err=True)
    os.execve(sys.executable, cmd, server_env(gpu))


@serve_app.command("mcp")
def serve_mcp(
    name: str = RecordingNameOpt,
    recording: Optional[Path] = RecordingDirOpt,
    model: str = SimulatorModelOpt,
    http: Optional[int] = typer.Option(None, "--http", help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead "
                                                             "of stdio"),
    cache: bool = typer.Option(True, help="answer calls that replay a recorded session from the recording"),
    faults: Optional[list[str]] = typer.Option(None, "--faults", help="fault kinds to inject, e.g. 'rate limits'; "
                                                                      "repeatable"),
    fault_rate: float = typer.Option(0.0, "--fault-rate", min=0.0, max=1.0, help="share of calls with a fault"),
    perturbation: Optional[str] = typer.Option(None, help="how the initial state differs from the recorded one"),
    fiction: Optional[str] = typer.Option(None, help="an invented world to simulate consistently"),
    max_new_tokens: int = typer.Option(256, min=1, help="longest generated result, in tokens"),
    report: Optional[Path] = typer.Option(None, help="write which path answered how many calls here on exit"),
) -> None:
    """Be the recorded MCP server: the same name and tool list, results from the recording's cache
    and the world model, arguments checked against each tool's schema first.

    Example: agentworld serve mcp --name git --model models:/agentworld-world-model@champion
    """
    from agentworld.data.recording.mcp_proxy import serve
    from agentworld.data.recording.recording import Recording, RecordingError
    from agentworld.data.recording.store import recording_dir
    from agentworld.simulation.env import Control
    from agentworld.simulation.mcp_server import SimulatedServer

    try:
        loaded = Recording.load(recording or recording_dir(name))
    except (RecordingError, ValueError) as err:
        typer.echo(f"serve mcp: {err}", err=True)
        raise typer.Exit(2) from None
    backend = None if model == "none" else _world_model_backend(model, max_new_tokens)
    control = Control(faults=tuple(faults or ()), fault_rate=fault_rate, perturbation=perturbation, fiction=fiction)
    simulated = SimulatedServer(loaded, backend, control=control, cache=cache)
    server = simulated.server()

    import anyio

    _interrupt_on_sigterm()
    try:
        anyio.run(serve, server, http)
    except KeyboardInterrupt:
        pass
    finally:
        _served(f"serve mcp {name}", simulated.report(), report)


@serve_app.command("http")
def serve_http_api(
    name: str = RecordingNameOpt,
    recording: Optional[Path] = RecordingDirOpt,
    model: str = SimulatorModelOpt,
    port: int = typer.Option(8791, "--port", help="serve on 127.0.0.1:PORT"),
    cache: bool = typer.Option(True, help="answer requests that replay a recorded session from the recording"),
    max_new_tokens: int = typer.Option(256, min=1, help="longest generated response, in tokens"),
    report: Optional[Path] = typer.Option(None, help="write which path answered how many requests here on exit"),
) -> None:
    """Be the recorded HTTP API on 127.0.0.1: recorded routes answered from the recording's cache
    and the world model, unknown routes as the real API answers them.

    Example: agentworld serve http --name crm --port 8791
    """
    import uvicorn

    from agentworld.data.recording.recording import Recording, RecordingError
    from agentworld.data.recording.store import recording_dir
    from agentworld.simulation.http_server import SimulatedHttpApi

    try:
        loaded = Recording.load(recording or recording_dir(name))
        backend = None if model == "none" else _world_model_backend(model, max_new_tokens)
        simulated = SimulatedHttpApi(loaded, backend, cache=cache)
    except (RecordingError, ValueError) as err:
        typer.echo(f"serve http: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"serving the recorded API {name!r} on http://127.0.0.1:{port}", err=True)
    _interrupt_on_sigterm()
    try:
        uvicorn.run(simulated.app(), host="127.0.0.1", port=port, log_level="warning")
    except KeyboardInterrupt:
        pass
    finally:
        _served(f"serve http {name}", simulated.report(), report)


def _served(label: str, summary: dict, report: Optional[Path]) -> None:
    """Which path answered how many calls: printed, and written to `report` when given."""
    typer.echo(f"{label}: {json.dumps(summary)}", err=True)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(summary, indent=2) + "\n")


def _interrupt_on_sigterm() -> None:
    """SIGTERM stops a simulated server as Ctrl-C does, so its report is still written (uvicorn
    re-raises the signal it caught once it has shut down)."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _world_model_backend(model: str, max_new_tokens: int):
    """A transformers backend on a registered version or a checkpoint directory; exit 2 naming
    `--model` when it cannot be loaded."""
    from agentworld.models.backends import BackendError, TransformersBackend, local_model_dir
    from agentworld.models.factory import ModelLoadError
    from agentworld.tracking.runs import configure, project_root

    params = load_params(DEFAULT_PARAMS_PATH) if DEFAULT_PARAMS_PATH.exists() else None
    configure(params.tracking.experiment if params else "agentworld")
    try:
        path, _ = local_model_dir(model, project_root() / ".cache" / "models")
        return TransformersBackend(path, max_new_tokens=max_new_tokens, batch_size=1)
    except (BackendError, ModelLoadError, OSError) as err:
        typer.echo(f"serve mcp: --model {model}: {err}", err=True)
        raise typer.Exit(2) from None


def main() -> None:  # pragma: no cover - console entry
    """The console script: setting errors and failed tools are one clear message, not a traceback."""
    try:
        app()
    except ParamsError as err:
        typer.echo(str(err), err=True)
        sys.exit(2)
    except subprocess.CalledProcessError as err:
        command = " ".join(map(str, err.cmd)) if isinstance(err.cmd, (list, tuple)) else str(err.cmd)
        typer.echo(f"agentworld: `{command}` failed with exit code {err.returncode}; its error is above", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
