"""Step 2 of validation: a Great Expectations suite over the rows that parsed.

Row-level expectations run with result_format COMPLETE, so every failure comes back with the
DataFrame index of each bad row; `run_suite` turns those into per-row `Failure`s that the
quarantine maps back to file lines. A failure without row indices (a missing column, a wrong
column dtype, an expectation that raised) rejects every row: the suite fails closed.

Great Expectations is imported lazily (it takes seconds), so importing this package is cheap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from agentworld.config import ValidateParams
from agentworld.validation.domains import ACTION_VERB, action_verb, domain_expectations
from agentworld.validation.rows import ParsedRow, utf8_safe

if TYPE_CHECKING:
    import great_expectations as gx

SUITE_NAME = "transitions"
#: Sane reward range: env rewards are small; anything outside is a logging bug, not a reward.
REWARD_RANGE: tuple[float, float] = (-1000.0, 1000.0)
SOURCES = ("real", "synthetic")

STRING_FIELDS = ("id", "trajectory_id", "domain", "env_id", "task_id", "instruction", "action",
                 "observation", "source", "policy", "env_version", "timestamp")
#: Strings that may legitimately be empty; every other string field needs length >= 1.
MAY_BE_EMPTY = ("instruction", "observation")
COLUMN_TYPES = {**{name: "str" for name in STRING_FIELDS},
                "turn": "int64", "seed": "int64", "reward": "float64", "done": "bool"}

# Helper columns computed in pandas (documented in `to_frame`).
INFO_JSON = "info_json"
TURN_SLOTS = "turn_slots"
BAD_UTF8 = "invalid_utf8_fields"
# Provenance columns: not checked, used to name the first copy of a duplicate.
FILE, LINE = "file", "line"

#: Expectations where the first copy of a duplicated value is kept and later copies rejected.
_KEEP_FIRST = ("expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique")


@dataclass(frozen=True)
class Failure:
    """One failed expectation: which rows (None = all rows) and why, per row."""

    expectation: str
    field: str
    rows: dict[int, tuple[str, str]] | None  # frame index -> (field, reason)
    message: str


@dataclass
class SuiteOutcome:
    """Failures of one suite run, plus GE's own statistics and where the Data Docs are."""

    success: bool
    failures: list[Failure] = field(default_factory=list)
    statistics: dict[str, Any] = field(default_factory=dict)
    docs_index: Path | None = None


def to_frame(rows: Sequence[ParsedRow], rejected_per_trajectory: Mapping[str, int],
             unattributed_rejections: int) -> pd.DataFrame:
    """The rows as a DataFrame (index = position in `rows`) with helper columns.

    - `info_json`: the info dict as canonical JSON (a dict is not a checkable column value).
    - `turn_slots`: lines the input holds for this row's trajectory: parsed rows, plus lines
      rejected in step 1 that name this trajectory, plus rejected lines that name none. A
      contiguous trajectory has turns 0..slots-1, so `turn < turn_slots`; a gap left by a
      rejected line still counts as a slot and never rejects its valid neighbours.
    - `action_verb`: the action's first word, for per-domain rules (validation/domains.py).
    - `invalid_utf8_fields`: names of string fields holding lone surrogates (from JSON \\ud800
      escapes; they cannot be encoded as UTF-8). Such strings are replaced by U+FFFD in the
      frame itself, because pandas/pyarrow (and the HTML Data Docs) cannot hold them.
    """
    columns: dict[str, list[Any]] = {name: [] for name in (*COLUMN_TYPES, INFO_JSON, BAD_UTF8,
                                                           FILE, LINE)}
    for row in rows:
        record = row.transition.model_dump()
        record[INFO_JSON] = json.dumps(record.pop("info"), ensure_ascii=False, sort_keys=True)
        bad = []
        for name in (*STRING_FIELDS, INFO_JSON):
            clean = utf8_safe(record[name])
            if clean is not record[name]:
                bad.append(name.removesuffix("_json"))
                record[name] = clean
        record[BAD_UTF8] = ",".join(bad)
        record[FILE], record[LINE] = row.file, row.line
        for name, values in columns.items():
            values.append(record[name])
    frame = pd.DataFrame(columns)
    frame["reward"] = frame["reward"].astype("float64")
    for name in ("turn", "seed"):
        frame[name] = frame[name].astype("int64")
    frame["done"] = frame["done"].astype("bool")
    frame[ACTION_VERB] = frame["action"].map(action_verb)
    per_trajectory = frame.groupby("trajectory_id")["trajectory_id"].transform("size")
    rejected = frame["trajectory_id"].map(lambda t: rejected_per_trajectory.get(t, 0))
    frame[TURN_SLOTS] = (per_trajectory + rejected + unattributed_rejections).astype("int64")
    return frame


