"""SWE domain data: real Python projects from PyPI and a catalogue of verified injected bugs.

`python -m agentworld.domains.swe.repos fetch` (run by `make setup`; idempotent) builds the cache
`$AGENTWORLD_SWE_CACHE`, else `$AGENTWORLD_HOME/.cache/swe`, else `<repo>/.cache/swe`:

- `sdists/`: each project's source distribution, downloaded with `pip download --no-deps
  --no-binary :all:` and checked against the sha256 pinned below (a mismatch is an error);
- `repos/<project>/`: the unpacked sdist as a git repository, one commit with a fixed author
  and date (so every episode's `git diff` and commit hashes are the same), fixed mtimes;
- `pytest-lib/`: pytest and its dependencies at the versions of the running interpreter's
  environment, installed with `pip install --target`, because the sandbox sees /usr (with
  /usr/bin/python3) but not the venv; the env binds it read-only at `/opt/pytest`;
- `catalogue.json`: per project, automatic AST mutations of the source (flipped comparison,
  off-by-one constant, swapped and/or, dropped `not`, negated `if`, swapped +/-, flipped
  returned bool), each verified inside the sandbox: the original suite passes and the mutant
  makes at least one test of the relevant test file fail (`pytest -x -q`). The failing test's
  node id and assertion message become the episode's bug report.

Every piece is written to a temp path and renamed into place, under a lock, so parallel callers
never see half a cache.
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from agentworld.config import SandboxParams
from agentworld.envs.sandbox import FIXED_EPOCH, Sandbox

CATALOGUE_VERSION = 2
CACHE_ENV_VAR = "AGENTWORLD_SWE_CACHE"
SANDBOX_PYTEST = "/opt/pytest"  # where pytest-lib appears inside the sandbox
SYSTEM_PYTHON = "/usr/bin/python3"
PYTEST_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")
GIT_DATE = "2024-01-15T09:30:00+00:00"
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "AgentWorld", "GIT_AUTHOR_EMAIL": "swe@agentworld.invalid",
                "GIT_COMMITTER_NAME": "AgentWorld", "GIT_COMMITTER_EMAIL": "swe@agentworld.invalid",
                "GIT_AUTHOR_DATE": GIT_DATE, "GIT_COMMITTER_DATE": GIT_DATE,
                "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
# The environment of every pytest run inside the sandbox (fetch-time checks and episodes alike).
SANDBOX_ENV = {"PYTHONPATH": SANDBOX_PYTEST, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
               "COLUMNS": "100", "GIT_CONFIG_NOSYSTEM": "1"}
PYTEST_CMD = "python3 -m pytest -q -p no:cacheprovider"
VERIFIED_PER_PROJECT = 20
TRIES_PER_PROJECT = 40
VERIFY_TIMEOUT_S = 20.0
WORKERS = 2


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    sha256: str
    sources: dict[str, str]  # mutated source file -> the test file that checks it
    test_paths: tuple[str, ...]  # what `submit` restores before running the full suite

    @property
    def sdist(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"


PROJECTS: dict[str, Project] = {p.name: p for p in (
    Project("inflection", "0.5.1", "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
            {"inflection/__init__.py": "test_inflection.py"}, ("test_inflection.py",)),
    Project("toolz", "1.0.0", "2c86e3d9a04798ac556793bced838816296a2f085017664e4995cb40a1047a02",
            {"toolz/itertoolz.py": "toolz/tests/test_itertoolz.py",
             "toolz/functoolz.py": "toolz/tests/test_functoolz.py",
             "toolz/dicttoolz.py": "toolz/tests/test_dicttoolz.py"}, ("toolz/tests",)),
    Project("tabulate", "0.9.0", "0095b12bf5966de529c0feb1fa08671671b3368eec77d7ef7ab114be2c068b3c",
            {"tabulate/__init__.py": "test"}, ("test",)),
    Project("more-itertools", "10.5.0", "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
            {"more_itertools/recipes.py": "tests/test_recipes.py"}, ("tests",)),
)}


class FetchError(RuntimeError):
    """The cache could not be built; the message says what failed."""


# ----------------------------------------------------------------------------- locations
def default_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    if os.environ.get("AGENTWORLD_HOME"):
        return Path(os.environ["AGENTWORLD_HOME"]) / ".cache" / "swe"
    return Path(__file__).resolve().parents[3] / ".cache" / "swe"


def catalogue_path(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / "catalogue.json"


def load_catalogue(cache_dir: Path | None = None) -> dict[str, Any]:
    path = catalogue_path(cache_dir)
    data = json.loads(path.read_text())
    if data.get("version") != CATALOGUE_VERSION:
        raise FetchError(f"{path} has catalogue version {data.get('version')}, expected {CATALOGUE_VERSION}; "
                         "rerun `python -m agentworld.domains.swe.repos fetch`")
    return data


def cache_ready(cache_dir: Path | None = None) -> bool:
    try:
        load_catalogue(cache_dir)
    except (OSError, ValueError, FetchError):
        return False
    return True


def sandbox_for(cache_dir: Path, params: SandboxParams | None = None) -> Sandbox:
    """A sandbox that sees pytest-lib read-only at /opt/pytest (not started)."""
    p = params or SandboxParams()
    params = p.model_copy(update={"output_cap_bytes": max(p.output_cap_bytes, 1_000_000),
                                  "memory_mb": max(p.memory_mb, 1024)})
    return Sandbox(params, ro_binds={str(cache_dir / "pytest-lib"): SANDBOX_PYTEST}, env=SANDBOX_ENV)


# ----------------------------------------------------------------------------- fetch
def fetch(cache_dir: Path | None = None, *, log: Any = print) -> Path:
    """Build the whole cache (idempotent); returns the catalogue's path."""
    cache_dir = Path(cache_dir or default_cache_dir())
    if cache_ready(cache_dir):
        return catalogue_path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(cache_dir, 0o755)
    with open(cache_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache_ready(cache_dir):
            return catalogue_path(cache_dir)
        started = time.monotonic()
        if not Path(SYSTEM_PYTHON).is_file():
            raise FetchError(f"{SYSTEM_PYTHON} is missing; the sandbox runs tests with it (apt-get install python3)")
        _install_pytest(cache_dir, log)
        for project in PROJECTS.values():
            _download(project, cache_dir, log)
            _build_repo(project, cache_dir, log)
        catalogue: dict[str, Any] = {"version": CATALOGUE_VERSION, "pytest": metadata.version("pytest"),
                                     "python": _system_python_version(), "projects": {}}
        for project in PROJECTS.values():
            catalogue["projects"][project.name] = _verify_project(project, cache_dir, log)
        _atomic_write(catalogue_path(cache_dir), json.dumps(catalogue, indent=1, sort_keys=True))
        log(f"swe cache ready in {time.monotonic() - started:.0f}s: {cache_dir}")
    return catalogue_path(cache_dir)


def _system_python_version() -> str:
    return subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _install_pytest(cache_dir: Path, log: Any) -> None:
    target = cache_dir / "pytest-lib"
    pins = [f"{name}=={metadata.version(name)}" for name in PYTEST_DISTS]
    stamp = target / ".pins"
    if stamp.is_file() and stamp.read_text() == " ".join(pins):
        return
    log(f"installing {' '.join(pins)} into {target}")
    tmp = Path(tempfile.mkdtemp(prefix=".pytest-lib-", dir=cache_dir))
    try:
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
              "--target", str(tmp), *pins])
        (tmp / ".pins").write_text(" ".join(pins))
        _make_world_readable(tmp)
        _replace_dir(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _download(project: Project, cache_dir: Path, log: Any) -> Path:
    sdists = cache_dir / "sdists"
    sdists.mkdir(exist_ok=True)
    path = sdists / project.sdist
    if path.is_file() and _sha256(path) == project.sha256:
        return path
    log(f"downloading {project.name}=={project.version} (sdist)")
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
              "--disable-pip-version-check", "-d", tmp, f"{project.name}=={project.version}"])
        found = [p for p in Path(tmp).iterdir() if p.name.lower().replace("_", "-") == project.sdist.lower()]
        if not found:
            raise FetchError(f"pip download of {project.name}=={project.version} gave no {project.sdist}: "
                             f"{sorted(p.name for p in Path(tmp).iterdir())}")
        digest = _sha256(found[0])
        if digest != project.sha256:
            raise FetchError(f"sha256 mismatch for {project.sdist}: got {digest}, pinned {project.sha256}")
        os.replace(found[0], path)
    return path


