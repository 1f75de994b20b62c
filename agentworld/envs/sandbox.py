"""A real, contained bash for agent actions: bubblewrap, no network, hard per-command limits.

Why one fresh `bwrap` + `bash -c` per command instead of one long-lived shell: a command that
hangs, floods output or fork-bombs is killed together with its whole PID namespace, and the
next command still starts from a clean process. Shell state (cwd, variables, exports,
functions, aliases, umask) survives anyway: bash sources a restore script through `BASH_ENV`
before the command and an EXIT trap saves the state afterwards into a control directory that
lives outside the agent's workspace. A killed command keeps the state of the previous step,
like a shell whose last command never returned. Background jobs do not outlive their step.

Containment, per command:
- namespaces: user, pid, net (loopback only), ipc, uts, cgroup (`--unshare-all`);
- filesystem: a read-only `/` built per episode (fixed mtimes, synthetic /etc/passwd),
  /usr read-only without /usr/local, a few /etc files; nothing else of the host. The
  episode's /workspace, /home/agent and /tmp are host directories bound read-write (a
  per-command tmpfs would forget /tmp between steps), all on one size-capped tmpfs, removed on
  close. As root we mount it; otherwise a small holder process mounts it in its own user and
  mount namespace, the host reaches the files through /proc/<holder>/root, and every command
  enters that namespace (nsenter) before bwrap, so the cap holds without privileges;
- limits: wall-clock timeout, output cap, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NPROC;
- identity: as host root we start bwrap as a dedicated unprivileged uid (one per sandbox),
  because the kernel does not enforce RLIMIT_NPROC for uid 0; inside, the agent is `agent`
  (uid 1000); bwrap then relies on unprivileged user namespaces.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import itertools
import os
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping

from agentworld.config import SandboxParams

WORKDIR = "/workspace"
HOME = "/home/agent"
CONTROL = "/run/sandbox"  # inside the sandbox: the saved shell state
BASH_ENV_PATH = "/run/sandbox-env"  # inside the sandbox: the restore (or checker) script
TIMEOUT_EXIT = 124  # what coreutils `timeout` returns, so agents read it the usual way
INSIDE_UID = 1000
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install -y bubblewrap)"
FIXED_EPOCH = 1705311000  # 2024-01-15 09:30:00 UTC: mtime of every seeded path, so `ls -l` is stable
SYSTEM_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}

BASE_ENV: dict[str, str] = {
    "HOME": HOME,
    "USER": "agent",
    "LOGNAME": "agent",
    "SHELL": "/bin/bash",
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "TERM": "xterm",
}

# /etc entries bash, coreutils, python3 and friends need; nothing with secrets in it.
ETC_BINDS = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf",
             "python3", "python3.11", "magic", "magic.mime", "mime.types", "terminfo")
ETC_SYMLINKS = {"os-release": "../usr/lib/os-release"}
ETC_SYNTHETIC = {
    "passwd": ("root:x:0:0:root:/root:/bin/bash\n"
               f"agent:x:{INSIDE_UID}:{INSIDE_UID}:agent:{HOME}:/bin/bash\n"
               "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
    "group": f"root:x:0:\nagent:x:{INSIDE_UID}:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost\n",
    "hostname": "sandbox\n",
}

# Variables bash manages itself (or that are read-only); never saved or restored.
_SKIP_VARS = ("BASH|BASH_*|BASHOPTS|BASHPID|EUID|UID|PPID|SHELLOPTS|SHLVL|PWD|_|FUNCNAME|GROUPS"
              "|LINENO|PIPESTATUS|RANDOM|SRANDOM|SECONDS|EPOCHREALTIME|EPOCHSECONDS|HISTCMD"
              "|DIRSTACK|COMP_WORDBREAKS|HOSTTYPE|MACHTYPE|OSTYPE|OPTIND|OPTERR|__sandbox*")

# Sourced (via BASH_ENV) before every agent command; its EXIT trap saves the state.
_RESTORE_SCRIPT = f"""\
unset BASH_ENV
umask 022
shopt -s expand_aliases
cd -- {WORKDIR} 2>/dev/null
[[ -r {CONTROL}/state.sh ]] && . {CONTROL}/state.sh
__sandbox_save() {{
  builtin set +eu
  local __sandbox_n __sandbox_names
  {{
    builtin printf '# cwd %s\\n' "$PWD"
    builtin printf 'builtin cd -- %q 2>/dev/null || builtin cd -- {WORKDIR}\\n' "$PWD"
    builtin umask -p
    for __sandbox_n in {' '.join(BASE_ENV)}; do
      [[ -v $__sandbox_n ]] || builtin printf 'unset %s\\n' "$__sandbox_n"
    done
    builtin mapfile -t __sandbox_names < <(builtin compgen -v)
    for __sandbox_n in "${{__sandbox_names[@]}}"; do
      case $__sandbox_n in {_SKIP_VARS}) continue ;; esac
      builtin declare -p -- "$__sandbox_n" 2>/dev/null
    done
    builtin mapfile -t __sandbox_names < <(builtin compgen -A function)
    for __sandbox_n in "${{__sandbox_names[@]}}"; do
      [[ $__sandbox_n == __sandbox* ]] || builtin declare -f -- "$__sandbox_n"
    done
    builtin alias -p
  }} > {CONTROL}/state.tmp 2>/dev/null && /usr/bin/mv -f {CONTROL}/state.tmp {CONTROL}/state.sh
}}
trap __sandbox_save EXIT
"""

# Checkers see nothing the agent set: not its saved shell state (the agent can write
# /run/sandbox, and `echo 'exit 0' > /run/sandbox/state.sh` once made every checker pass), nor
# its variables, PATH, functions, aliases or cwd. They run with the fixed BASE_ENV, from
# /workspace, with tools from the read-only /usr, and read the agent's files as data.
_CHECK_SCRIPT = f"""\
unset BASH_ENV
cd -- {WORKDIR} 2>/dev/null
"""

#: Most bytes of the saved shell state the host reads (the agent can make that file anything).
STATE_READ_CAP = 1 << 20


def read_regular(path: Path, cap: int, *, fd: int | None = None) -> bytes | None:
    """Up to `cap` bytes of `path` if it is a regular file, else None, without following a
    symlink or blocking on a FIFO: the host reads paths the agent can replace. With `fd`, that
    already opened descriptor is read (and closed) instead."""
    if fd is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, total = [], 0
        while total < cap and (chunk := os.read(fd, min(65536, cap - total))):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_regular_under(top: Path, relative: str, cap: int) -> bytes | None:
    """`read_regular` of `top/relative`, following no symlink in any component of `relative`
    (a directory the agent replaced by a link to / must not lead the host out of `top`)."""
    parts = [part for part in Path(relative).parts if part not in ("", ".")]
    if not parts or Path(relative).is_absolute() or ".." in parts:
        return None
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                return None
            os.close(fd)
            fd = child
        try:
            leaf = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            return None
    finally:
        os.close(fd)
    return read_regular(top / relative, cap, fd=leaf)


_UID_BASE = 200_000
_uid_counter = itertools.count()
_DIR_PREFIX = "agentworld-sbx-"
_live: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_swept: set[Path] = set()


class SandboxError(RuntimeError):
    """The sandbox cannot start here; the message says why and how to fix it."""


@dataclass(frozen=True)
class CommandResult:
    """What one command did: the merged stdout+stderr text and how it ended."""

    output: str
    exit_code: int
    timed_out: bool
    truncated: bool
    duration_s: float
    cwd: str


def _is_root() -> bool:
    return os.geteuid() == 0


def dedicated_uid() -> int:
    """The host uid a new sandbox runs as: as root a fresh unprivileged one (no account needed,
    so nothing else on the host shares it), otherwise our own."""
    return _UID_BASE + (os.getpid() * 97 + next(_uid_counter)) % 800_000 if _is_root() else os.getuid()


@functools.lru_cache(maxsize=1)
def sandbox_available() -> tuple[bool, str]:
    """(available, reason): is bwrap installed and may it create namespaces on this kernel?"""
    if shutil.which("bwrap") is None:
        return False, f"bwrap not found on PATH; {INSTALL_HINT}"
    if shutil.which("prlimit") is None:
        return False, "prlimit not found; install util-linux"
    try:
        with Sandbox(SandboxParams(command_timeout_s=10)) as probe:
            result = probe.run("echo ok")
    except SandboxError as err:
        return False, str(err)
    if result.output.strip() != "ok":
        return False, f"bwrap could not run a command: {result.output.strip()[:300]}"
    return True, "ok"


class Sandbox:
    """One episode's sandboxed shell: a private workspace and per-command limits.

    Use as a context manager, or call `close()`: it kills nothing that still runs (nothing
    does between commands) and removes the episode's directories.
    """

    def __init__(self, params: SandboxParams | None = None, *, disk_mb: int = 128,
                 base_dir: str | os.PathLike[str] | None = None, inside_uid: int = INSIDE_UID,
                 hostname: str = "sandbox", env: Mapping[str, str] | None = None,
                 writable_dirs: tuple[str, ...] = (), ro_binds: Mapping[str, str] | None = None) -> None:
        """`inside_uid`: the agent's uid (0 = root of the user namespace, all capabilities dropped);
        `env`: overrides of BASE_ENV; `writable_dirs`: top-level dirs of `/` (e.g. "etc", "var")
        that are per-episode and writable by the agent (seed them with `write_system_files`)."""
        self.params = params or SandboxParams()
        self.disk_mb = disk_mb
        self.inside_uid = inside_uid
        self.hostname = hostname
        self.env = {**BASE_ENV, **(env or {})}
        self.writable_dirs = tuple(d.strip("/") for d in writable_dirs)
        # `ro_binds`: extra read-only binds {host path: absolute sandbox path} (e.g. a tool library)
        self.ro_binds = {str(host): "/" + inside.strip("/") for host, inside in (ro_binds or {}).items()}
        if any(not d or "/" in d or d in ("usr", "proc", "dev", "tmp") for d in self.writable_dirs):
            raise ValueError(f"writable_dirs must be top-level dirs other than usr/proc/dev/tmp: {writable_dirs!r}")
        self._base_dir = Path(base_dir or tempfile.gettempdir())
        self._root: Path | None = None      # where the host reads and writes the episode's files
        self._host_dir: Path | None = None  # the directory itself (the tmpfs mount point)
        self._mounted = False
        self._holder: subprocess.Popen[str] | None = None  # non-root: owns the size-capped tmpfs
        self._host_uid = dedicated_uid()

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Create the episode directories (idempotent) and check bwrap starts."""
        if self._root is not None:
            return
        if _is_root() and not traversable_by_others(self._base_dir):
            raise SandboxError(f"{self._base_dir} (or a parent) is not searchable by other users, so the "
                               "sandbox uid cannot reach its workspace; pass base_dir=/tmp or chmod o+x it")
        if self._base_dir not in _swept:
            _swept.add(self._base_dir)
            sweep_stale(self._base_dir)
        root = Path(tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}-", dir=self._base_dir))
        os.chmod(root, 0o711)  # the sandbox uid must traverse it to bind the subdirectories
        self._host_dir = root
        if _is_root():
            self._mounted = _mount_tmpfs(root, self.disk_mb)
        else:
            self._holder = _hold_tmpfs(root, self.disk_mb)
            if self._holder is not None:
                root = Path(f"/proc/{self._holder.pid}/root{root}")
        self._root = root
        _live.add(self)
        for name, mode in (("workspace", 0o755), ("home", 0o755), ("tmp", 0o1777), ("control", 0o755)):
            (root / name).mkdir(mode=mode)
            os.chmod(root / name, mode)
            os.chown(root / name, self._host_uid, self._host_uid)
        _build_rootfs(root / "rootfs", self.writable_dirs + tuple(t.lstrip("/") for t in self.ro_binds.values()))
        for name in self.writable_dirs:
            _chown_tree(root / "rootfs" / name, self._host_uid)
        (root / "restore.sh").write_text(_RESTORE_SCRIPT)
        (root / "check.sh").write_text(_CHECK_SCRIPT)
        probe = self.run("true", persist=False)
        if probe.exit_code != 0:
            self.close()
            hint = ("the kernel refused an unprivileged user namespace; allow it "
                    "(sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ "
                    "kernel.apparmor_restrict_unprivileged_userns=0)"
                    if "namespace" in probe.output or "Operation not permitted" in probe.output
                    else f"check that {self._base_dir} is traversable by other users")
            raise SandboxError(f"bwrap failed to start: {probe.output.strip()[:300]}; {hint}")

    def close(self) -> None:
        """Remove the episode's directories (and unmount its tmpfs)."""
        root, self._root = self._root, None
        if root is None:
            return
        if self._holder is not None:  # the tmpfs ends with the holder's namespace
            _release_holder(self._holder)
            self._holder = None
        _remove_tree(self._host_dir or root, self._mounted)
        self._mounted = False
        _live.discard(self)

    @property
    def disk_capped(self) -> bool:
        """Whether the episode's files live on a tmpfs of `disk_mb` (else only per-file limits)."""
        return self._mounted or self._holder is not None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # last resort; callers should close()
        try:
            self.close()
        except Exception:
            pass

    # ----------------------------------------------------------------- host-side access
    @property
    def workspace(self) -> Path:
        """Host path of /workspace (for setup and for tests; the agent never sees it)."""
        return self._require_root() / "workspace"

    @property
    def host_uid(self) -> int:
        return self._host_uid

    def write_files(self, files: Mapping[str, str | bytes], mode: int = 0o644) -> None:
        """Seed files into /workspace from the host (paths relative to /workspace)."""
        ws = self.workspace  # checked lexically: resolving would leave a holder's /proc/<pid>/root view
        for rel, content in files.items():
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or ".." in parts:
                raise ValueError(f"setup file {rel!r} escapes the workspace")
            path = ws / rel
            for parent in reversed(path.relative_to(ws).parents):
                if parent != Path("."):
                    (ws / parent).mkdir(exist_ok=True)
                    os.chown(ws / parent, self._host_uid, self._host_uid)
            data = content.encode() if isinstance(content, str) else content
            path.write_bytes(data)
            os.chmod(path, mode)
            os.chown(path, self._host_uid, self._host_uid)

    def system_path(self, inside: str) -> Path:
        """Host path of an absolute sandbox path under one of the `writable_dirs`."""
        rel = Path(inside.lstrip("/"))
        if not rel.parts or rel.parts[0] not in self.writable_dirs or ".." in rel.parts:
            raise ValueError(f"{inside!r} is not under a writable dir ({', '.join(self.writable_dirs) or 'none'})")
        return self._require_root() / "rootfs" / rel

    def write_system_files(self, files: Mapping[str, str | bytes], mode: int = 0o644) -> None:
        """Seed files at absolute sandbox paths under the `writable_dirs` (parents are created)."""
        for inside, content in files.items():
            path = self.system_path(inside)
            top = self._require_root() / "rootfs" / path.relative_to(self._require_root() / "rootfs").parts[0]
            for parent in reversed(path.relative_to(top).parents):
                if parent != Path("."):
                    (top / parent).mkdir(exist_ok=True)
                    os.chown(top / parent, self._host_uid, self._host_uid)
            data = content.encode() if isinstance(content, str) else content
            path.write_bytes(data)
            os.chmod(path, mode)
            os.chown(path, self._host_uid, self._host_uid)

    def cwd(self) -> str:
        """The shell's working directory as saved after the last persisted command."""
        first = self._saved_state(4096).split(b"\n", 1)[0].decode("utf-8", errors="replace")
        return first[len("# cwd "):] if first.startswith("# cwd ") else WORKDIR

    def exported_variables(self) -> dict[str, str]:
        """The agent's exported variables as its last persisted command left them, read from
        the saved state as data (agentworld/envs/shell_state.py), for checkers that need them."""
        from agentworld.envs.shell_state import exported_variables

        return exported_variables(self._saved_state(STATE_READ_CAP).decode("utf-8", errors="replace"))

    def fingerprint(self) -> str:
        """Digest of everything a command can change (files, modes, times, saved shell state).

        Equal digests mean nothing the agent can see changed, so a checker's verdict still holds.
        """
        root = self._require_root()
        digest = hashlib.blake2b(digest_size=16)
        for top in ("workspace", "home", "tmp", *(f"rootfs/{d}" for d in self.writable_dirs)):
            for dirpath, dirnames, filenames in os.walk(root / top):
                dirnames.sort()
                for name in [".", *sorted(filenames), *dirnames]:
                    try:
                        st = os.lstat(os.path.join(dirpath, name))
                    except OSError:
                        continue
                    digest.update(f"{dirpath}/{name}|{st.st_mode}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}\n".encode())
        digest.update(self._saved_state(STATE_READ_CAP) or b"<no regular state file>")
        return digest.hexdigest()

    # ----------------------------------------------------------------- running commands
    def run(self, command: str, *, persist: bool = True, timeout_s: float | None = None,
            check_env: Mapping[str, str] | None = None) -> CommandResult:
        """Run one command line in the sandbox.

        `persist=False` runs it as a checker: none of the agent's saved shell state, the fixed
        BASE_ENV plus `check_env` (e.g. the agent's exported variables as `AGENT_ENV_<NAME>`),
        from /workspace, and nothing it does is saved.
        """
        root = self._require_root()
        if "\x00" in command:  # an argv cannot hold one; answered like a shell's usage error, nothing runs
            return CommandResult(output="bash: the command line contains a NUL byte; nothing was run\n", exit_code=2,
                                 timed_out=False, truncated=False, duration_s=0.0, cwd=self.cwd())
        timeout = self.params.command_timeout_s if timeout_s is None else timeout_s
        argv = self._argv(root, command, persist, check_env or {})
        read_fd, write_fd = os.pipe()
        if _is_root():  # let the agent reopen its own stdout/stderr (`>/dev/stderr`)
            os.fchown(write_fd, self._host_uid, self._host_uid)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd,
                                    start_new_session=True, close_fds=True, **self._drop_privileges())
        finally:
            os.close(write_fd)
        try:
            data, timed_out, truncated = _read_capped(proc, read_fd, started + timeout,
                                                      self.params.output_cap_bytes)
        finally:
            if proc.poll() is None:
                _kill(proc)
            os.close(read_fd)
        rc = proc.returncode
        exit_code = TIMEOUT_EXIT if timed_out else (128 - rc if rc < 0 else rc)
        return CommandResult(
            output=data.decode("utf-8", errors="replace"), exit_code=exit_code,
            timed_out=timed_out, truncated=truncated,
            duration_s=round(time.monotonic() - started, 4), cwd=self.cwd())

    def _argv(self, root: Path, command: str, persist: bool, check_env: Mapping[str, str]) -> list[str]:
        enter: list[str] = []
        if self._holder is not None:  # bwrap runs inside the holder's namespaces, where the tmpfs is
            enter = ["nsenter", "--target", str(self._holder.pid), "--user", "--mount", "--preserve-credentials", "--"]
            root = self._host_dir or root
        p = self.params
        nproc = p.max_processes if _is_root() else _own_process_count() + p.max_processes
        limits = ["prlimit", f"--as={p.memory_mb * 2**20}", f"--fsize={p.file_size_mb * 2**20}",
                  f"--nproc={nproc}", "--core=0", "--"]
        bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1",
                 "--hostname", self.hostname, "--uid", str(self.inside_uid), "--gid", str(self.inside_uid),
                 "--ro-bind", str(root / "rootfs"), "/",
                 "--ro-bind", "/usr", "/usr", "--tmpfs", "/usr/local", "--remount-ro", "/usr/local"]
        if self.inside_uid == 0:  # root of the user namespace, but with no capabilities at all
            bwrap[1:1] = ["--cap-drop", "ALL"]
        for name in self.writable_dirs:
            bwrap += ["--bind", str(root / "rootfs" / name), f"/{name}"]
        for host, inside in self.ro_binds.items():
            bwrap += ["--ro-bind", host, inside]
        for name in ETC_BINDS:
            if os.path.exists(f"/etc/{name}"):
                bwrap += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        bwrap += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
                  "--bind", str(root / "workspace"), WORKDIR,
                  "--bind", str(root / "home"), HOME,
                  "--bind", str(root / "tmp"), "/tmp",
                  "--bind", str(root / "control"), CONTROL,
                  "--ro-bind", str(root / ("restore.sh" if persist else "check.sh")), BASH_ENV_PATH,
                  "--chdir", WORKDIR, "--clearenv"]
        for key, value in {**self.env, **(check_env if not persist else {})}.items():
            bwrap += ["--setenv", key, value]
        bwrap += ["--setenv", "BASH_ENV", BASH_ENV_PATH, "--", "/bin/bash", "-c", command, "bash"]
        return limits + enter + bwrap

    def _drop_privileges(self) -> dict[str, object]:
        """As root, start bwrap as the sandbox's own unprivileged uid (RLIMIT_NPROC is real then)."""
        if not _is_root():
            return {}
        return {"user": self._host_uid, "group": self._host_uid, "extra_groups": []}

    def _saved_state(self, cap: int) -> bytes:
        """Up to `cap` bytes of the saved shell state; empty unless it is a regular file."""
        return read_regular(self._require_root() / "control" / "state.sh", cap) or b""

    def _require_root(self) -> Path:
        if self._root is None:
            raise SandboxError("sandbox not started (use `with Sandbox(...)` or call start())")
        return self._root


