"""SWE domain: fix an injected bug in a real Python project (a git repository in a sandbox).

Each episode (seed) picks a project (inflection, toolz, tabulate, more-itertools: real sdists
from PyPI, see `swe_repos`) and one verified mutation from the catalogue. `/workspace` is the
project as a git repository at its released version (one commit, fixed author and date) with
the bug in the working tree; the instruction is a bug report: the failing test's node id and
its assertion message. Everything that touches the repository runs in the bubblewrap sandbox
(no network, per-command limits), with /usr/bin/python3 and pytest (bound read-only).

Actions (one per step, parsed strictly; a malformed one gets an error naming the syntax):
  ls [path]                       `ls -A -p`
  view <path> [start-end]         `cat -n`, optionally lines start..end
  search <pattern> [path]         `grep -rnI` (basic regex, .git excluded), sorted by file and line
  edit {"path": p, "old": o, "new": n}   replace the exact text o (must occur once) by n;
                                  a bare JSON object is accepted as an edit too
  run_tests [test path or node id]   `python3 -m pytest -q -p no:cacheprovider --tb=short [target]`
  git diff
  submit                          runs the full suite on the pristine repository with only the
                                  bug's source file taken from the agent, ends the episode:
                                  reward 1.0 iff the suite passes exactly as the unmutated
                                  project's does (same passed and skipped counts)
The verdict cannot be forged by edits outside the file the task is about: at submit the host
copies that one file out (as data: no symlink followed, size capped), restores the whole
repository, home and /tmp from the pristine copy, and runs the suite as a checker (no saved
shell state, fixed environment, `python3 -s`: no user site-packages). A suite that exits early,
skips or deselects tests, or runs fewer of them, does not match the project's recorded summary
and scores 0. (Code in the fixed file runs inside pytest's own process; one that deliberately
fakes pytest's report from inside it is beyond what any test-based checker can see.)

Observations are the command's real output (stdout+stderr), "(no output)" when it printed
nothing, capped at 4,000 characters (pytest output is cut in the middle so its summary line
stays; its timing " in 0.42s" is removed, as are memory addresses, for determinism).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentworld.config import SandboxParams
from agentworld.domains.swe import WORLD_MODEL_PROMPT
from agentworld.domains.swe import repos as swe_repos
from agentworld.envs.base import Task, TextEnv
from agentworld.envs.behaviour import Policy, behaviour_policy
from agentworld.envs.sandbox import FIXED_EPOCH, CommandResult, Sandbox, read_regular_under, sandbox_available

DOMAIN = "swe"
SYSTEM_PROMPT = WORLD_MODEL_PROMPT  # declared in agentworld/domains/swe/__init__.py
MAX_OBS_CHARS = 4000
NO_OUTPUT = "(no output)"
TEST_TIMEOUT_S = 60.0
USAGE = ('ls [path] | view <path> [start-end] | search <pattern> [path] | '
         'edit {"path": "...", "old": "...", "new": "..."} | run_tests [test path or node id] | git diff | submit')
ACTION_TYPES = ("ls", "view", "search", "edit", "run_tests", "git_diff", "submit", "invalid")
_TIMING_RE = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?(?= ?=*$)", re.M)
_ADDR_RE = re.compile(r"0x[0-9a-f]{6,16}")
_RANGE_RE = re.compile(r"^(\d+)-(\d+)$")
_COUNT_RE = re.compile(r"(\d+) ((?:subtests )?(?:passed|failed|errors?|skipped|xfailed|xpassed|deselected))\b")
#: Most bytes of the fixed source file the host copies out at submit.
FIX_READ_CAP = 4 << 20
#: The verdict run: no user site-packages (`-s`), so nothing the agent planted in ~ can load.
VERDICT_CMD = f"{swe_repos.PYTEST_CMD.replace('python3 ', 'python3 -s ', 1)} --tb=short"


def summary_counts(output: str) -> dict[str, int]:
    """pytest's closing summary line as counts (`455 passed, 1 skipped`; warnings ignored);
    empty when the run printed no summary (it exited early)."""
    lines = [line.strip("= ") for line in output.strip().splitlines() if line.strip()]
    if not lines:
        return {}
    return {kind.replace("errors", "error"): int(n) for n, kind in _COUNT_RE.findall(lines[-1])}

# Runs inside the sandbox: `python3 -c EDIT_SCRIPT '<json>'`; its messages are the edit tool's errors.
EDIT_SCRIPT = r"""
import json, sys
a = json.loads(sys.argv[1]); path, old, new = a["path"], a["old"], a["new"]
try:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
except (OSError, UnicodeDecodeError) as err:
    sys.exit(f"edit: cannot read {path}: {err}")
