"""OS env (system administration on a seeded server) against the real bubblewrap sandbox."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from agentworld.config import SandboxParams
from agentworld.domains.os.env import (
    MAX_OBSERVATION_CHARS,
    SYSTEM_PROMPT,
    OsEnv,
    factory,
    os_policy,
    probe,
    truncate,
)
from agentworld.domains.os.tasks import TEMPLATES, answer_matches, build_world, generate_task, render_world
from agentworld.envs.base import Task
from agentworld.envs.behaviour import POLICY_NAMES

AVAILABLE, REASON = probe()
needs_sandbox = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"os env unavailable: {REASON}")
PARAMS = SandboxParams(command_timeout_s=3, file_size_mb=8, max_processes=48)
PROJECT = Path(__file__).resolve().parents[1]
# One template per category and both kinds (answer / state); all 37 are exercised by a dev script.
SOLVE = ("group_members", "add_to_group", "fix_secret_mode", "setuid_files", "signal_status", "worker_count",
         "enable_service", "unit_for_binary", "largest_dir", "clean_archive_logs", "failed_logins",
         "package_owner", "fix_cron_user", "job_at_time")


@pytest.fixture(scope="module")
def env():
    os_env = OsEnv(PARAMS)
    yield os_env
    os_env.close()


@pytest.fixture()
def host_marker():
    with tempfile.TemporaryDirectory(prefix="agentworld-os-host-") as tmp:
        marker = Path(tmp) / "marker.txt"
        marker.write_text("host data\n")
        yield marker
        assert marker.read_text() == "host data\n"
    assert (PROJECT / "pyproject.toml").is_file()


# ---------------------------------------------------------------- tasks (no sandbox)
def test_templates_tasks_and_answers():
    assert len(TEMPLATES) >= 25
    assert {t.category for t in TEMPLATES.values()} >= {"users", "permissions", "processes", "services", "disk",
                                                       "logs", "packages", "cron"}
    assert generate_task(5) == generate_task(5)
    tasks = [generate_task(seed) for seed in range(120)]
    assert len({t.task_id for t in tasks}) >= 115 and len({t.setup["template"] for t in tasks}) >= 25
    for task in tasks:
        assert task.domain == "os" and task.solution and (task.setup["answer"] or task.setup["check"])
        json.dumps(task.setup)
    assert render_world(build_world(9))["files"] == render_world(build_world(9))["files"]
    spec = {"kind": "set", "values": ["alice", "bob"]}
    assert answer_matches("bob, alice", spec) and answer_matches("'alice bob'", spec) and not answer_matches("alice", spec)
    assert answer_matches(" 42. ", {"kind": "number", "values": [42]}) and not answer_matches("4 2", {"kind": "number", "values": [42]})
    assert answer_matches("/Bin/Bash", {"kind": "text", "values": ["/bin/bash"]})
    assert truncate("x" * 5000).startswith("x" * MAX_OBSERVATION_CHARS) and len(truncate("x" * 5000)) < 4100
    assert "world model" in SYSTEM_PROMPT and "exactly" in SYSTEM_PROMPT


# ---------------------------------------------------------------- protocol
@needs_sandbox
def test_reset_step_protocol(env):
    observation, info = env.reset(seed=11)
    assert observation.startswith(env.task.instruction) and observation.endswith("root@server:~#")
    json.dumps(info)
    obs, reward, terminated, truncated, info = env.step("id; hostname; pwd")
    assert obs == "uid=0(root) gid=0(root) groups=0(root)\nserver\n/root\n"
    assert (reward, terminated, truncated) == (0.0, False, False) and info["exit_code"] == 0
    json.dumps(info)
    obs, _, _, _, info = env.step("cd /etc/systemd/system && ls *.service | wc -l")
    assert int(obs) >= 5 and info["cwd"] == "/etc/systemd/system"
    obs, reward, terminated, _, info = env.step("submit")
    assert (obs, terminated, info["ended_by_agent"]) == ("", True, True)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("ls")
    with pytest.raises(ValueError, match="os Task"):
        env.reset(options={"task": Task(task_id="x", domain="web", instruction="click")})


@needs_sandbox
@pytest.mark.parametrize("name", SOLVE)
def test_scripted_solution_solves(env, name):
    task = generate_task(21, name)
    env.reset(options={"task": task})
    for action in task.solution:
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and not truncated
        if terminated:
            break
    assert terminated and reward == 1.0 and info["solved"], f"{name}: {task.solution}"


@needs_sandbox
def test_wrong_answer_and_unsolved_state(env):
    task = generate_task(4, "user_uid")
    env.reset(options={"task": task})
    obs, reward, terminated, _, info = env.step("answer 12345")
    assert (obs, reward, terminated, info["solved"], info["answer"]) == ("", 0.0, True, False, "12345")
    task = generate_task(4, "enable_service")
    env.reset(options={"task": task})
    assert env.step("ls /etc/systemd/system")[1:3] == (0.0, False)
    assert env.step("exit")[1:3] == (0.0, True)


@needs_sandbox
def test_errors_are_real_backend_errors(env):
    env.reset(seed=2)
    cases = {
        "id nosuchuser": ("id: ‘nosuchuser’: no such user\n", 1),
        "usermod -aG nogrp root": ("usermod: group 'nogrp' does not exist\n", 6),
        "useradd root": ("useradd: user 'root' already exists\n", 9),
        "cat /etc/shadow": ("cat: /etc/shadow: No such file or directory\n", 1),
        "kill -9 99999": ("bash: line 1: kill: (99999) - No such process\n", 1),
        "awk -F: '{print $1' /etc/passwd": ("awk: line 2: missing } near end of file\n", 2),
        "sl /etc": ("bash: line 1: sl: command not found\n", 127),
    }
    for action, (text, code) in cases.items():
        obs, _, _, _, info = env.step(action)
        assert (obs, info["exit_code"]) == (text, code), action
    obs, *_ = env.step("dpkg -s nopkg")
    assert obs.startswith("dpkg-query: package 'nopkg' is not installed")
    obs, *_ = env.step("systemctl status nginx")
    assert "System has not been booted with systemd" in obs


@needs_sandbox
@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_policies_play_real_episodes(env, policy_name):
    observation, _ = env.reset(seed=31)
    policy, rng, history, codes = os_policy(policy_name, env.task), random.Random(3), [], []
    for _ in range(8):
        action = policy.act(observation, history, rng)
        observation, reward, terminated, truncated, info = env.step(action)
        json.dumps(info)
        history.append((action, observation))
        codes.append(info.get("exit_code"))
        if terminated:
            break
    assert len(history) >= 2 and all(isinstance(o, str) for _, o in history)
    assert any(o for _, o in history), "no step printed anything"
    if policy_name == "scripted":
        assert terminated and reward == 1.0
    if policy_name == "erroneous":
        assert any(code not in (0, None) for code in codes), history


def test_policies_differ_and_are_deterministic():
    task = generate_task(12, "failed_logins")
    acts = {}
    for name in POLICY_NAMES:
        runs = []
        for _ in range(2):
            policy, rng = os_policy(name, task), random.Random(0)
            runs.append([policy.act("see /etc/cron.d/db-backup", [], rng) for _ in range(30)])
        assert runs[0] == runs[1]
        acts[name] = runs[0]
    assert acts["scripted"][0] == task.solution[0] and set(task.solution) <= set(acts["scripted"])
    assert len(set(acts["exploratory"])) > 10
    assert len(set(acts["erroneous"]) - set(acts["exploratory"])) > 5


@needs_sandbox
def test_same_seed_same_episode():
    actions = ["ls -la --time-style=full-iso /etc /var/log /opt/app /srv/data /run", "dpkg -l | tail -n 4",
               "ps -eo pid,ppid,user,comm", "id nosuchuser", "find /opt /srv -type f | sort | xargs md5sum | md5sum",
               "du -sk /srv/data/*", "usermod -aG adm root && getent group adm", "cat /etc/group",
               "ls -l --time-style=full-iso /run /etc/cron.d"]
    runs = []
    for _ in range(2):
        os_env = factory(PARAMS)
        try:
            observation, info = os_env.reset(seed=777)
            runs.append([observation, info["task_id"], *(os_env.step(a)[0] for a in actions)])
        finally:
            os_env.close()
    assert runs[0] == runs[1]
    assert "2024-01-15 09:30:00" in runs[0][2]


@needs_sandbox
def test_observations_are_capped(env):
    env.reset(seed=1)
    obs, *_, info = env.step("cat /srv/data/*/*/* | head -c 7000")
    assert obs.endswith("characters ...]\n") and len(obs) < MAX_OBSERVATION_CHARS + 100 and info["truncated"]


@needs_sandbox
def test_close_leaves_nothing_behind():
    before = set(Path(tempfile.gettempdir()).glob(f"agentworld-sbx-{os.getpid()}-*"))
    os_env = OsEnv(PARAMS)
    os_env.reset(seed=5)
    root = os_env.sandbox.workspace.parent
    os_env.step("sleep 100 & echo started")
    os_env.close()
    assert not root.exists()
    assert set(Path(tempfile.gettempdir()).glob(f"agentworld-sbx-{os.getpid()}-*")) == before
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    names = [Path(f"/proc/{c}/comm").read_text().strip() for c in children if Path(f"/proc/{c}").exists()]
    assert "bwrap" not in names and "sleep" not in names


# ---------------------------------------------------------------- hostile actions
def _still_works(env):
    obs, *_, info = env.step("echo ok")
    assert obs == "ok\n" and info["exit_code"] == 0


@needs_sandbox
def test_rm_rf_root(env, host_marker):
    env.reset(seed=8)
    obs, *_, info = env.step("rm -rf / --no-preserve-root")  # read-only /usr and /proc: errors, then the timeout
    assert isinstance(obs, str) and (info["exit_code"] != 0 or info["timed_out"])
    _still_works(env)
    env.reset(seed=8)
    assert env.step("ls /etc/passwd")[0] == "/etc/passwd\n"


@needs_sandbox
def test_fork_bomb(env, host_marker):
    env.reset(seed=9)
    obs, *_, info = env.step(":(){ :|:& };: ; sleep 1; ps -e | wc -l")
    assert isinstance(obs, str)  # RLIMIT_NPROC stops it; the step's PID namespace dies with it
    assert len(os.listdir("/proc")) < 5000
    _still_works(env)


@needs_sandbox
def test_dd_fill_disk(env, host_marker):
    env.reset(seed=10)
    obs, *_, info = env.step("dd if=/dev/zero of=/var/fill bs=1M count=64")
    assert "File size limit exceeded" in obs or "No space left" in obs or info["exit_code"] != 0
    if env.sandbox._mounted:  # a size-capped tmpfs: filling it ends with ENOSPC, the host never sees it
        obs, *_ = env.step("i=0; while [ $i -lt 20 ] && dd if=/dev/zero of=/srv/f$i bs=1M count=7 2>/dev/null; "
                           "do i=$((i+1)); done; echo stopped at $i; df -h /srv | tail -n 1")
        assert "stopped at" in obs and "stopped at 20" not in obs
    _still_works(env)
    env.step("rm -f /srv/f* /var/fill")
    _still_works(env)


@needs_sandbox
def test_host_secrets_are_invisible(env, host_marker):
    env.reset(seed=12)
    obs, *_ = env.step(f"cat /etc/shadow {host_marker}; ls /work; cat {PROJECT}/pyproject.toml; ls -A /root")
    assert "No such file or directory" in obs and "host data" not in obs and "[project]" not in obs
    assert obs.rstrip().endswith(".bashrc\n.profile")


@needs_sandbox
def test_no_network(env, host_marker):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    try:
        env.reset(seed=13)
        obs, *_ = env.step(f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\"; "
                           "curl -sS -m 2 http://example.com/; getent hosts example.com || echo no-dns")
        assert "ConnectionRefusedError" in obs and "Could not resolve host" in obs and "no-dns" in obs
        assert not accepted
        with socket.create_connection(("127.0.0.1", port), timeout=2):  # the host server is still alive
            pass
        thread.join(timeout=2)
        assert accepted
    finally:
        server.close()
        for conn, _ in accepted:
            conn.close()
    _still_works(env)


@needs_sandbox
def test_cannot_kill_host_processes(env, host_marker):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        env.reset(seed=14)
        obs, *_ = env.step(f"kill -9 {sleeper.pid}; pkill -9 sleep; pkill -9 -f pytest; kill -9 -1; echo after")
        assert sleeper.poll() is None
        _still_works(env)
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_sandbox
def test_cannot_write_outside(env, host_marker):
    env.reset(seed=15)
    name = f"pwned-{uuid.uuid4().hex[:8]}"
    obs, *_ = env.step(f"touch /usr/bin/{name}; echo x > {PROJECT}/{name}; echo x >> {host_marker}; "
                       f"ln -s /etc/passwd /proc/{name}; mkdir /{name}")
    assert "Read-only file system" in obs
    assert not (PROJECT / name).exists() and not Path(f"/usr/bin/{name}").exists() and not Path(f"/{name}").exists()
    _still_works(env)
