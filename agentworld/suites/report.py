"""What an agent test run leaves behind: a table on the console, a JUnit XML file (one test case
per suite case; a failure names the missed thresholds and carries the failing episodes'
transcripts), a markdown report, a JSON report (a later run's `--baseline`), and an MLflow run
with the figures as metrics and the transcripts as artifacts.

Against a baseline report, each case's success is compared per environment and variant with a
one-sided Fisher exact test: a drop with p < 0.05 is a regression.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from scipy import stats

from agentworld.suites.run import CLEAN, CaseResult, RunResult

#: Failing episodes whose transcripts a JUnit failure carries, per run.
TRANSCRIPTS_IN_JUNIT = 3


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def run_figures(run: RunResult) -> dict[str, Any]:
    low, high = run.success_ci
    return {"environment": run.environment, "variant": run.variant, "episodes": len(run.episodes),
            "success_rate": run.success_rate, "success_ci95": [low, high], "mean_steps": run.mean_steps,
            "invalid_rate": run.invalid_rate, "faults": sum(e.faults for e in run.episodes),
            "wall_s": round(run.wall_s, 2),
            "verdicts": {str(e.seed): e.success for e in run.episodes}}


def report_data(suite_name: str, agent_name: str, results: list[CaseResult],
                regressions: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The JSON report (also what `--baseline` reads)."""
    cases = []
    for result in results:
        robustness: dict[str, dict[str, float | None]] = {}
        for run in result.runs:
            if run.variant != CLEAN:
                robustness.setdefault(run.environment, {})[run.variant] = result.robustness(run.environment, run.variant)
        cases.append({"name": result.case.name, "domain": result.case.domain, "passed": result.passed,
                      "failures": result.failures, "flags": result.flags, "robustness": robustness,
                      "agreement": result.agreement(), "runs": [run_figures(run) for run in result.runs],
                      "regressions": (regressions or {}).get(result.case.name, [])})
    agree = sum(result.agreement_counts()[0] for result in results)
    pairs = sum(result.agreement_counts()[1] for result in results)
    return {"suite": suite_name, "agent": agent_name, "passed": all(c["passed"] for c in cases),
            "agreement": agree / pairs if pairs else None, "agreement_seeds": pairs, "cases": cases}


def _robustness(case: dict[str, Any], run: dict[str, Any]) -> float | None:
    return case["robustness"].get(run["environment"], {}).get(run["variant"])


def compare(report: dict[str, Any], baseline: dict[str, Any], alpha: float = 0.05) -> dict[str, list[str]]:
    """Per case, the runs whose success dropped significantly against the baseline report."""
    previous = {(c["name"], r["environment"], r["variant"]): r for c in baseline.get("cases", []) for r in c["runs"]}
    regressions: dict[str, list[str]] = {}
    for case in report["cases"]:
        for run in case["runs"]:
            before = previous.get((case["name"], run["environment"], run["variant"]))
            if before is None:
                continue
            now_ok, now_n = round(run["success_rate"] * run["episodes"]), run["episodes"]
            was_ok, was_n = round(before["success_rate"] * before["episodes"]), before["episodes"]
            _, p = stats.fisher_exact([[now_ok, now_n - now_ok], [was_ok, was_n - was_ok]], alternative="less")
            if run["success_rate"] < before["success_rate"] and p < alpha:
                regressions.setdefault(case["name"], []).append(
                    f"{run['environment']}/{run['variant']}: success {before['success_rate']:.2f} -> "
                    f"{run['success_rate']:.2f} (Fisher exact, one-sided p = {p:.3f})")
    return regressions