def _read_capped(proc: subprocess.Popen[bytes], fd: int, deadline: float, cap: int) -> tuple[bytes, bool, bool]:
    """Read merged output until EOF, the deadline or the cap; kill the command on the last two."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    total = 0
    timed_out = truncated = False
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not sel.select(remaining):
                continue
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                break
            chunks.append(data)
            total += len(data)
            if total > cap:
                truncated = True
                break
    if timed_out or truncated:
        _kill(proc)
    else:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:  # closed its output but kept running
            timed_out = True
            _kill(proc)
    return b"".join(chunks)[:cap], timed_out, truncated


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the sandbox's PID 1 (the kernel then kills its whole PID namespace), then bwrap.

    Killing PID 1 first lets bwrap reap it; killing bwrap first would leave PID 1 a zombie
    of the host's init, counted against the sandbox uid's process limit until reaped.
    """
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
        children = []
    for child in children:
        try:
            os.kill(int(child), signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=1.0)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _build_rootfs(rootfs: Path, extra_dirs: tuple[str, ...] = ()) -> None:
    """The sandbox's read-only `/`: mount points, system symlinks, synthetic /etc files.

    A skeleton on the host (rather than bwrap's fresh tmpfs) gives `/`, `/etc`, `/home` and
    friends fixed mtimes, so `ls -la` prints the same bytes on every run.
    """
    dirs = ["usr", "etc", "proc", "dev", "tmp", "workspace", HOME.lstrip("/"), CONTROL.lstrip("/"), *extra_dirs]
    dirs += [f"etc/{name}" for name in ETC_BINDS if os.path.isdir(f"/etc/{name}")]
    for rel in dirs:
        (rootfs / rel).mkdir(parents=True, exist_ok=True)
    for name in ETC_BINDS:
        if os.path.isfile(f"/etc/{name}"):
            (rootfs / "etc" / name).touch()
    for name, text in ETC_SYNTHETIC.items():
        (rootfs / "etc" / name).write_text(text)
    (rootfs / BASH_ENV_PATH.lstrip("/")).touch()
    links = {**{k: v for k, v in SYSTEM_LINKS.items() if os.path.exists(f"/{k}")},
             **{f"etc/{k}": v for k, v in ETC_SYMLINKS.items()}}
    for link, target in links.items():
        os.symlink(target, rootfs / link)
    for path in sorted(rootfs.rglob("*"), reverse=True) + [rootfs]:
        os.utime(path, (FIXED_EPOCH, FIXED_EPOCH), follow_symlinks=False)


