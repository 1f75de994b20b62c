"""The sandbox contains hostile commands, using the real bubblewrap (no mocks).

Every attack runs inside one episode; afterwards the host's marker files must be unchanged,
the observation must be a capped str with a non-zero exit code, and the next command in the
same episode must still work.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from agentworld.config import SandboxParams
from agentworld.envs.sandbox import (
    TIMEOUT_EXIT,
    Sandbox,
    SandboxError,
    sandbox_available,
    sweep_stale,
    uid_process_count,
)

AVAILABLE, REASON = sandbox_available()
# Outside CI a host without user namespaces (e.g. Docker's default seccomp) skips; in CI the
# sandbox must run, so there an unavailable sandbox fails these tests instead of hiding them.
pytestmark = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"sandbox unavailable: {REASON}")

PARAMS = SandboxParams(command_timeout_s=1.5, output_cap_bytes=4096, max_processes=32, memory_mb=256, file_size_mb=4)
PROJECT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def sandbox():
    with Sandbox(PARAMS) as sb:
        yield sb


@pytest.fixture()
def host_markers(tmp_path):
    """Files on the host that no sandboxed command may change or read."""
    marker = tmp_path / "marker.txt"
    marker.write_text("host marker\n")
    secret_home = Path.home() / f".agentworld-test-secret-{uuid.uuid4().hex[:8]}"
    secret_home.write_text("TOP-SECRET-HOME\n")
    try:
        yield {"marker": marker, "secret_home": secret_home, "dir": tmp_path}
    finally:
        secret_home.unlink(missing_ok=True)


def assert_host_untouched(markers: dict[str, Path]) -> None:
    assert markers["marker"].read_text() == "host marker\n"
    assert markers["secret_home"].read_text() == "TOP-SECRET-HOME\n"
    assert sorted(p.name for p in markers["dir"].iterdir()) == ["marker.txt"]
    assert (PROJECT / "agentworld" / "envs" / "sandbox.py").is_file()
    assert Path("/usr/bin/ls").is_file()


def assert_still_works(sb: Sandbox) -> None:
    result = sb.run("echo still-alive; pwd")
    assert result.exit_code == 0
    assert result.output == "still-alive\n/workspace\n"


def _uid_processes(uid: int) -> int:
    return uid_process_count(uid)


# ---------------------------------------------------------------- containment
def test_rm_rf_root_leaves_host_untouched(host_markers):
    with Sandbox(PARAMS.model_copy(update={"command_timeout_s": 20})) as sandbox:
        sandbox.run("echo mine > mine.txt")
        noisy = sandbox.run("rm -rf --no-preserve-root /")  # floods errors: capped and killed
        assert isinstance(noisy.output, str) and len(noisy.output.encode()) <= PARAMS.output_cap_bytes
        assert noisy.exit_code != 0
        quiet = sandbox.run("rm -rf --no-preserve-root / 2>/dev/null")  # runs to the end
        assert quiet.exit_code != 0 and not quiet.timed_out
        assert not (sandbox.workspace / "mine.txt").exists()  # it did wipe its own workspace
        assert_host_untouched(host_markers)
        assert_still_works(sandbox)


def test_fork_bomb_is_contained(sandbox, host_markers):
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _uid_processes(sandbox.host_uid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = sandbox.run("bomb() { bomb | bomb & }; bomb; sleep 30")
    finally:
        stop.set()
        watcher.join()
    assert result.exit_code != 0 and result.timed_out
    assert "Resource temporarily unavailable" in result.output
    assert 0 < peak <= PARAMS.max_processes + 2  # bwrap's own processes aside
    assert _uid_processes(sandbox.host_uid) == 0  # the whole PID namespace died with it
    assert_host_untouched(host_markers)
    assert_still_works(sandbox)


def test_no_network(sandbox, host_markers):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        tcp = sandbox.run(f"echo hi > /dev/tcp/127.0.0.1/{port}")
        py = sandbox.run(f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1)\"")
        dns = sandbox.run("getent hosts example.com")  # no resolver inside: a name never leaves the sandbox
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    assert tcp.exit_code != 0 and "Connection refused" in tcp.output
    assert py.exit_code != 0 and "Connection refused" in py.output
    assert dns.exit_code != 0 and dns.output == ""
    assert_host_untouched(host_markers)
    assert_still_works(sandbox)


def test_cannot_write_host_paths(sandbox, host_markers):
    marker, folder = host_markers["marker"], host_markers["dir"]
    result = sandbox.run(f"echo pwned > {marker}; rm -f {marker}; touch {folder}/created {PROJECT}/pwned")
    assert result.exit_code != 0
    assert "No such file or directory" in result.output
    assert not (PROJECT / "pwned").exists()
    assert_host_untouched(host_markers)
    assert_still_works(sandbox)


def test_cannot_read_host_files(sandbox, host_markers):
    result = sandbox.run(f"cat {host_markers['secret_home']} {host_markers['marker']} /etc/shadow; ls /root /work")
    assert result.exit_code != 0
    assert "TOP-SECRET" not in result.output and "host marker" not in result.output
    listing = sandbox.run("ls / /etc /home").output
    assert "root" not in listing.split() and "shadow" not in listing
    assert_host_untouched(host_markers)
    assert_still_works(sandbox)


def test_endless_loop_times_out(sandbox, host_markers):
    started = time.monotonic()
    result = sandbox.run("echo start; while :; do :; done")
    assert result.timed_out and result.exit_code == TIMEOUT_EXIT
    assert result.output == "start\n"
    assert time.monotonic() - started < PARAMS.command_timeout_s + 2
    assert_host_untouched(host_markers)
    assert_still_works(sandbox)


@pytest.mark.parametrize("command", ["head -c 100000000 /dev/zero | tr '\\0' a", "yes"])
def test_huge_output_is_capped(sandbox, host_markers, command):
    result = sandbox.run(command)
    assert isinstance(result.output, str)
    assert len(result.output.encode()) == PARAMS.output_cap_bytes
    assert result.truncated and result.exit_code != 0
    assert result.duration_s < PARAMS.command_timeout_s
    assert_host_untouched(host_markers)
    assert_still_works(sandbox)


def test_memory_and_file_size_limits(sandbox):
    mem = sandbox.run("python3 -c 'x = bytearray(1024 * 2**20)'")
    assert mem.exit_code != 0 and "MemoryError" in mem.output
    big = sandbox.run("head -c 10M /dev/zero > big.bin")
    assert big.exit_code != 0 and "File size limit exceeded" in big.output
    assert (sandbox.workspace / "big.bin").stat().st_size == PARAMS.file_size_mb * 2**20
    assert_still_works(sandbox)


def test_disk_quota_when_mountable():
    with Sandbox(PARAMS, disk_mb=8) as sb:
        if not sb.disk_capped:
            pytest.skip("no tmpfs quota: neither root nor unprivileged namespaces here")
        result = sb.run("for i in 1 2 3 4; do head -c 3M /dev/zero > f$i || exit 1; done")
        assert result.exit_code != 0 and "No space left on device" in result.output
        assert_still_works(sb)


NON_ROOT_PROBE = """
import os, sys
from agentworld.config import SandboxParams
from agentworld.envs.sandbox import Sandbox
from agentworld.domains.terminal.env import TerminalEnv
from agentworld.domains.terminal.tasks import generate_task
assert os.getuid() != 0
sb = Sandbox(SandboxParams(command_timeout_s=5), disk_mb=8)
sb.start()
sb.write_files({"a/seed.txt": "hello"})
full = sb.run("cat a/seed.txt; for i in 1 2 3 4; do head -c 3M /dev/zero > f$i || exit 1; done")
seen = sorted(os.listdir(sb.workspace))
host_dir = sb._host_dir
capped = sb.disk_capped
sb.close()
env = TerminalEnv(SandboxParams(command_timeout_s=5))
task = generate_task(3, "count_lines")
env.reset(seed=3, options={"task": task})
for action in task.solution:
    reward = env.step(action)[1]
