"""Validation of trajectory files: typed parsing, a Great Expectations suite, a quarantine.

Fail-closed: every input line ends up either in the clean file or in the quarantine file,
with a reason naming the file, line and field; a run whose rejected share exceeds
`validate.max_rejected_share` raises `RejectedShareExceeded` after both files are written.
"""

from agentworld.validation.quarantine import (
    RejectedShareExceeded,
    ValidationReport,
    check_file,
    format_report,
    validate_file,
    validate_files,
)
from agentworld.validation.rows import EmptyInputError, parse_file
from agentworld.validation.suite import REWARD_RANGE, build_suite

__all__ = [
    "REWARD_RANGE",
    "EmptyInputError",
    "RejectedShareExceeded",
    "ValidationReport",
    "build_suite",
    "check_file",
    "format_report",
    "parse_file",
    "validate_file",
    "validate_files",
]