count = text.count(old)
if count == 0:
    sys.exit(f"edit: the old text was not found in {path} (it must match exactly, whitespace included)")
if count > 1:
    sys.exit(f"edit: the old text occurs {count} times in {path}; include more lines to make it unique")
at = text.index(old)
text = text[:at] + new + text[at + len(old):]
try:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
except OSError as err:
    sys.exit(f"edit: cannot write {path}: {err}")
first = text.count("\n", 0, at) + 1
lines = text.splitlines()
last = first + max(new.count("\n") - (1 if new.endswith("\n") else 0), 0)
print(f"Edited {path}: replaced {old.count(chr(10)) + (not old.endswith(chr(10)))} line(s) at line {first}.")
for n in range(max(first - 2, 1), min(last + 2, len(lines)) + 1):
    print(f"{n:6d}\t{lines[n - 1]}")
"""


# ----------------------------------------------------------------------------- availability
def system_probe() -> tuple[bool, str]:
    """The machine's part of `probe`: bubblewrap, /usr/bin/python3 (>= 3.9) and git."""
    ok, reason = sandbox_available()
    if not ok:
        return False, reason
    for tool in ("/usr/bin/python3", "/usr/bin/git"):
        if not os.path.isfile(tool):
            return False, f"{tool} is missing; apt-get install -y {'python3' if 'python' in tool else 'git'}"
    return True, "ok"


def probe() -> tuple[bool, str]:
    """Whether the SWE env can run here: `system_probe` plus the fetched project cache."""
    ok, reason = system_probe()
    if not ok:
        return False, reason
    cache = swe_repos.default_cache_dir()
    if not swe_repos.cache_ready(cache):
        return False, (f"the SWE project cache is missing or stale at {cache}; run "
                       "`python -m agentworld.domains.swe.repos fetch` (make setup does)")
    return True, f"{len(swe_repos.PROJECTS)} projects, catalogue at {swe_repos.catalogue_path(cache)}"


# ----------------------------------------------------------------------------- tasks
def all_tasks(catalogue: dict[str, Any], projects: Sequence[str] | None = None) -> dict[str, list[Task]]:
    """Every (project, mutation) task of the catalogue, per project, in catalogue order."""
    out: dict[str, list[Task]] = {}
    for name in sorted(catalogue["projects"]):
        if projects is not None and name not in projects:
            continue
        entry = catalogue["projects"][name]
        out[name] = [make_task(name, entry, m) for m in entry["mutations"]]
    return out


def make_task(project: str, entry: dict[str, Any], m: dict[str, Any]) -> Task:
    message = _ADDR_RE.sub("0x7f0000000000", m["message"]) or "(no message)"
    instruction = (
        f"Bug report for {project} {entry['version']} (a git repository in /workspace):\n"
        f"the test {m['failing_test']} fails with\n    {message}\n"
        "Find the bug in the library's source code and fix it without changing the tests.\n"
        f"Actions: {USAGE}")
    edit = json.dumps({"path": m["file"], "old": m["old"], "new": m["new"]})
    setup = {"project": project, "version": entry["version"], "mutation": m["id"], "kind": m["kind"],
             "file": m["file"], "line": m["line"], "function": m["function"], "test_file": m["test_file"],
             "failing_test": m["failing_test"], "test_paths": entry["test_paths"],
             "mutated_sha256": m["mutated_sha256"]}
    return Task(task_id=f"swe-{project}-{m['id']}", domain=DOMAIN, instruction=instruction, setup=setup,
                solution=[f"edit {edit}", f"run_tests {m['failing_test']}", "submit"])


