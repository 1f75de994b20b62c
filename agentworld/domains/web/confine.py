"""Chromium inside the sandbox machinery: an unprivileged user, an empty network, its own sandbox.

Playwright starts "the browser" as a plain executable and talks to it over inherited pipes, so
the confinement is an executable too: `ConfinedChromium.start()` writes a small launcher that
Playwright gets as `executable_path`. The launcher (as host root, first `setpriv` to a fresh
unprivileged uid) runs bubblewrap with every namespace unshared (user, pid, net, ipc, uts,
cgroup), a read-only /usr, a few /etc files, a private /tmp and nothing else of the host's
files; inside it, `netns_forward.py` listens on 127.0.0.1:<app port> and starts Chromium.

The network namespace has only loopback. The app's port is carried out through one unix socket
that the host binds into the sandbox and forwards to the app (`_HostForwarder`), so
`http://127.0.0.1:<port>` is the app, WebSockets included, and any other address or port is
simply not there: unlike a Playwright route, this does not depend on which requests the driver
intercepts. Chromium keeps its own sandbox (renderers in their own namespaces, seccomp): it
runs without `--no-sandbox`, since the kernel here allows nested user namespaces.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import socketserver
import tempfile
import threading
from pathlib import Path

from agentworld.domains.web import netns_forward
from agentworld.envs.sandbox import SYSTEM_LINKS, dedicated_uid, sweep_stale, traversable_by_others

CHROMIUM_BINARY = "/usr/lib/chromium/chromium"  # Debian's real binary (/usr/bin/chromium is a script)
SYSTEM_PYTHON = "/usr/bin/python3"
INSIDE_UID = 1000
INSIDE_DIR = "/run/browser"
DIR_PREFIX = "agentworld-browser-"  # + pid of the process that made it
# /etc entries Chromium needs (dynamic linker, fonts); nothing with secrets in it.
ETC_BINDS = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "nsswitch.conf")
PASSWD = f"root:x:0:0:root:/root:/bin/sh\nbrowser:x:{INSIDE_UID}:{INSIDE_UID}:browser:/tmp:/bin/sh\n"
GROUP = f"root:x:0:\nbrowser:x:{INSIDE_UID}:\n"


class _Carry(socketserver.BaseRequestHandler):
    """One connection from the sandbox's socket to the app's TCP port."""

    def handle(self) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.server.app_port), timeout=10)  # type: ignore[attr-defined]
        except OSError:
            return
        upstream.settimeout(None)
        back = threading.Thread(target=netns_forward.pump, args=(upstream, self.request), daemon=True)
        back.start()
        netns_forward.pump(self.request, upstream)
        back.join()
        upstream.close()


class _HostForwarder(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, app_port: int) -> None:
        self.app_port = app_port
        super().__init__(str(path), _Carry)


class ConfinedChromium:
    """The launcher Playwright runs instead of Chromium (see the module docstring)."""

    def __init__(self, app_port: int, *, binary: str = CHROMIUM_BINARY) -> None:
        self.app_port = app_port
        self.binary = binary
        self.uid = dedicated_uid()
        self.directory: Path | None = None
        self._server: _HostForwarder | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Write the launcher, start the host side of the app's socket; the launcher's path."""
        if self.directory is not None:
            return str(self.directory / "chromium")
        for tool in ("bwrap", SYSTEM_PYTHON, self.binary):
            if shutil.which(tool) is None:
                raise RuntimeError(f"confined browser: {tool} not found; run `make setup` (requirements/apt.txt)")
        base = Path(tempfile.gettempdir())
        if os.geteuid() == 0 and not traversable_by_others(base):
            raise RuntimeError(f"confined browser: {base} (or a parent) is not searchable by other users, so the "
                               "browser's uid cannot reach its files; set TMPDIR=/tmp or chmod o+x it")
        sweep_stale(base, DIR_PREFIX)
        directory = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=base))
        os.chmod(directory, 0o711)  # the sandbox uid binds files from here
        self.directory = directory
        shutil.copyfile(netns_forward.__file__, directory / "forward.py")
        (directory / "passwd").write_text(PASSWD)
        (directory / "group").write_text(GROUP)
        for name in ("forward.py", "passwd", "group"):
            os.chmod(directory / name, 0o644)
        self._server = _HostForwarder(directory / "app.sock", self.app_port)
        os.chmod(directory / "app.sock", 0o600)
        os.chown(directory / "app.sock", self.uid, self.uid)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="browser-app-socket", daemon=True)
        self._thread.start()
        launcher = directory / "chromium"
        launcher.write_text("#!/bin/sh\n# Playwright's 'browser': Chromium confined (agentworld.domains.web.confine)\n"
                            f"exec {' '.join(shlex.quote(a) for a in self.argv())} \"$@\"\n")
        os.chmod(launcher, 0o755)
        return str(launcher)

    def argv(self) -> list[str]:
        """The launcher's command, before the arguments Playwright appends."""
        assert self.directory is not None
        d = self.directory
        drop = (["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--"]
                if os.geteuid() == 0 else [])
        bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                 "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID), "--hostname", "sandbox",
                 "--ro-bind", "/usr", "/usr", "--tmpfs", "/usr/local", "--remount-ro", "/usr/local"]
        for name, target in SYSTEM_LINKS.items():
            bwrap += ["--symlink", target, f"/{name}"]
        for name in ETC_BINDS:
            if os.path.exists(f"/etc/{name}"):
                bwrap += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        bwrap += ["--ro-bind", str(d / "passwd"), "/etc/passwd", "--ro-bind", str(d / "group"), "/etc/group",
                  "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run",
                  "--ro-bind", str(d / "forward.py"), f"{INSIDE_DIR}/forward.py",
                  "--bind", str(d / "app.sock"), f"{INSIDE_DIR}/app.sock",
                  "--chdir", "/tmp", "--clearenv", "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/bin:/bin",
                  "--setenv", "LANG", "C.UTF-8", "--setenv", "TZ", "UTC", "--",
                  SYSTEM_PYTHON, "-I", "-S", f"{INSIDE_DIR}/forward.py", str(self.app_port),
                  f"{INSIDE_DIR}/app.sock", "--", self.binary]
        return drop + bwrap

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

