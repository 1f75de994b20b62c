"""The swe domain, declared for the shared layers (see `agentworld.domains.base.Domain`).

Fix an injected, test-verified bug in a real PyPI project (inflection, toolz, tabulate, more-
itertools) as a git repository in the sandbox: ls/view/search/edit/run_tests/git diff/submit.
"""

from agentworld.domains import lazy
from agentworld.domains.base import Domain, ShapeRule
from agentworld.domains.swe.rationale import describe_swe

#: Actions that end an episode.
END_ACTIONS = frozenset({"submit"})
WORLD_MODEL_PROMPT = (
    "You are a world model of a software-engineering environment: a git repository of a real Python "
    "project in /workspace, inside a sandbox with no network, where a bug makes some tests fail. "
    "Given the agent's action (ls, view, search, edit, run_tests, git diff, submit), answer with "
    "exactly what the environment returns: directory listings, numbered file lines, grep matches, "
    "edit confirmations, pytest output, diffs or the tool's error message, nothing else. Keep the "
    "repository consistent across turns: edits persist and change later views, diffs and test "
    "results."
)

DOMAIN = Domain(
    name="swe",
    description=(
        "fix an injected, test-verified bug in a real PyPI project (inflection, toolz, tabulate, "
        "more-itertools) as a git repository in the sandbox: ls/view/search/edit/run_tests/git "
        "diff/submit"
    ),
    entry_point="agentworld.domains.swe.env:factory",
    probe=lazy("agentworld.domains.swe.env", "probe"),
    policies=lazy("agentworld.domains.swe.env", "swe_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    shape_rules=(
        ShapeRule(
            "a test run ends with pytest's pass/fail counts (or the timeout marker); "
            "a misused action gets one usage error line",
            "regex",
            r"(?:\d+ (?:passed|failed|errors?|skipped|deselected|warnings?|no tests ran)[^\n]*|"
            r"\[command timed out after [^\]]*\]|no tests ran[^\n]*)\s*$|^error: [^\n]+$",
            verbs=("run_tests", "submit"),
        ),
    ),
    describer=describe_swe,
    judge_title="a Python git repository with tests",
    judge_format=(
        "Listings, numbered file lines, grep `path:line:` matches, edit confirmations, diffs; a test "
        "run ends with pytest's summary line of counts."
    ),
    judge_notes=(
        "Paths, line numbers, test names and pass/fail counts must match; earlier edits must show in "
        "later views, diffs and test results; pytest durations are runtime metadata; unedited source "
        "text need only be plausible."
    ),
    start_cwd="/workspace",
    end_actions=END_ACTIONS,
)
