"""The web domain's Chromium inside the sandbox machinery, checked on the real processes.

What a page can do is what an agent can do at worst (a script that slipped into the app), so the
checks run JavaScript in the page: only the app's origin answers, WebSockets included (which a
Playwright route does not see), and no host file or port is reachable. The processes themselves
are read from /proc: an unprivileged uid, a network namespace of their own, Chromium's own
seccomp sandbox, no host directories in their root.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from agentworld.domains.web.env import WebEnv, probe

AVAILABLE, REASON = probe()
needs_browser = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"web env unavailable: {REASON}")
SANDBOX_ROOT = {"usr", "bin", "lib", "lib64", "sbin", "etc", "proc", "dev", "tmp", "run"}


class Listener:
    """A TCP server on a host port of 127.0.0.1 that counts who connects to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture(scope="module")
def env():
    env = WebEnv()
    env.reset(seed=0)
    yield env
    env.close()


@pytest.fixture()
def listener():
    listener = Listener()
    yield listener
    listener.close()


def browser_processes(env: WebEnv) -> list[int]:
    uid = env.browser._confined.uid
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # Chromium rewrites its children's command lines into one space-separated string
                program = (entry / "cmdline").read_bytes().replace(b"\0", b" ").split(b" ")[0]
                # the real uid (a sandboxed renderer is not dumpable: its /proc entry belongs to root)
                if int(status_field(int(entry.name), "Uid")) == uid and program.endswith(b"/chromium"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].split()[0]
    raise KeyError(name)


@needs_browser
def test_chromium_runs_unprivileged_in_its_own_network_with_its_own_sandbox(env):
    pids = browser_processes(env)
    assert pids, "no Chromium process runs as the confined browser's uid"
    host_net = os.readlink("/proc/self/ns/net")
    renderers, main = [], []
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        assert b"--no-sandbox" not in cmdline
        assert int(status_field(pid, "Uid")) != 0
        assert os.readlink(f"/proc/{pid}/ns/net") != host_net
        if b"--type=renderer" in cmdline:
            renderers.append(pid)
        elif b"--type=" not in cmdline:
            main.append(pid)
    assert renderers and all(status_field(pid, "Seccomp") == "2" for pid in renderers)  # seccomp-bpf filter
    # The browser process sees /usr, a few /etc files and its own /tmp, nothing else of the host
    # (renderers are chrooted further by Chromium's sandbox). Only root may look in there.
    if os.geteuid() == 0:
        assert len(main) == 1 and set(os.listdir(f"/proc/{main[0]}/root")) <= SANDBOX_ROOT


@needs_browser
def test_a_page_reaches_its_app_and_no_other_host_port_not_even_by_websocket(env, listener):
    env.reset(seed=0)
    assert env.browser.evaluate("fetch('/products').then(r => r.status)") == 200  # the app, through the socket
    # The app's pages forbid other origins by CSP; a blank page has no CSP, so only the network
    # namespace stands in the way there (an unconfined browser with the route opens the socket).
    env.browser.page.goto("about:blank")
    port = listener.port
    outcome = env.browser.evaluate(f"""() => new Promise((done) => {{
        const ws = new WebSocket('ws://127.0.0.1:{port}/');
        ws.onopen = () => done('open'); ws.onerror = () => done('error');
        setTimeout(() => done('timeout'), 3000);
    }})""")
    fetched = env.browser.evaluate(f"fetch('http://127.0.0.1:{port}/').then(() => 'ok', () => 'failed')")
    for_file = env.browser.evaluate("fetch('file:///etc/hostname').then(() => 'ok', () => 'failed')")
    time.sleep(0.5)
    assert (outcome, fetched, for_file) == ("error", "failed", "failed")
    assert listener.connections == 0
    observation, _ = env.reset(seed=1)
    assert observation  # the env still answers


@needs_browser
def test_closing_the_env_ends_every_browser_process_and_the_app_socket():
    env = WebEnv()
    env.reset(seed=2)
    pids, directory = browser_processes(env), env.browser._confined.directory
    assert pids and directory.exists()
    env.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
        time.sleep(0.1)
    alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()
             and status_field(pid, "State") != "Z"]
    assert not alive and not directory.exists()


def test_a_launcher_directory_left_by_a_dead_process_is_swept(monkeypatch):
    import shutil
    import tempfile

    from agentworld.domains.web.confine import DIR_PREFIX, ConfinedChromium

    tmp_path = Path(tempfile.mkdtemp(dir="/tmp"))  # searchable by the browser's uid (pytest's are 0700)
    os.chmod(tmp_path, 0o711)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead = tmp_path / f"{DIR_PREFIX}999999999-x"  # no such pid
    live = tmp_path / f"{DIR_PREFIX}{os.getpid()}-y"
    dead.mkdir(), live.mkdir()
    confined = ConfinedChromium(app_port=1)
    try:
        launcher = Path(confined.start())
        assert launcher.is_file() and launcher.parent.parent == tmp_path
        assert not dead.exists() and live.exists()
    finally:
        confined.close()
        shutil.rmtree(tmp_path)