env.close()
print(capped, full.exit_code != 0 and "No space left on device" in full.output, full.output.startswith("hello"),
      "f1" in seen and "a" in seen, not host_dir.exists(), reward)
"""


def test_disk_is_capped_without_root_too():
    """Not root: a holder process mounts the episode's tmpfs in its own user and mount namespace,
    the host works through /proc/<holder>/root and commands enter it before bwrap. Run here as
    `nobody` with the system python3 (the project's interpreter may sit in a root-only home)."""
    import subprocess
    import sys

    system = "/usr/bin/python3"
    if os.getuid() != 0 or not shutil.which("setpriv") or not os.path.exists(system):
        pytest.skip("needs root (to switch to nobody), setpriv and /usr/bin/python3")
    same_abi = subprocess.run([system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    if same_abi.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip(f"/usr/bin/python3 is not Python {sys.version_info[:2]}: the venv's packages cannot load")
    from agentworld.envs.sandbox import traversable_by_others

    site = next(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))
    project = str(Path(__file__).resolve().parents[1])
    if not all(traversable_by_others(Path(p)) for p in (project, site)):
        pytest.skip("the checkout or its packages are not readable by other users (nobody cannot import them)")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": f"{project}:{site}", "TMPDIR": "/tmp"}
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", system, "-s", "-c",
                           NON_ROOT_PROBE], capture_output=True, text=True, timeout=120, env=env, cwd="/tmp")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"] * 5 + ["1.0"], done.stdout