def _chown_tree(top: Path, uid: int) -> None:
    """Give a seeded rootfs dir to the sandbox uid (symlinks themselves, not their targets)."""
    for path in [top, *top.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)


def traversable_by_others(path: Path) -> bool:
    """Whether another (the sandbox's) uid can reach `path`: o+x on it and every parent."""
    path = path.resolve()
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def _remove_tree(root: Path, mounted: bool) -> None:
    if mounted:
        subprocess.run(["umount", "-l", str(root)], check=False, capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def sweep_stale(base_dir: Path, prefix: str = _DIR_PREFIX) -> int:
    """Remove dirs named `<prefix><pid>-...` left by processes that died without closing them
    (e.g. SIGKILL): sandbox dirs, and the confined browser's launcher dirs."""
    removed = 0
    for path in base_dir.glob(f"{prefix}*-*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        _remove_tree(path, os.path.ismount(path))
        removed += 1
    return removed


@atexit.register
def _close_all() -> None:
    for sandbox in list(_live):
        sandbox.close()


def _hold_tmpfs(path: Path, size_mb: int) -> subprocess.Popen[str] | None:
    """Without root: a process in its own user and mount namespace mounts a `size_mb` tmpfs on
    `path` and waits on its stdin (so it ends with us); None where namespaces are refused."""
    script = ('mount -t tmpfs -o "size=$2m,nr_inodes=65536,mode=0711" tmpfs "$1" && echo ready && read _')
    try:
        holder = subprocess.Popen(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh",
                                   str(path), str(size_mb)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError:
        return None
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "ready":
        _release_holder(holder)
        return None
    return holder


def _release_holder(holder: subprocess.Popen[str]) -> None:
    try:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        holder.kill()
        holder.wait()


def _mount_tmpfs(path: Path, size_mb: int) -> bool:
    """Cap the episode's disk use with a tmpfs (needs root); False means an ordinary dir."""
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,nr_inodes=65536,mode=0711", "tmpfs", str(path)],
        capture_output=True, check=False)
    return result.returncode == 0


def _own_process_count() -> int:
    """Processes of our uid: RLIMIT_NPROC counts them all, so a non-root limit adds them."""
    return uid_process_count(os.getuid())


def uid_process_count(uid: int) -> int:
    """How many live processes belong to host `uid` (read from /proc)."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                pass
    return count
