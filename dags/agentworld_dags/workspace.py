"""A DAG run's workspace is a DVC experiment of the project.

Each run gets runs/airflow/<run>/ as a git worktree of the project (its HEAD plus the
checkout's uncommitted changes to tracked files) that shares the project's DVC cache. Every
stage task runs `dvc repro --force --single-item <stage>` there, so DVC records the stage in the
worktree's dvc.lock and caches its outputs, exactly as `make demo` does in the project; the last
task saves the run with `dvc exp save`, so `dvc exp show` in the project lists the run beside
the project's own results, and `dvc exp apply <name>` brings its outputs into the checkout.

What it costs: one DVC lock per workspace, so two stages of one run never run DVC at the same
time (tasks of a run queue on a file lock here; separate runs have separate worktrees and run in
parallel). Delete an old run with `git worktree remove runs/airflow/<run>`.

Shared remote: the worktree inherits the project's git-ignored .dvc/config.local (where
`scripts/prod_stack.sh` adds the object-store remote), and with AGENTWORLD_DVC_REMOTE set the
saving task also pushes the run's outputs there, so another machine can `dvc exp pull` the run.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentworld.config import ParamsError

#: The stages a run has reproduced, one DVC target per line, in its workspace (what `save` saves).
STAGES_FILE = Path("reports") / "airflow" / "dvc_stages.txt"
#: The DVC remote a saved run's outputs are pushed to (unset in the embedded default: no push).
PUSH_REMOTE_ENV = "AGENTWORLD_DVC_REMOTE"


class WorkspaceError(ParamsError):
    """The project cannot give a run a DVC workspace (not a git+DVC checkout): fails once, no retry."""


def _git(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False, **kwargs)


def _dvc() -> list[str]:
    return [sys.executable, "-m", "dvc"]


def create_workspace(project: Path, root: Path) -> None:
    """runs/airflow/<run>/ as a git worktree of `project` with its uncommitted tracked changes,
    using the project's DVC cache. Does nothing when `root` already is one (a retried task)."""
    if (root / ".git").exists():
        return
    if not (project / ".dvc").is_dir() or _git(["rev-parse", "HEAD"], project).returncode != 0:
        raise WorkspaceError(f"{project} is not a git+DVC checkout of the project (no commit or no .dvc/): Airflow "
                             f"runs are DVC experiments of it; point AGENTWORLD_HOME at a `git clone` of the project")
    root.parent.mkdir(parents=True, exist_ok=True)
    added = _git(["worktree", "add", "--detach", str(root), "HEAD"], project, text=True)
    if added.returncode != 0:
        raise RuntimeError(f"git worktree add {root}: {added.stderr.strip()}")
    try:
        diff = _git(["diff", "HEAD", "--binary"], project).stdout
        if diff:
            applied = _git(["apply", "--whitespace=nowarn"], root, input=diff)
            if applied.returncode != 0:
                raise RuntimeError(f"{root}: the checkout's uncommitted changes do not apply: {applied.stderr.decode()}")
        cache = subprocess.run([*_dvc(), "cache", "dir"], cwd=project, capture_output=True, text=True, check=True)
        local_config = project / ".dvc" / "config.local"  # the project's own remotes (git-ignored)
        if local_config.exists():
            shutil.copy2(local_config, root / ".dvc" / "config.local")
        subprocess.run([*_dvc(), "config", "--local", "cache.dir", cache.stdout.strip()], cwd=root, check=True,
                       capture_output=True)
    except BaseException:
        # Half a workspace must not survive: a retry would take it for a finished one.
        _git(["worktree", "remove", "--force", str(root)], project)
        raise


@contextmanager
def _dvc_lock(root: Path) -> Iterator[None]:
    """One DVC command at a time in a workspace (DVC itself refuses a second one)."""
    path = root / ".dvc" / "tmp" / "airflow.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def experiment_name(root: Path) -> str:
    """The DVC experiment the run in workspace `root` is saved as (a valid git ref name)."""
    return f"airflow-{root.name}".replace("..", ".")


def stage_env(root: Path, project: Path, experiment: str, extra: dict[str, str]) -> dict[str, str]:
    """The environment `dvc repro` runs a stage in: the workspace's code first on the path,
    MLflow and model caches of the project (AGENTWORLD_HOME), the experiment's name for lineage."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, **extra,
            "AGENTWORLD_HOME": str(project), "AGENTWORLD_DVC_EXPERIMENT": experiment,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


def repro(root: Path, target: str, env: dict[str, str], preexec_fn=None) -> int:
    """`dvc repro --force --single-item TARGET` in the workspace; Airflow decides what runs, so
    DVC neither skips the stage nor restores it from its run cache. Returns the exit status."""
    argv = [*_dvc(), "repro", "--force", "--single-item", target]
    with _dvc_lock(root):
        print("running in", root, ":", " ".join(argv[2:]), flush=True)
        done = subprocess.run(argv, cwd=root, env=env, preexec_fn=preexec_fn)
        if done.returncode == 0:
            stages = root / STAGES_FILE
            stages.parent.mkdir(parents=True, exist_ok=True)
            with stages.open("a") as handle:
                handle.write(target + "\n")
    return done.returncode


def save(root: Path, experiment: str) -> list[str]:
    """`dvc exp save` of the stages the run reproduced, as `experiment`; returns those stages."""
    path = root / STAGES_FILE
    stages = list(dict.fromkeys(path.read_text().split())) if path.exists() else []
    if not stages:
        raise RuntimeError(f"{root}: no stage was reproduced, nothing to save as experiment {experiment}")
    with _dvc_lock(root):
        saved = subprocess.run([*_dvc(), "exp", "save", "--force", "-n", experiment, *stages], cwd=root,
                               capture_output=True, text=True)
    if saved.returncode != 0:
        raise RuntimeError(f"dvc exp save {experiment} in {root}: {saved.stdout}{saved.stderr}")
    print(saved.stdout.strip(), flush=True)
    remote = os.environ.get(PUSH_REMOTE_ENV)
    if remote:
        with _dvc_lock(root):
            pushed = subprocess.run([*_dvc(), "push", "-r", remote, *stages], cwd=root, capture_output=True, text=True)
        if pushed.returncode != 0:
            raise RuntimeError(f"dvc push -r {remote} in {root}: {pushed.stdout}{pushed.stderr}")
        print(f"pushed the outputs of {', '.join(stages)} to DVC remote {remote}", flush=True)
    return stages