def test_background_jobs_do_not_outlive_the_step(sandbox):
    result = sandbox.run("sleep 60 & echo started")
    assert result.output == "started\n" and result.duration_s < 1
    assert _uid_processes(sandbox.host_uid) == 0


# ---------------------------------------------------------------- shell state
def test_state_persists_across_steps(sandbox):
    steps = [
        "mkdir -p a/b && cd a/b && echo hi > note.txt",
        "export GREETING=hello; COUNT=3; arr=(x 'y z'); alias ll='ls -1'; say() { echo \"say $1\"; }; umask 027",
        "false",  # a failing step changes nothing
        "sleep 30",  # neither does a killed one
    ]
    for step in steps:
        sandbox.run(step)
    result = sandbox.run('pwd; cat note.txt; echo "$GREETING $COUNT ${arr[1]}"; ll; say it; umask; printenv GREETING')
    assert result.output == "/workspace/a/b\nhi\nhello 3 y z\nnote.txt\nsay it\n0027\nhello\n"
    assert sandbox.cwd() == "/workspace/a/b"


def test_checker_mode_does_not_change_state(sandbox):
    sandbox.run("cd /tmp; export KEEP=1")
    probe = sandbox.run("cd /; export KEEP=2; echo $KEEP", persist=False)
    assert probe.output == "2\n"
    assert sandbox.run("pwd; echo $KEEP").output == "/tmp\n1\n"


def test_realistic_errors_and_identity(sandbox):
    assert sandbox.run("nosuchcmd").output == "bash: line 1: nosuchcmd: command not found\n"
    assert sandbox.run("nosuchcmd").exit_code == 127
    syntax = sandbox.run("if then")
    assert syntax.exit_code == 2 and "syntax error near unexpected token `then'" in syntax.output
    who = sandbox.run("whoami; hostname; echo $HOME; echo err >/dev/stderr")
    assert who.output == "agent\nsandbox\n/home/agent\nerr\n"
    assert sandbox.run("exit 7").exit_code == 7


def test_fingerprint_tracks_changes_only(sandbox):
    sandbox.run("echo a > f.txt; mkdir d")
    before = sandbox.fingerprint()
    sandbox.run("ls -la; cat f.txt; pwd")
    assert sandbox.fingerprint() == before
    for change in ("chmod 600 f.txt", "echo b >> f.txt", "touch d/new", "export Z=1", "cd d", "echo t > /tmp/t"):
        sandbox.run(change)
        after = sandbox.fingerprint()
        assert after != before, change
        before = after


# ---------------------------------------------------------------- lifecycle
def test_close_removes_everything_and_stale_dirs_are_swept():
    base = Path(tempfile.mkdtemp(prefix="aw-sbx-test-"))
    try:
        base.chmod(0o711)
        sb = Sandbox(PARAMS, base_dir=base)
        sb.start()
        sb.run("echo x > f")
        root = sb.workspace.parent
        sb.close()
        assert not root.exists() and not os.path.ismount(root)
        stale = base / "agentworld-sbx-999999999-abc"  # no such pid
        (stale / "workspace").mkdir(parents=True)
        assert sweep_stale(base) == 1 and not stale.exists()
        assert list(base.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root drops to a sandbox uid")
def test_unreachable_base_dir_is_a_clear_error(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(SandboxError, match="not searchable"):
        Sandbox(PARAMS, base_dir=private).start()
