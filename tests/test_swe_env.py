"""SWE env on the real backend: PyPI projects as git repositories, real pytest, the bubblewrap sandbox."""

from __future__ import annotations

import json
import os
import random
import socket
import tempfile
from pathlib import Path

import pytest

from agentworld.domains.swe import repos as swe_repos
from agentworld.domains.swe.env import (
    DOMAIN,
    MAX_OBS_CHARS,
    SYSTEM_PROMPT,
    SweEnv,
    probe,
    swe_policy,
    system_probe,
    truncate,
)
from agentworld.envs.behaviour import POLICY_NAMES
from agentworld.envs.sandbox import uid_process_count

AVAILABLE, REASON = system_probe()
pytestmark = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"swe env unavailable: {REASON}")


@pytest.fixture(scope="module")
def cache() -> Path:
    swe_repos.fetch(log=lambda *_: None)  # idempotent; builds the cache if `make setup` did not
    return swe_repos.default_cache_dir()


@pytest.fixture(scope="module")
def env(cache):
    swe = SweEnv(test_timeout_s=30)
    yield swe
    swe.close()


def _task(env: SweEnv, project: str, index: int = 0):
    return env.tasks[project][index]


def test_probe_and_catalogue(cache):
    ok, reason = probe()
    assert ok, reason
    catalogue = swe_repos.load_catalogue(cache)
    assert set(catalogue["projects"]) == set(swe_repos.PROJECTS)
    for name, entry in catalogue["projects"].items():
        assert len(entry["mutations"]) >= 10, name
        assert entry["baseline"].endswith("passed") or "passed" in entry["baseline"]
    assert DOMAIN == "swe" and "world model" in SYSTEM_PROMPT


def test_fetch_is_idempotent_and_hashes_pinned(cache):
    before = swe_repos.catalogue_path(cache).stat().st_mtime_ns
    swe_repos.fetch(cache, log=lambda *_: None)
    assert swe_repos.catalogue_path(cache).stat().st_mtime_ns == before
    for project in swe_repos.PROJECTS.values():
        assert swe_repos._sha256(cache / "sdists" / project.sdist) == project.sha256


def test_reset_step_protocol(env):
    obs, info = env.reset(seed=11)
    assert "Bug report for" in obs and env.task.setup["failing_test"] in obs
    json.dumps(info)
    assert env.task.domain == "swe" and len(env.task.solution) == 3
    obs, reward, terminated, truncated, info = env.step("ls")
    assert ".git/" in obs.splitlines() and reward == 0.0 and not terminated and not truncated
    json.dumps(info)
    assert info["action_type"] == "ls" and info["exit_code"] == 0
    obs, *_ = env.step("git diff")
    assert obs.startswith("diff --git a/") and env.task.setup["file"] in obs
    obs, *_ = env.step(f"view {env.task.setup['file']} 1-3")
    assert obs.splitlines()[0].startswith("     1\t")
    obs, *_ = env.step(f"search def {env.task.setup['file']}")
    assert all(":" in line for line in obs.splitlines()) and len(obs) <= MAX_OBS_CHARS


def test_same_seed_same_task_and_options_task(env):
    _, a = env.reset(seed=5)
    _, b = env.reset(seed=5)
    assert a == b
    task = _task(env, "toolz", 1)
    env.reset(options={"task": task})
    assert env.task == task


@pytest.mark.parametrize("project", ["inflection", "toolz", "tabulate"])
def test_scripted_solution_solves(env, project):
    task = _task(env, project, 2)
    env.reset(options={"task": task})
    for i, action in enumerate(task.solution):
        obs, reward, terminated, _, info = env.step(action)
        if i == 0:
            assert obs.startswith(f"Edited {task.setup['file']}")
        if i == 1:
            assert obs.splitlines()[-1].endswith("passed"), obs
    assert terminated and reward == 1.0 and info["solved"]
    assert " in 0." not in obs and "passed" in obs.splitlines()[-1]


def test_submit_without_fix_fails(env):
    task = _task(env, "inflection", 3)
    env.reset(options={"task": task})
    obs, reward, terminated, _, info = env.step("submit")
    assert terminated and reward == 0.0 and "failed" in obs.splitlines()[-1]
    with pytest.raises(RuntimeError):
        env.step("ls")