def truncate(text: str, limit: int = MAX_OBS_CHARS, *, middle: bool = False) -> str:
    """Cut `text` to `limit` characters with a marker: from the end, or from the middle."""
    if len(text) <= limit:
        return text
    if not middle:
        marker = "\n[... {} more characters truncated ...]"
        keep = limit - len(marker.format(len(text)))
        return text[:keep] + marker.format(len(text) - keep)
    marker = "\n[... {} characters truncated ...]\n"
    room = limit - len(marker.format(len(text)))
    head, tail = room * 2 // 5, room - room * 2 // 5
    return text[:head] + marker.format(len(text) - head - tail) + text[-tail:]


class ActionError(ValueError):
    """A malformed action; the message is the observation."""


# ----------------------------------------------------------------------------- the env
class SweEnv(TextEnv):
    """Gymnasium-style text env over a git repository with an injected bug (see module docstring)."""

    domain = DOMAIN
    env_version = "1"

    def __init__(self, sandbox_params: SandboxParams | None = None, *, projects: Sequence[str] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, test_timeout_s: float = TEST_TIMEOUT_S) -> None:
        super().__init__()
        self.sandbox_params = sandbox_params or SandboxParams()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else swe_repos.default_cache_dir()
        swe_repos.fetch(self.cache_dir, log=lambda *_: None)
        self.catalogue = swe_repos.load_catalogue(self.cache_dir)
        self.tasks = all_tasks(self.catalogue, projects)
        if not self.tasks:
            raise ValueError(f"no SWE tasks for projects {projects!r}; known: {sorted(self.catalogue['projects'])}")
        self.test_timeout_s = test_timeout_s
        self._sandbox: Sandbox | None = None
        self._done = True
        self._steps = 0

    # ----------------------------------------------------------------- protocol
    def task_for_seed(self, seed: int, project: str | None = None) -> Task:
        rng = random.Random(seed)
        names = sorted(self.tasks)
        name = project if project is not None else names[rng.randrange(len(names))]
        if name not in self.tasks:
            raise ValueError(f"unknown SWE project {name!r}; known: {', '.join(names)}")
        return self.tasks[name][rng.randrange(len(self.tasks[name]))]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self.episode_task(
            seed, options, lambda s, o: self.task_for_seed(s, o.get("project")))
        self._prepare(task)
        self.task, self._done, self._steps = task, False, 0
        info = {"task_id": task.task_id, "project": task.setup["project"], "mutation": task.setup["mutation"],
                "kind": task.setup["kind"], "seed": seed}
        return task.instruction, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self._sandbox is None or self.task is None:
            raise RuntimeError("episode is over (or never started); call reset() first")
        self._steps += 1
        try:
            kind, command, timeout, is_test = self._parse(action)
        except ActionError as err:
            return str(err), 0.0, False, False, self._info("invalid", None, False)
        if kind == "submit":
            result, solved = self._verdict()
        else:
            result = self._sandbox.run(command, timeout_s=timeout)
        output = result.output
        if is_test:
            output = _ADDR_RE.sub("0x7f0000000000", _TIMING_RE.sub("", output))
        if result.timed_out:
            output += f"\n[command timed out after {timeout:g}s]"
        output = output.rstrip("\n") or NO_OUTPUT
        observation = truncate(output, middle=is_test)
        if kind == "submit":
            self._done = True
            info = self._info(kind, result, solved)
            info["ended_by_agent"] = True
            return observation, float(solved), True, False, info
        return observation, 0.0, False, False, self._info(kind, result, False)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        self._done = True

    # ----------------------------------------------------------------- parsing
    def _parse(self, action: str) -> tuple[str, str, float | None, bool]:
        """(action type, sandbox command, timeout, is a pytest run) of one action."""
        text = action.strip()
        if not text:
            raise ActionError(f"error: empty action. Valid actions: {USAGE}")
        if text.startswith("{"):
            return "edit", self._edit_command(text), None, False
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        if name == "edit":
            return "edit", self._edit_command(rest), None, False
        if name == "git":
            if rest != "diff":
                raise ActionError(f"error: unsupported git command 'git {rest}'; only 'git diff' is available")
            return "git_diff", "git diff", None, False
        if name == "submit":
            if rest:
                raise ActionError("error: submit takes no arguments")
            return "submit", VERDICT_CMD, self.test_timeout_s, True  # run by _verdict
        if name not in ("ls", "view", "search", "run_tests"):
            raise ActionError(f"error: unknown action {name!r}. Valid actions: {USAGE}")
        try:
            args = shlex.split(rest)
        except ValueError as err:
            raise ActionError(f"error: cannot parse the arguments of {name}: {err}") from None
        q = shlex.quote
        if name == "ls":
            if len(args) > 1:
                raise ActionError("error: usage: ls [path]")
            return "ls", f"ls -A -p -- {q(args[0]) if args else '.'}", None, False
        if name == "view":
            if not 1 <= len(args) <= 2:
                raise ActionError("error: usage: view <path> [start-end]")
            command = f"cat -n -- {q(args[0])}"
            if len(args) == 2:
                match = _RANGE_RE.match(args[1])
                if match is None or int(match.group(1)) < 1 or int(match.group(2)) < int(match.group(1)):
                    raise ActionError(f"error: invalid line range {args[1]!r}; use start-end with 1 <= start <= end, "
                                      "e.g. view src/module.py 10-40")
                command = f"set -o pipefail; {command} | sed -n '{int(match.group(1))},{int(match.group(2))}p'"
            return "view", command, None, False
        if name == "search":
            if not 1 <= len(args) <= 2:
                raise ActionError("error: usage: search <pattern> [path]")
            path = q(args[1]) if len(args) == 2 else "."
            return "search", (f"{{ grep -rnI --exclude-dir=.git -e {q(args[0])} -- {path}; }} 2>&1 "
                              "| LC_ALL=C sort -t: -k1,1 -k2,2n"), None, False
        if len(args) > 1:
            raise ActionError("error: usage: run_tests [test path or node id]")
        target = f" {q(args[0])}" if args else ""
        return "run_tests", f"{swe_repos.PYTEST_CMD} --tb=short{target}", self.test_timeout_s, True

    def _edit_command(self, payload: str) -> str:
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError) as err:  # RecursionError: JSON nested too deeply
            raise ActionError(f'error: edit expects a JSON object {{"path": ..., "old": ..., "new": ...}}: {err}') from None
        if not isinstance(data, dict) or set(data) != {"path", "old", "new"}:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ActionError(f'error: edit expects exactly the keys "path", "old" and "new"; got {got}')
        if not all(isinstance(data[k], str) for k in ("path", "old", "new")):
            raise ActionError('error: edit values "path", "old" and "new" must be strings')
        if not data["old"]:
            raise ActionError('error: edit "old" must not be empty')
        return f"python3 -c {shlex.quote(EDIT_SCRIPT)} {shlex.quote(json.dumps(data))}"

    def _verdict(self) -> tuple[CommandResult, bool]:
        """The submit: only the bug's source file carries over onto the pristine repository (the
        tests, conftests, configs, .git, home and /tmp are the project's again), then the suite
        runs as a checker; solved iff it passes with the unmutated project's own counts."""
        assert self._sandbox is not None and self.task is not None
        setup = self.task.setup
        fixed = read_regular_under(self._sandbox.workspace, setup["file"], FIX_READ_CAP)
        self._prepare(self.task)  # the pristine repository with the bug, home and /tmp emptied
        if fixed is not None:  # else (a link, a FIFO, gone): the bug stays, and the verdict is 0
            (self._sandbox.workspace / setup["file"]).write_bytes(fixed)
        result = self._sandbox.run(VERDICT_CMD, persist=False, timeout_s=self.test_timeout_s)
        expected = summary_counts(self.catalogue["projects"][setup["project"]]["baseline"])
        solved = (fixed is not None and result.exit_code == 0 and not result.timed_out
                  and summary_counts(result.output) == expected)
        return result, solved

    # ----------------------------------------------------------------- episode state
    def _prepare(self, task: Task) -> None:
        """Fresh /workspace (the project's repository with the bug), reusing the sandbox."""
        setup = task.setup
        repo = self.cache_dir / "repos" / setup["project"]
        entry = self.catalogue["projects"][setup["project"]]
        mutation = next((m for m in entry["mutations"] if m["id"] == setup["mutation"]), None)
        if mutation is None:
            raise ValueError(f"mutation {setup['mutation']} is not in the catalogue of {setup['project']}")
        if self._sandbox is None:
            self._sandbox = swe_repos.sandbox_for(self.cache_dir, self.sandbox_params)
            self._sandbox.start()
        else:
            self._wipe(self._sandbox)
        swe_repos._copy_repo(repo, self._sandbox)
        target = self._sandbox.workspace / mutation["file"]
        original = target.read_bytes()
        mutated = original[:mutation["start"]] + mutation["replacement"].encode() + original[mutation["end"]:]
        if hashlib.sha256(mutated).hexdigest() != mutation["mutated_sha256"]:
            raise ValueError(f"mutation {mutation['id']} does not reproduce on {mutation['file']}; "
                             "rebuild the cache (python -m agentworld.domains.swe.repos fetch)")
        target.write_bytes(mutated)
        os.utime(target, (FIXED_EPOCH, FIXED_EPOCH))

    @staticmethod
    def _wipe(sandbox: Sandbox) -> None:
        root = sandbox.workspace.parent
        for name in ("workspace", "home", "tmp"):
            for child in (root / name).iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        for child in (root / "control").iterdir():
            child.unlink() if not child.is_dir() or child.is_symlink() else shutil.rmtree(child)

    def _info(self, kind: str, result: CommandResult | None, solved: bool) -> dict[str, Any]:
        assert self.task is not None
        info: dict[str, Any] = {"task_id": self.task.task_id, "project": self.task.setup["project"],
                                "action_type": kind, "step": self._steps, "solved": solved}
        if result is not None:
            info.update(exit_code=result.exit_code, timed_out=result.timed_out, duration_s=result.duration_s)
        return info