def print_table(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:  # a CI log: wide enough for every column
        console = Console(width=180)
    table = Table(title=f"agent test {report['suite']}: {report['agent']}")
    for column in ("case", "env", "variant", "episodes", "success [95% CI]", "steps", "invalid", "robustness",
                   "sim-real agreement", "verdict"):
        table.add_column(column)
    for case in report["cases"]:
        for run in case["runs"]:
            low, high = run["success_ci95"]
            robustness = _robustness(case, run)
            table.add_row(case["name"], run["environment"], run["variant"], str(run["episodes"]),
                          f"{run['success_rate']:.2f} [{low:.2f}, {high:.2f}]", f"{run['mean_steps']:.1f}",
                          _fmt(run["invalid_rate"]), _fmt(robustness), _fmt(case["agreement"]),
                          "pass" if case["passed"] else "FAIL")
    console.print(table)
    if report["agreement"] is not None:
        console.print(f"sim-real agreement over every case run in both: {report['agreement']:.2f} "
                      f"({report['agreement_seeds']} seeds)")
    for case in report["cases"]:
        for line in case["failures"] + case["flags"] + case["regressions"]:
            console.print(f"{case['name']}: {line}", markup=False)


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Agent test `{report['suite']}`", "", f"Agent: `{report['agent']}`. "
             f"Verdict: **{'pass' if report['passed'] else 'FAIL'}**.", "",
             "| case | env | variant | episodes | success [95% CI] | steps | invalid-action rate | robustness | "
             "sim-real agreement | verdict |", "|---|---|---|---:|---|---:|---:|---:|---:|---|"]
    for case in report["cases"]:
        for run in case["runs"]:
            low, high = run["success_ci95"]
            robustness = _robustness(case, run)
            lines.append(f"| {case['name']} | {run['environment']} | {run['variant']} | {run['episodes']} | "
                         f"{run['success_rate']:.2f} [{low:.2f}, {high:.2f}] | {run['mean_steps']:.1f} | "
                         f"{_fmt(run['invalid_rate'])} | {_fmt(robustness)} | {_fmt(case['agreement'])} | "
                         f"{'pass' if case['passed'] else 'FAIL'} |")
    if report["agreement"] is not None:
        lines += ["", f"Sim-real agreement over every case run in both: {report['agreement']:.2f} "
                      f"({report['agreement_seeds']} seeds)."]
    notes = [f"- `{case['name']}`: {line}" for case in report["cases"]
             for line in case["failures"] + case["flags"] + case["regressions"]]
    if notes:
        lines += ["", "## Failures, flags and regressions", "", *notes]
    return "\n".join(lines) + "\n"


def transcript_text(run: RunResult, seed: int) -> str:
    episode = next(e for e in run.episodes if e.seed == seed)
    lines = [f"--- {run.environment}/{run.variant} seed {seed} ({episode.task_id}): "
             f"{'success' if episode.success else 'failure'} in {episode.steps} steps",
             episode.transcript[0]["observation"]]
    for step in episode.transcript[1:]:
        fault = f" [injected fault: {step['fault']}]" if "fault" in step else ""
        lines += [f"> {step['action']}{fault}", step["observation"]]
    return "\n".join(lines)