def _build_repo(project: Project, cache_dir: Path, log: Any) -> Path:
    repos = cache_dir / "repos"
    repos.mkdir(exist_ok=True)
    dest = repos / project.name
    stamp = f"{project.name} {project.version} {project.sha256}"
    if (dest / ".git" / "agentworld-source").is_file() and (dest / ".git" / "agentworld-source").read_text() == stamp:
        return dest
    log(f"building git repository {dest}")
    tmp = Path(tempfile.mkdtemp(prefix=f".{project.name}-", dir=repos))
    try:
        with tarfile.open(cache_dir / "sdists" / project.sdist) as tar:
            tar.extractall(tmp, filter="data")
        (top,) = list(tmp.iterdir())
        tree = tmp / "tree"
        top.rename(tree)
        for junk in [*tree.rglob("*.egg-info"), *tree.rglob("__pycache__")]:
            shutil.rmtree(junk, ignore_errors=True)
        git = ["git", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"]
        env = {**os.environ, **GIT_IDENTITY}
        _run([*git, "init", "-q"], cwd=tree, env=env)
        shutil.rmtree(tree / ".git" / "hooks", ignore_errors=True)
        _run([*git, "add", "-A"], cwd=tree, env=env)
        _run([*git, "commit", "-q", "-m", f"{project.name} {project.version} (source distribution from PyPI)"],
             cwd=tree, env=env)
        (tree / ".git" / "agentworld-source").write_text(stamp)
        for path in sorted(tree.rglob("*"), reverse=True) + [tree]:
            os.utime(path, (FIXED_EPOCH, FIXED_EPOCH), follow_symlinks=False)
        _make_world_readable(tree)
        _replace_dir(tree, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


# ----------------------------------------------------------------------------- mutations
@dataclass(frozen=True)
class Mutation:
    file: str
    kind: str
    line: int
    start: int  # byte offsets of the replaced span in the original file
    end: int
    replacement: str
    function: str


_COMPARE_SWAPS = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
                  ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Is: ("is", "is not"),
                  ast.IsNot: ("is not", "is"), ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}


def candidate_mutations(relpath: str, source: bytes) -> list[Mutation]:
    """Every simple single-span mutation of one source file, in file order."""
    tree = ast.parse(source)
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return line_starts[line - 1] + col

    def span(node: ast.AST) -> tuple[int, int]:
        return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    functions: dict[int, str] = {}  # line -> innermost enclosing function (biggest first, smallest wins)
    fn_nodes = sorted((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                      key=lambda n: -((n.end_lineno or n.lineno) - n.lineno))
    for fn in fn_nodes:
        for line in range(fn.lineno, (fn.end_lineno or fn.lineno) + 1):
            functions[line] = fn.name

    out: list[Mutation] = []

    def add(kind: str, node: ast.AST, start: int, end: int, replacement: str) -> None:
        line = node.lineno  # type: ignore[attr-defined]
        if line in functions:  # only code inside functions: module-level constants break imports
            out.append(Mutation(relpath, kind, line, start, end, replacement, functions[line]))

    def gap(a: ast.AST, b: ast.AST) -> tuple[int, int, str]:
        s, e = span(a)[1], span(b)[0]
        return s, e, source[s:e].decode()

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE_SWAPS:
            old, new = _COMPARE_SWAPS[type(node.ops[0])]
            s, e, text = gap(node.left, node.comparators[0])
            if " ".join(text.split()) == old and "\n" not in text:
                add("flip-comparison", node, s, e, text.replace(text.strip(), new))
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            s, e, text = gap(node.values[0], node.values[1])
            if text.strip() == old and "\n" not in text:
                add("swap-and-or", node, s, e, text.replace(old, new))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            s, e = span(node)
            os_, oe = span(node.operand)
            if source[s:os_].decode().strip() == "not" and node.lineno == node.end_lineno:
                add("drop-not", node, s, e, source[os_:oe].decode())
        elif isinstance(node, (ast.If, ast.While)) and not isinstance(node.test, ast.UnaryOp):
            s, e = span(node.test)
            if node.test.lineno == node.test.end_lineno:
                simple = isinstance(node.test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
                text = source[s:e].decode()
                add("negate-condition", node.test, s, e, f"not {text}" if simple else f"not ({text})")
        elif (isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 64):
            s, e = span(node)
            if source[s:e].decode() == str(node.value):
                add("off-by-one", node, s, e, str(node.value + 1 if node.value <= 1 else node.value - 1))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and type(node.value.value) is bool:
            s, e = span(node.value)
            add("flip-return", node, s, e, str(not node.value.value))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            if any(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in (node.left, node.right)):
                continue
            old, new = ("+", "-") if isinstance(node.op, ast.Add) else ("-", "+")
            s, e, text = gap(node.left, node.right)
            if text.strip() == old and "\n" not in text:
                add("swap-plus-minus", node, s, e, text.replace(old, new))
    out.sort(key=lambda m: (m.start, m.end, m.kind))
    return out


def apply_mutation(source: bytes, m: Mutation) -> bytes:
    return source[:m.start] + m.replacement.encode() + source[m.end:]


def revert_edit(original: str, mutated: str, line: int) -> tuple[str, str]:
    """(old, new) texts of the edit that turns `mutated` back into `original`: the changed line,
    widened by neighbouring lines until `old` occurs exactly once in the mutated file."""
    orig_lines = original.splitlines(keepends=True)
    mut_lines = mutated.splitlines(keepends=True)
    if len(orig_lines) != len(mut_lines):
        raise ValueError("mutations never change the number of lines")
    lo = hi = line - 1
    grow_down = True
    while True:
        old = "".join(mut_lines[lo:hi + 1])
        if mutated.count(old) == 1 or (lo == 0 and hi == len(mut_lines) - 1):
            return old, "".join(orig_lines[lo:hi + 1])
        if (grow_down and hi < len(mut_lines) - 1) or lo == 0:
            hi += 1
        else:
            lo -= 1
        grow_down = not grow_down


_FAILED_RE = re.compile(r"^(?:FAILED|SUBFAIL) (\S+?)(?: - (.*))?$", re.M)


def first_failure(output: str) -> tuple[str, str] | None:
    """(node id, message) of the first FAILED line of a pytest run's short summary."""
    match = _FAILED_RE.search(output)
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


def _verify_project(project: Project, cache_dir: Path, log: Any) -> dict[str, Any]:
    repo = cache_dir / "repos" / project.name
    started = time.monotonic()
    sandboxes = [sandbox_for(cache_dir, SandboxParams(command_timeout_s=VERIFY_TIMEOUT_S)) for _ in range(WORKERS)]
    try:
        for sbx in sandboxes:
            sbx.start()
            _copy_repo(repo, sbx)
        full = sandboxes[0].run(PYTEST_CMD, timeout_s=120)
        if full.exit_code != 0:
            raise FetchError(f"the original test suite of {project.name} fails in the sandbox:\n{full.output[-2000:]}")
        baseline = full.output.strip().splitlines()[-1]
        # candidates, shuffled per file with a fixed seed, then interleaved across files
        per_file: list[list[tuple[Mutation, bytes, bytes]]] = []
        for rel in sorted(project.sources):
            original = (repo / rel).read_bytes()
            rng = random.Random(f"{project.name}:{rel}")
            by_kind: dict[str, list[Mutation]] = {}
            for m in candidate_mutations(rel, original):
                by_kind.setdefault(m.kind, []).append(m)
            for kind in sorted(by_kind):
                rng.shuffle(by_kind[kind])
            cands = [m for group in _interleave([by_kind[k] for k in sorted(by_kind)]) for m in group]
            per_file.append([(m, original, apply_mutation(original, m)) for m in cands])
        queue = [c for group in _interleave(per_file) for c in group][:TRIES_PER_PROJECT]

        def check(worker: int, item: tuple[Mutation, bytes, bytes]) -> dict[str, Any] | None:
            m, original, mutated = item
            sbx = sandboxes[worker]
            target = sbx.workspace / m.file
            target.write_bytes(mutated)
            try:
                test = project.sources[m.file]
                res = sbx.run(f"COLUMNS=400 {PYTEST_CMD} -x --tb=no {test}", timeout_s=VERIFY_TIMEOUT_S)
            finally:
                target.write_bytes(original)
            if res.exit_code != 1 or res.timed_out:
                return None
            failure = first_failure(res.output)
            if failure is None:
                return None
            old, new = revert_edit(original.decode(), mutated.decode(), m.line)
            ident = hashlib.sha1(f"{m.file}:{m.start}:{m.end}:{m.replacement}".encode()).hexdigest()[:10]
            return {"id": ident, "file": m.file, "kind": m.kind, "line": m.line, "function": m.function,
                    "test_file": project.sources[m.file], "failing_test": failure[0],
                    "message": failure[1][:400], "old": old, "new": new,
                    "start": m.start, "end": m.end, "replacement": m.replacement,
                    "mutated_sha256": hashlib.sha256(mutated).hexdigest()}

        verified: list[dict[str, Any]] = []
        tried = 0
        with ThreadPoolExecutor(WORKERS) as pool:
            for i in range(0, len(queue), WORKERS):
                if len(verified) >= VERIFIED_PER_PROJECT:
                    break
                batch = queue[i:i + WORKERS]
                tried += len(batch)
                for result in pool.map(check, range(len(batch)), batch):
                    if result is not None:
                        verified.append(result)
        verified = sorted(verified[:VERIFIED_PER_PROJECT], key=lambda r: (r["file"], r["line"], r["id"]))
        log(f"{project.name}: {len(verified)} verified bugs of {tried} mutations tried "
            f"({time.monotonic() - started:.0f}s); original suite: {baseline}")
        return {"version": project.version, "sha256": project.sha256, "test_paths": list(project.test_paths),
                "baseline": re.sub(r" in [0-9.]+s.*$", "", baseline), "mutations": verified}
    finally:
        for sbx in sandboxes:
            sbx.close()


def _interleave(groups: list[list[Any]]) -> list[list[Any]]:
    out = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.append([g[i] for g in groups if i < len(g)])
    return out


def _copy_repo(repo: Path, sandbox: Sandbox) -> None:
    """Copy a cached repository into the sandbox's (empty) /workspace, owned by the sandbox uid."""
    ws = sandbox.workspace
    shutil.copytree(repo, ws, symlinks=True, dirs_exist_ok=True)
    uid = sandbox.host_uid
    for dirpath, dirnames, filenames in os.walk(ws):
        os.chown(dirpath, uid, uid)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


# ----------------------------------------------------------------------------- helpers
def _run(argv: list[str], **kwargs: Any) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise FetchError(f"{' '.join(argv)} failed (exit {result.returncode}): {(result.stderr or result.stdout)[-1500:]}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _make_world_readable(top: Path) -> None:
    for dirpath, _dirs, files in os.walk(top):
        os.chmod(dirpath, 0o755)
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


def _replace_dir(src: Path, dest: Path) -> None:
    if dest.exists():
        old = dest.with_name(f".old-{dest.name}-{os.getpid()}")
        os.replace(dest, old)
        os.replace(src, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dest)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentworld.domains.swe.repos", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download, verify and prepare the SWE projects and bug catalogue")
    f.add_argument("--cache-dir", type=Path, default=None)
    sub.add_parser("where", help="print the cache directory")
    args = parser.parse_args(argv)
    if args.command == "where":
        print(default_cache_dir())
        return 0
    try:
        print(fetch(args.cache_dir))
    except FetchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