# ----------------------------------------------------------------------------- behaviour
_PATH_RE = re.compile(r"(?m)^(?:\./)?([\w./-]+\.py)(?=:\d+:|::|\s|$)")
_NODE_RE = re.compile(r"([\w./-]+\.py)::([\w\[\]./:-]+)")
_VIEW_DEF_RE = re.compile(r"(?m)^ *\d+\t((?: {4})*def (\w+)\(.*\):)$")
_IDENT_RE = re.compile(r"\bdef (\w+)|\b(\w{5,})\(")


class _SweVocabulary:
    """The SWE action vocabulary of one episode (see behaviour.DomainActions)."""

    done_action = "submit"

    def __init__(self, task: Task) -> None:
        s = task.setup
        self.file, self.test_file, self.line = s["file"], s["test_file"], int(s["line"])
        self.files: list[str] = [self.file] + ([self.test_file] if self.test_file.endswith(".py") else [])
        self.dirs: list[str] = ["."] + sorted({str(Path(self.file).parent)} - {"."})
        self.test_targets: list[str] = [self.test_file, s["failing_test"]]
        self.words: list[str] = [s["function"]]
        self.def_lines: list[tuple[str, str]] = []  # (file, exact line) seen in a view
        self._last: str = ""

    def _remember(self, action: str) -> str:
        self._last = action
        return action

    def observe(self, observation: str) -> None:
        last = self._last.split()
        if last and last[0] == "ls" and not observation.startswith(("ls:", "error")):
            base = last[1] if len(last) > 1 else "."
            for entry in observation.splitlines():
                if entry in (".git/", NO_OUTPUT) or not entry or entry.startswith("["):
                    continue
                path = entry.rstrip("/") if base == "." else f"{base.rstrip('/')}/{entry.rstrip('/')}"
                target = self.dirs if entry.endswith("/") else (self.files if entry.endswith(".py") else None)
                if target is not None and path not in target:
                    target.append(path)
        if last and last[0] == "view" and len(last) > 1:
            for line, name in _VIEW_DEF_RE.findall(observation):
                if (last[1], line) not in self.def_lines:
                    self.def_lines.append((last[1], line))
                if name not in self.words:
                    self.words.append(name)
        for path in _PATH_RE.findall(observation):
            if path not in self.files and not path.startswith("/"):
                self.files.append(path)
        for path, test in _NODE_RE.findall(observation):
            node = f"{path}::{test}"
            if node not in self.test_targets and len(self.test_targets) < 40:
                self.test_targets.append(node)
        for a, b in _IDENT_RE.findall(observation):
            word = a or b
            if word not in self.words and len(self.words) < 60:
                self.words.append(word)

    def inspect(self, rng: random.Random) -> str:
        start = max(1, self.line - rng.randint(3, 15))
        options = ["git diff", f"view {self.file} {start}-{start + rng.randint(10, 30)}",
                   f"search {shlex.quote(rng.choice(self.words))} {shlex.quote(str(Path(self.file).parent))}", "ls"]
        return self._remember(rng.choice(options))

    def explore(self, rng: random.Random) -> str:
        roll = rng.random()
        if roll < 0.2:
            action = f"ls {shlex.quote(rng.choice(self.dirs))}" if rng.random() < 0.7 else "ls"
        elif roll < 0.5:
            path = rng.choice(self.files)
            start = rng.randint(1, 200)
            action = f"view {shlex.quote(path)} {start}-{start + rng.randint(5, 40)}"
        elif roll < 0.7:
            path = rng.choice(self.dirs)
            action = f"search {shlex.quote(rng.choice(self.words))}" + ("" if path == "." else f" {shlex.quote(path)}")
        elif roll < 0.8:
            action = f"run_tests {shlex.quote(rng.choice(self.test_targets))}"
        elif roll < 0.9 and self.def_lines:
            path, line = rng.choice(self.def_lines)
            action = "edit " + json.dumps({"path": path, "old": line + "\n", "new": line + "  # reviewed\n"})
        else:
            action = "git diff"
        return self._remember(action)

    def mistake(self, rng: random.Random) -> str:
        word = rng.choice(self.words)
        path = rng.choice(self.files)
        options = [
            f"view {path.rsplit('/', 1)[0] + '/' if '/' in path else ''}{word}_missing.py",
            f"view {path} {rng.randint(50, 90)}-{rng.randint(1, 40)}",
            f"view {path} lines",
            "view",
            f"view {rng.choice(self.dirs)}",
            f"ls no_such_dir_{rng.randint(1, 99)}",
            "edit " + json.dumps({"path": path, "old": f"{word} = None  # absent", "new": "pass"}),
            "edit " + json.dumps({"path": path, "old": "return", "new": "return"}),
            "edit " + json.dumps({"path": f"{word}.py", "old": "x", "new": "y"}),
            f'edit {{"path": "{path}", "old": \'{word}\'}}',
            "edit " + json.dumps({"path": path, "old": word}),
            f"run_tests {self.test_file}::test_{word}_does_not_exist",
            f"run_tests {word}_tests/",
            f"search \"{word}",
            "search '\\(' .",
            f"cat {path}",
            f"python -m pytest {self.test_file}",
            "git status",
            f"open {path}",
            "submit now",
        ]
        return self._remember(rng.choice(options))

    def reply(self, observation: str, rng: random.Random, policy: str) -> str | None:
        return None


def swe_policy(name: str, task: Task) -> Policy:
    """A fresh behaviour policy for one episode of `task`."""
    return behaviour_policy(name, task, _SweVocabulary)


def factory(sandbox_params: SandboxParams | None = None) -> TextEnv:
    return SweEnv(sandbox_params)