def junit_xml(report: dict[str, Any], results: list[CaseResult]) -> str:
    """One <testcase> per suite case; a failed one names its missed thresholds and regressions
    and carries transcripts of its failing episodes."""
    failed = sum(not case["passed"] or bool(case["regressions"]) for case in report["cases"])
    suite = ET.Element("testsuite", name=report["suite"], tests=str(len(results)), failures=str(failed),
                       errors="0", time=f"{sum(r.wall_s for res in results for r in res.runs):.2f}")
    for case, result in zip(report["cases"], results):
        element = ET.SubElement(suite, "testcase", classname=f"agentworld.{report['suite']}", name=case["name"],
                                time=f"{sum(r.wall_s for r in result.runs):.2f}")
        problems = case["failures"] + case["regressions"]
        if problems:
            failure = ET.SubElement(element, "failure", message=f"{case['name']}: " + "; ".join(problems),
                                    type="ThresholdMissed" if case["failures"] else "Regression")
            transcripts = []
            for run in result.runs:
                losing = [e.seed for e in run.episodes if not e.success][:TRANSCRIPTS_IN_JUNIT]
                transcripts += [transcript_text(run, seed) for seed in losing]
            failure.text = "\n".join(problems) + "\n\n" + "\n\n".join(transcripts)
        if case["flags"]:
            ET.SubElement(element, "system-out").text = "\n".join(case["flags"])
    root = ET.Element("testsuites", name="agentworld agent test", tests=str(len(results)), failures=str(failed))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_outputs(report: dict[str, Any], results: list[CaseResult], out_dir: Path, junit: Path | None) -> dict[str, Path]:
    """report.json, report.md, transcripts.jsonl under `out_dir`; the JUnit file where asked."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"report": out_dir / "report.json", "markdown": out_dir / "report.md",
             "transcripts": out_dir / "transcripts.jsonl"}
    paths["report"].write_text(json.dumps(report, indent=2))
    paths["markdown"].write_text(markdown(report))
    with paths["transcripts"].open("w") as out:
        for result in results:
            for run in result.runs:
                for episode in run.episodes:
                    out.write(json.dumps({"case": result.case.name, "environment": run.environment,
                                          "variant": run.variant, "seed": episode.seed, "task_id": episode.task_id,
                                          "success": episode.success, "steps": episode.steps,
                                          "transcript": episode.transcript}) + "\n")
    junit_path = junit or out_dir / "junit.xml"
    junit_path.parent.mkdir(parents=True, exist_ok=True)
    junit_path.write_text(junit_xml(report, results))
    paths["junit"] = junit_path
    return paths


def log_to_mlflow(report: dict[str, Any], paths: dict[str, Path], root: Path, tags: dict[str, str]) -> str:
    """One MLflow run (experiment `agentworld-agent-tests`) with every figure and the files."""
    import mlflow

    from agentworld.tracking.runs import configure

    configure("agentworld-agent-tests", root)
    with mlflow.start_run(run_name=f"agent-test:{report['suite']}",
                          tags={"agentworld.kind": "agent_test", "suite": report["suite"], "agent": report["agent"],
                                "passed": str(report["passed"]).lower(), **tags}) as run:
        metrics: dict[str, float] = {"passed": float(report["passed"])}
        for case in report["cases"]:
            for figures in case["runs"]:
                key = f"{case['name']}.{figures['environment']}.{figures['variant']}"
                metrics[f"{key}.success_rate"] = figures["success_rate"]
                metrics[f"{key}.mean_steps"] = figures["mean_steps"]
                if figures["invalid_rate"] is not None:
                    metrics[f"{key}.invalid_rate"] = figures["invalid_rate"]
            for environment, by_variant in case["robustness"].items():
                for variant, robustness in by_variant.items():
                    if robustness is not None:
                        metrics[f"{case['name']}.{environment}.{variant}.robustness"] = robustness
            if case["agreement"] is not None:
                metrics[f"{case['name']}.agreement"] = case["agreement"]
        mlflow.log_metrics(metrics)
        for path in paths.values():
            mlflow.log_artifact(str(path), artifact_path="agent_test")
        return run.info.run_id


def record_on_version(name: str, version: str, report: dict[str, Any], mlflow_run_id: str | None) -> None:
    """The run's verdict and figures as tags of the tested registry version
    (`agent_test.<suite>.passed`, `.failed_cases`, `.run_id`, `.<case>.<env>.success`)."""
    from mlflow import MlflowClient

    client, prefix = MlflowClient(), f"agent_test.{report['suite']}"
    tags = {f"{prefix}.passed": str(report["passed"]).lower(),
            f"{prefix}.failed_cases": ",".join(c["name"] for c in report["cases"] if not c["passed"])}
    if mlflow_run_id:
        tags[f"{prefix}.run_id"] = mlflow_run_id
    for case in report["cases"]:
        for run in case["runs"]:
            if run["variant"] == CLEAN:
                tags[f"{prefix}.{case['name']}.{run['environment']}.success"] = f"{run['success_rate']:.3f}"
    for key, value in tags.items():
        client.set_model_version_tag(name, version, key, value)


def registry_baseline(uri: str, suite: str, cache: Path) -> dict[str, Any]:
    """The report of the last `suite` run recorded on registry version `uri`
    (`models:/agentworld-agent@production`): its tag `agent_test.<suite>.run_id` names the MLflow
    run whose `agent_test/report.json` is read."""
    import mlflow

    from agentworld.models.backends import BackendError, registry_version

    try:
        version = registry_version(uri, "--baseline")
    except BackendError as err:
        raise ValueError(str(err)) from None
    run_id = version.tags.get(f"agent_test.{suite}.run_id")
    if not run_id:
        raise ValueError(f"--baseline {uri}: version {version.version} has no recorded run of suite {suite!r} "
                         f"(tag agent_test.{suite}.run_id); test it first with --agent {uri}")
    cache.mkdir(parents=True, exist_ok=True)
    path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="agent_test/report.json",
                                               dst_path=str(cache))
    return json.loads(Path(path).read_text())
