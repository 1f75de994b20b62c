"""Validate trajectory files fail-closed: every line ends up in the clean file or in quarantine.

Flow: `rows.parse_file` (bytes -> typed rows, step-1 rejections) -> `suite.run_suite` (Great
Expectations over all parsed rows) -> write clean JSONL + quarantine JSONL -> only then
compare the rejected share with `validate.max_rejected_share` and raise if it is exceeded.
So a failed run still leaves both files behind for inspection and nothing is ever lost.

Several input files are validated as one dataset (`validate_files`): one clean file, one
quarantine file (each record names its input file), and `id` uniqueness is checked across
all of them, because they end up in the same training set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworld.config import KNOWN_DOMAINS, ValidateParams
from agentworld.data.io import write_jsonl
from agentworld.data.schema import Transition
from agentworld.validation.rows import (
    ParsedRow,
    ParseResult,
    Problem,
    Rejection,
    parse_file,
    sort_problems,
)
from agentworld.validation.suite import REWARD_RANGE, build_suite, run_suite, to_frame

#: How many rejected lines `format_report` and the report keep as examples.
EXAMPLES = 10


class RejectedShareExceeded(ValueError):
    """More rows were rejected than validate.max_rejected_share allows (files are written)."""

    def __init__(self, report: ValidationReport) -> None:
        self.report = report
        top = ", ".join(f"{key} ({n})" for key, n in report.top_reasons(3))
        super().__init__(
            f"{report.rejected_share:.2%} of rows rejected ({report.rejected}/{report.total_rows})"
            f" exceeds validate.max_rejected_share={report.max_rejected_share:.2%}; "
            f"quarantine: {report.quarantine_path}; top reasons: {top}")


@dataclass
class ValidationReport:
    """What one validation run found; `reasons` counts failures by 'check:field'."""

    inputs: list[str]
    total_rows: int
    clean: int
    rejected: int
    max_rejected_share: float
    reasons: dict[str, int] = field(default_factory=dict)
    blank_lines: int = 0
    examples: list[str] = field(default_factory=list)
    clean_path: Path | None = None
    quarantine_path: Path | None = None
    docs_index: Path | None = None
    suite_statistics: dict[str, Any] = field(default_factory=dict)

    @property
    def rejected_share(self) -> float:
        return self.rejected / self.total_rows if self.total_rows else 0.0

    @property
    def ok(self) -> bool:
        """True only when nothing was rejected (the CLI's exit-0 condition)."""
        return self.rejected == 0

    @property
    def within_threshold(self) -> bool:
        return self.rejected_share <= self.max_rejected_share

    def top_reasons(self, n: int = 5) -> list[tuple[str, int]]:
        return Counter(self.reasons).most_common(n)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able view (for an MLflow artifact or a DVC metrics file)."""
        return {
            "inputs": self.inputs, "total_rows": self.total_rows, "clean": self.clean,
            "rejected": self.rejected, "rejected_share": self.rejected_share,
            "max_rejected_share": self.max_rejected_share, "blank_lines": self.blank_lines,
            "reasons": dict(self.top_reasons(len(self.reasons))), "examples": self.examples,
            "clean_path": _str(self.clean_path), "quarantine_path": _str(self.quarantine_path),
            "docs_index": _str(self.docs_index),
        }


@dataclass
class _Outcome:
    clean: list[Transition]
    rejections: list[Rejection]
    report: ValidationReport


def validate_file(path: str | Path, clean_path: str | Path, quarantine_path: str | Path,
                  params: ValidateParams, allowed_domains: Sequence[str] = KNOWN_DOMAINS,
                  docs_dir: str | Path | None = None, *,
                  reward_range: tuple[float, float] = REWARD_RANGE) -> ValidationReport:
    """Validate one file; write clean + quarantine; raise RejectedShareExceeded after writing."""
    return validate_files([path], clean_path, quarantine_path, params, allowed_domains,
                          docs_dir, reward_range=reward_range)


def validate_files(paths: Iterable[str | Path], clean_path: str | Path,
                   quarantine_path: str | Path, params: ValidateParams,
                   allowed_domains: Sequence[str] = KNOWN_DOMAINS,
                   docs_dir: str | Path | None = None, *,
                   reward_range: tuple[float, float] = REWARD_RANGE) -> ValidationReport:
    """Validate several files as one dataset into one clean and one quarantine file."""
    outcome = _evaluate(paths, params, allowed_domains, docs_dir, reward_range)
    report = outcome.report
    report.clean_path, report.quarantine_path = Path(clean_path), Path(quarantine_path)
    write_jsonl(clean_path, outcome.clean)
    write_jsonl(quarantine_path, (rej.to_record() for rej in outcome.rejections))
    if not report.within_threshold:
        raise RejectedShareExceeded(report)
    return report


def check_file(path: str | Path, params: ValidateParams,
               allowed_domains: Sequence[str] = KNOWN_DOMAINS,
               docs_dir: str | Path | None = None, *,
               reward_range: tuple[float, float] = REWARD_RANGE) -> ValidationReport:
    """Validate without writing clean/quarantine files and without raising on the share.

    For `agentworld validate PATH`: print `format_report(report)`, exit 0 iff `report.ok`.
    Still raises FileNotFoundError / EmptyInputError for an input that can't be read.
    """
    return _evaluate([path], params, allowed_domains, docs_dir, reward_range).report


def format_report(report: ValidationReport) -> str:
    """Human summary: verdict, counts, where the files are, top reasons, first bad lines."""
    if report.ok:
        verdict = "PASSED (no rejected rows)"
    elif report.within_threshold:
        verdict = "PASSED WITH REJECTIONS (within validate.max_rejected_share)"
    else:
        verdict = "FAILED (rejected share above validate.max_rejected_share)"
    lines = [
        f"validate: {verdict}",
        f"  inputs:     {', '.join(report.inputs)}",
        f"  rows:       {report.total_rows} ({report.clean} clean, {report.rejected} rejected, "
        f"{report.rejected_share:.2%} rejected; threshold {report.max_rejected_share:.2%})",
    ]
    if report.blank_lines:
        lines.append(f"  blank lines skipped: {report.blank_lines}")
    for label, path in (("clean", report.clean_path), ("quarantine", report.quarantine_path),
                        ("data docs", report.docs_index)):
        if path is not None:
            lines.append(f"  {label + ':':<12}{path}")
    if report.reasons:
        lines.append("top reasons (check:field  count):")
        lines += [f"  {key}  {n}" for key, n in report.top_reasons(10)]
    if report.examples:
        lines.append(f"first rejected lines (up to {EXAMPLES}):")
        lines += [f"  {example}" for example in report.examples]
    return "\n".join(lines)


def _evaluate(paths: Iterable[str | Path], params: ValidateParams,
              allowed_domains: Sequence[str], docs_dir: str | Path | None,
              reward_range: tuple[float, float]) -> _Outcome:
    """Parse all inputs, run the suite once over all parsed rows, split clean from rejected."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("validate: no input files given")
    parsed = ParseResult()
    for path in paths:
        parsed.extend(parse_file(path))
    rejections = list(parsed.rejections)
    clean_rows: list[ParsedRow] = parsed.rows
    statistics: dict[str, Any] = {}
    docs_index = None
    if parsed.rows:
        known, unknown = parsed.rejected_per_trajectory()
        frame = to_frame(parsed.rows, known, unknown)
        outcome = run_suite(frame, build_suite(params, allowed_domains, reward_range), docs_dir)
        statistics, docs_index = outcome.statistics, outcome.docs_index
        problems: dict[int, list[Problem]] = {}
        for failure in outcome.failures:
            targets = failure.rows if failure.rows is not None else \
                {i: (failure.field, failure.message) for i in range(len(parsed.rows))}
            for index, (field_name, reason) in targets.items():
                problems.setdefault(index, []).append(
                    Problem(failure.expectation, field_name, reason))
        for index, found in problems.items():
            row = parsed.rows[index]
            rejections.append(Rejection(row.file, row.line, row.raw, tuple(sort_problems(found)),
                                        row.transition.trajectory_id))
        clean_rows = [row for i, row in enumerate(parsed.rows) if i not in problems]
    order = {str(p): i for i, p in enumerate(paths)}
    rejections.sort(key=lambda r: (order.get(r.file, len(order)), r.line))
    reasons = Counter(f"{p.check}:{p.field}" for rej in rejections for p in rej.problems)
    report = ValidationReport(
        inputs=[str(p) for p in paths], total_rows=parsed.total_lines, clean=len(clean_rows),
        rejected=len(rejections), max_rejected_share=params.max_rejected_share,
        reasons=dict(reasons), blank_lines=parsed.blank_lines,
        examples=[rej.to_record()["reason"] for rej in rejections[:EXAMPLES]],
        docs_index=docs_index, suite_statistics=statistics)
    return _Outcome([row.transition for row in clean_rows], rejections, report)


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)