def build_suite(params: ValidateParams, allowed_domains: Sequence[str],
                reward_range: tuple[float, float] = REWARD_RANGE) -> gx.ExpectationSuite:
    """The transition suite; each expectation's meta names the row field it protects."""
    gx = _gx()
    gxe = gx.expectations
    domains = [allowed_domains] if isinstance(allowed_domains, str) else sorted(allowed_domains)

    def meta(name: str, why: str) -> dict[str, Any]:
        return {"field": name, "notes": why}

    exps: list[Any] = [gxe.ExpectTableColumnsToMatchSet(
        column_set=[*COLUMN_TYPES, INFO_JSON, TURN_SLOTS, BAD_UTF8], exact_match=False,
        meta=meta("<table>", "every required field is a column"))]
    exps += [gxe.ExpectColumnValuesToBeOfType(column=name, type_=type_,
                                              meta=meta(name, "column type"))
             for name, type_ in COLUMN_TYPES.items()]
    for name in STRING_FIELDS:
        if name in MAY_BE_EMPTY or name == "action":
            continue
        exps.append(gxe.ExpectColumnValueLengthsToBeBetween(
            column=name, min_value=1, meta=meta(name, "identifiers must not be empty")))
    exps += [
        gxe.ExpectColumnValueLengthsToBeBetween(
            column="action", min_value=1, max_value=params.action_max_chars,
            meta=meta("action", "non-empty and within validate.action_max_chars")),
        gxe.ExpectColumnValueLengthsToBeBetween(
            column="observation", min_value=0, max_value=params.observation_max_chars,
            meta=meta("observation", "within validate.observation_max_chars")),
        gxe.ExpectColumnValuesToBeUnique(
            column="id", meta=meta("id", "ids are unique; the first copy is kept")),
        gxe.ExpectCompoundColumnsToBeUnique(
            column_list=["trajectory_id", "turn"],
            meta=meta("turn", "one row per (trajectory, turn); the first copy is kept")),
        gxe.ExpectColumnValuesToBeBetween(
            column="turn", min_value=0, meta=meta("turn", "turns start at 0")),
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A=TURN_SLOTS, column_B="turn", or_equal=False,
            meta=meta("turn", "contiguous turns: turn < lines held for the trajectory")),
        gxe.ExpectColumnValuesToBeInSet(
            column="domain", value_set=domains, meta=meta("domain", "known domain")),
        gxe.ExpectColumnValuesToBeInSet(
            column="source", value_set=list(SOURCES), meta=meta("source", "real or synthetic")),
        gxe.ExpectColumnValuesToNotBeNull(column="reward", meta=meta("reward", "no NaN rewards")),
        gxe.ExpectColumnValuesToBeBetween(
            column="reward", min_value=reward_range[0], max_value=reward_range[1],
            meta=meta("reward", "sane reward range")),
        gxe.ExpectColumnValuesToBeInSet(
            column=BAD_UTF8, value_set=[""],
            meta=meta("*", "strings are valid UTF-8 (no lone surrogates)")),
    ]
    exps += domain_expectations(domains, gxe)
    return gx.ExpectationSuite(name=SUITE_NAME, expectations=exps)


def run_suite(frame: pd.DataFrame, suite: gx.ExpectationSuite,
              docs_dir: str | Path | None = None) -> SuiteOutcome:
    """Validate `frame` in a throwaway in-memory GE context; build Data Docs into `docs_dir`."""
    gx = _gx()
    context = _ephemeral_context(docs_dir)
    source = context.data_sources.add_pandas("trajectories")
    asset = source.add_dataframe_asset("transitions")
    batch_def = asset.add_batch_definition_whole_dataframe("all")
    suite = context.suites.add(gx.ExpectationSuite(name=suite.name,
                                                   expectations=suite.expectations))
    result_format = {"result_format": "COMPLETE"}
    if docs_dir is None:  # no docs wanted: skip the checkpoint machinery (~0.3 s)
        batch = batch_def.get_batch(batch_parameters={"dataframe": frame})
        validation = batch.validate(suite, result_format=result_format)
    else:
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name="validate_transitions", data=batch_def, suite=suite))
        checkpoint = context.checkpoints.add(gx.Checkpoint(
            name="validate", validation_definitions=[definition], result_format=result_format,
            actions=[gx.checkpoint.UpdateDataDocsAction(name="data_docs", site_names=["run"])]))
        result = checkpoint.run(batch_parameters={"dataframe": frame})
        (validation,) = result.run_results.values()
    outcome = SuiteOutcome(success=bool(validation.success),
                           statistics=dict(validation.statistics))
    for item in validation.results:
        if not item.success:
            outcome.failures.append(_to_failure(item, frame))
    if docs_dir is not None:
        index = Path(docs_dir) / "index.html"
        outcome.docs_index = index if index.exists() else None
    return outcome