def test_errors_are_real_backend_errors(env):
    env.reset(options={"task": _task(env, "inflection", 0)})
    path = env.task.setup["file"]
    assert env.step("view nope.py")[0] == "cat: nope.py: No such file or directory"
    assert env.step("ls nodir")[0] == "ls: cannot access 'nodir': No such file or directory"
    assert env.step("view inflection")[0] == "cat: inflection: Is a directory"
    assert env.step("search '\\('")[0] == "grep: Unmatched ( or \\("
    obs = env.step("run_tests test_inflection.py::test_does_not_exist")[0]
    assert "ERROR: not found:" in obs and "test_does_not_exist" in obs
    obs = env.step("edit " + json.dumps({"path": path, "old": "no such text here", "new": "x"}))[0]
    assert obs.startswith("edit: the old text was not found in")
    obs = env.step("edit " + json.dumps({"path": path, "old": "return", "new": "return"}))[0]
    assert "times in" in obs
    assert env.step('edit {"path": 1')[0].startswith("error: edit expects a JSON object")
    assert env.step("frobnicate x")[0].startswith("error: unknown action 'frobnicate'")
    assert env.step('search "open')[0] == "error: cannot parse the arguments of search: No closing quotation"
    assert env.step("view x 9-2")[0].startswith("error: invalid line range")
    assert env.step("git status")[0].startswith("error: unsupported git command")
    obs, reward, terminated, _, info = env.step("git diff")
    assert not terminated and info["action_type"] == "git_diff"


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_policies_play(env, policy_name):
    rng = random.Random(7)
    obs, _ = env.reset(seed=21)
    policy = swe_policy(policy_name, env.task)
    history: list[tuple[str, str]] = []
    for _ in range(6):
        action = policy.act(obs, history, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        json.dumps(info)
        assert isinstance(obs, str) and obs and len(obs) <= MAX_OBS_CHARS
        history.append((action, obs))
        if terminated:
            break
    kinds = {json.dumps(a) for a, _ in history}
    assert len(kinds) >= 2
    if policy_name == "erroneous":
        assert any(o.startswith(("error:", "edit:", "cat:", "ls:", "grep:", "ERROR")) or "ERROR" in o
                   for _, o in history)


def test_determinism(env):
    task = _task(env, "tabulate", 4)
    actions = ["ls", "git diff", f"view {task.setup['file']} 100-130", f"search {task.setup['function']}",
               f"run_tests {task.setup['failing_test']}", task.solution[0], "git diff", "view missing.py"]
    runs = []
    for _ in range(2):
        env.reset(options={"task": task})
        runs.append([env.step(a)[0] for a in actions])
    assert runs[0] == runs[1]
    assert "0x7f" not in "".join(runs[0]) or "0x7f0000000000" in "".join(runs[0])


def test_truncation_keeps_summary():
    text = "x" * 10_000 + "\n3 failed, 10 passed"
    cut = truncate(text, middle=True)
    assert len(cut) <= MAX_OBS_CHARS and cut.endswith("3 failed, 10 passed") and "characters truncated" in cut
    assert len(truncate("y" * 9000)) <= MAX_OBS_CHARS


def test_close_leaves_nothing(cache):
    before = set(Path(tempfile.gettempdir()).glob(f"agentworld-sbx-{os.getpid()}-*"))
    swe = SweEnv(projects=["inflection"])
    swe.reset(seed=1)
    swe.step("run_tests test_inflection.py::test_camelize")
    root = swe._sandbox.workspace.parent
    uid = swe._sandbox.host_uid
    swe.close()
    assert not root.exists()
    assert uid == os.getuid() or uid_process_count(uid) == 0
    assert set(Path(tempfile.gettempdir()).glob(f"agentworld-sbx-{os.getpid()}-*")) == before


def test_hostile_actions_stay_contained(cache, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("intact")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    swe = SweEnv(projects=["inflection"], test_timeout_s=8)
    try:
        swe.reset(options={"task": swe.tasks["inflection"][0]})
        # run_tests arguments are never a shell
        obs = swe.step("run_tests '; rm -rf / --no-preserve-root'")[0]
        assert "not found" in obs
        obs = swe.step("run_tests /work")[0]
        assert "not found: /work" in obs
        payload = f'''import pytest
import os, socket, subprocess
_out = []
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    _out.append("host port: connected")
except OSError as err:
    _out.append("host port: " + err.strerror)
try:
    socket.getaddrinfo("pypi.org", 443)
    _out.append("dns: resolved")
except OSError as err:
    _out.append("dns: failed")
for _p in ("/work", "/root", "{sentinel}"):
    _out.append(_p + ": " + str(os.path.exists(_p)))
for _p in ("/usr/evil.txt", "/evil.txt", "/opt/pytest/evil.txt"):
    try:
        open(_p, "w").write("x")
        _out.append(_p + ": written")
    except OSError as err:
        _out.append(_p + ": " + err.strerror)
subprocess.run("rm -rf --no-preserve-root / 2>/dev/null", shell=True)
open("/workspace/hostile.txt", "w").write("\\n".join(_out) + "\\n")
subprocess.run(":(){{ :|:& }};:", shell=True, executable="/bin/bash")
'''
        obs = swe.step("edit " + json.dumps({"path": "test_inflection.py", "old": "import pytest\n", "new": payload}))[0]
        assert obs.startswith("Edited test_inflection.py")
        obs, _, _, _, info = swe.step("run_tests test_inflection.py")
        assert info["timed_out"] or "fork: retry: Resource temporarily unavailable" in obs, obs
        report = swe.step("view hostile.txt")[0]
        assert "host port: Connection refused" in report or "host port: Network is unreachable" in report
        assert "dns: failed" in report
        assert "/work: False" in report and "/root: False" in report and f"{sentinel}: False" in report
        assert "/usr/evil.txt: Read-only file system" in report
        assert "/evil.txt: written" not in report and "/opt/pytest/evil.txt: written" not in report
        assert sentinel.read_text() == "intact" and Path("/work/main/agentworld").is_dir()
        assert not Path("/usr/evil.txt").exists() and not Path("/evil.txt").exists()
        assert (swe.cache_dir / "pytest-lib" / "pytest").is_dir()
        uid = swe._sandbox.host_uid
        assert uid == os.getuid() or uid_process_count(uid) == 0  # the fork bomb died with its step
        # the env keeps working: a new episode solves
        task = swe.tasks["inflection"][1]
        swe.reset(options={"task": task})
        for action in task.solution:
            obs, reward, terminated, _, _ = swe.step(action)
        assert terminated and reward == 1.0, obs
    finally:
        swe.close()
        server.close()