def _gx() -> Any:
    """Import Great Expectations on first use, with its usage analytics off (no network here)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import great_expectations.expectations  # noqa: F401  (makes gx.expectations available)

    return gx


def _ephemeral_context(docs_dir: str | Path | None) -> Any:
    """In-memory stores, no analytics, no progress bars; one local Data Docs site at docs_dir."""
    gx = _gx()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    sites = {}
    if docs_dir is not None:
        sites["run"] = {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                              "base_directory": str(Path(docs_dir).resolve())},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        }
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        data_docs_sites=sites, analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False))
    return gx.get_context(project_config=config, mode="ephemeral")


def _to_failure(item: Any, frame: pd.DataFrame) -> Failure:
    """GE result -> rows to reject with a reason; keep-first for uniqueness expectations."""
    config = item.expectation_config
    name = config.type
    field_name = (config.meta or {}).get("field") or config.kwargs.get("column") or "<table>"
    raised = (item.exception_info or {}).get("raised_exception")
    indices = item.result.get("unexpected_index_list")
    if raised or indices is None:
        why = (item.exception_info or {}).get("exception_message") if raised else \
            f"observed {item.result.get('observed_value')!r} {item.result.get('details') or ''}"
        return Failure(name, field_name, None, f"{name} failed for the whole table: {why}")
    values = item.result.get("unexpected_list") or [None] * len(indices)
    rows: dict[int, tuple[str, str]] = {}
    first_seen: dict[str, int] = {}
    for index, value in sorted(zip(indices, values), key=lambda pair: pair[0]):
        if name in _KEEP_FIRST:
            key = json.dumps(value, sort_keys=True, default=str)
            if key not in first_seen:
                first_seen[key] = index
                continue
            first = frame.loc[first_seen[key]]
            rows[index] = (field_name, f"duplicate {_describe(value)}, "
                                       f"first seen at {first[FILE]}:{first[LINE]}")
        elif config.kwargs.get("column") == BAD_UTF8:
            rows[index] = (str(value), f"lone surrogate (not valid UTF-8) in {value}")
        else:
            row = frame.loc[index]
            reason = _row_reason(name, config.kwargs, row, value)
            if (config.meta or {}).get("domain"):  # a per-domain rule: say which, and why
                reason += f" ({config.meta['notes']})"
            rows[index] = (field_name, reason)
    if not rows and name not in _KEEP_FIRST:  # failed yet named no row: fail closed
        return Failure(name, field_name, None, f"{name} failed without naming rows")
    return Failure(name, field_name, rows, f"{name} failed on {len(rows)} row(s)")


def _row_reason(name: str, kwargs: Mapping[str, Any], row: pd.Series, value: Any) -> str:
    """The rule one row broke, in words (for the quarantine reason)."""
    if name == "expect_column_value_lengths_to_be_between":
        return (f"length {len(row[kwargs['column']])} is outside "
                f"[{kwargs.get('min_value')}, {kwargs.get('max_value') or 'any'}]")
    if name == "expect_column_values_to_be_in_set":
        return f"{_describe(value)} is not in the allowed set {list(kwargs['value_set'])}"
    if name == "expect_column_values_to_be_between":
        low, high = kwargs.get("min_value"), kwargs.get("max_value")
        return f"{_describe(value)} is outside [{low}, {high}]"
    if name == "expect_column_values_to_match_regex":
        return f"{_describe(value)} does not match {kwargs['regex']!r}"
    if name == "expect_column_values_to_be_json_parseable":
        return f"{_describe(value)} is not valid JSON"
    if name == "expect_column_values_to_not_be_null":
        return "value is null/NaN"
    if name == "expect_column_pair_values_a_to_be_greater_than_b":
        return (f"turn {row['turn']} is beyond the {row[TURN_SLOTS]} line(s) held for trajectory "
                f"{row['trajectory_id']!r}: turns must run 0..{row[TURN_SLOTS] - 1} without gaps")
    return f"unexpected value {_describe(value)}"


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

