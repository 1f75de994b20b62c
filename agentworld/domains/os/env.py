"""OS domain: system administration and inspection of a seeded Linux server in a bubblewrap sandbox.

Each episode gets a fresh `Sandbox` whose /etc, /var, /srv, /opt, /run and /root are
per-episode directories seeded from the task's world (`os_tasks.build_world`): users and
groups, systemd units and pid files, cron jobs, logs, a dpkg database, a data tree and an
application tree with interesting permissions. /usr is the host's, read-only; there is no
network. The agent is `root` of the sandbox's user namespace with every capability dropped
(uid 0 inside, an unprivileged uid on the host), because sysadmin tasks are done as root and
`usermod`, `chmod` on /etc files and friends must work; the prompt is `root@server:~#`.

Actions are bash command lines, plus three episode enders: `answer <text>` (checked against the
task's expected answer), `submit` and `exit`. The observation of a command is exactly what the
shell printed (stdout+stderr merged), cut to `MAX_OBSERVATION_CHARS` with a fixed marker; the
observation of an ender is empty. Reward is 1.0 at the step where the task is first solved.
"""

from __future__ import annotations

import os
import re
from typing import Any

import gymnasium as gym

from agentworld.config import SandboxParams
from agentworld.domains.os import END_ACTIONS, WORLD_MODEL_PROMPT
from agentworld.domains.os.tasks import (
    DOMAIN,
    HOSTNAME,
    World,
    answer_matches,
    available_templates,
    build_world,
    generate_task,
    render_world,
)
from agentworld.domains.terminal.env import TerminalEnv
from agentworld.envs.base import Task, TextEnv, pick_template
from agentworld.envs.behaviour import Policy, behaviour_policy
from agentworld.envs.sandbox import FIXED_EPOCH, CommandResult, Sandbox, SandboxError, sandbox_available

__all__ = ["DOMAIN", "SYSTEM_PROMPT", "OsEnv", "factory", "os_policy", "probe"]

SYSTEM_PROMPT = WORLD_MODEL_PROMPT  # declared in agentworld/domains/os/__init__.py
WRITABLE_DIRS = ("etc", "var", "srv", "opt", "root", "run")
ROOT_HOME = "/root"
ROOT_ENV = {"HOME": ROOT_HOME, "USER": "root", "LOGNAME": "root"}
ANSWER_RE = re.compile(r"^answer(?:\s+(.*))?$", re.DOTALL)
MAX_OBSERVATION_CHARS = 4000
TRUNCATION_MARKER = "\n[... output truncated to {n} characters ...]\n"


def probe() -> tuple[bool, str]:
    """The OS env needs what the Terminal needs: bubblewrap with user namespaces, prlimit."""
    ok, reason = sandbox_available()
    if not ok:
        return False, reason
    missing = [tool for tool in ("dpkg-query", "usermod", "pgrep", "find", "awk") if
               not os.path.exists(f"/usr/bin/{tool}") and not os.path.exists(f"/usr/sbin/{tool}")]
    if missing:
        return False, (f"missing in /usr: {', '.join(missing)}; install dpkg, passwd, procps, findutils, "
                       "mawk (Debian: apt-get install -y dpkg passwd procps findutils mawk)")
    return True, "ok"


def prompt(cwd: str) -> str:
    shown = "~" + cwd[len(ROOT_HOME):] if cwd == ROOT_HOME or cwd.startswith(ROOT_HOME + "/") else cwd
    return f"root@{HOSTNAME}:{shown}#"


def truncate(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """Deterministic cut: the first `limit` characters, then a marker."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATION_MARKER.format(n=limit)


class OsEnv(TerminalEnv):
    """Gymnasium-style text env over a seeded, sandboxed server (see module docstring).

    A Terminal whose sandbox is a whole server with the agent as root; it shares the Terminal's
    sandbox lifecycle and checker, and adds the seeded system files and `answer` actions.
    """

    domain = DOMAIN
    env_version = "1"

    # ----------------------------------------------------------------- protocol
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)  # seeds np_random only: the set-up below replaces the Terminal's
        task = self.episode_task(
            seed, options, lambda s, o: generate_task(s, pick_template(s, o, self.templates)))
        self._close_sandbox()
        self._sandbox = Sandbox(self.sandbox_params, inside_uid=0, hostname=HOSTNAME, env=ROOT_ENV,
                                writable_dirs=WRITABLE_DIRS)
        self._sandbox.start()
        self._apply_setup(task)
        self.task, self._done, self._steps, self._verdict = task, False, 0, None
        observation = f"{task.instruction}\n\n{prompt(ROOT_HOME)}"
        info = {"task_id": task.task_id, "template": task.setup.get("template"),
                "category": task.setup.get("category"), "kind": self._kind(task), "cwd": ROOT_HOME, "seed": seed}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self._sandbox is None or self.task is None:
            raise RuntimeError("episode is over (or never started); call reset() first")
        self._steps += 1
        stripped = action.strip()
        answer = ANSWER_RE.match(stripped)
        if answer is not None or stripped in END_ACTIONS:
            given = (answer.group(1) or "").strip() if answer is not None else None
            spec = self.task.setup.get("answer")
            if spec is not None:
                solved = given is not None and answer_matches(given, spec)
            else:
                solved = self.check()
            self._done = True
            info = self._info(None, solved)
            info.update(ended_by_agent=True, answer=given)
            return "", float(solved), True, False, info
        result = self._sandbox.run(action)
        self._pin_control_times()
        solved = self.check() if self.task.setup.get("check") else False
        self._done = solved
        return truncate(result.output), float(solved), solved, False, self._info(result, solved)

    # ----------------------------------------------------------------- helpers
    @staticmethod
    def _kind(task: Task) -> str:
        return "answer" if task.setup.get("answer") is not None else "state"

    def _apply_setup(self, task: Task) -> None:
        """Seed the world host-side (fast: no sandbox process), then fix times and the cwd."""
        sandbox = self.sandbox
        rendered = render_world(build_world(int(task.setup["world_seed"])))
        files = {**rendered["files"], **task.setup.get("files", {})}
        modes = {**rendered["modes"], **task.setup.get("modes", {})}
        for path, content in sorted(files.items()):
            sandbox.write_system_files({path: content}, mode=0o644)
        for path, mode in sorted(modes.items()):
            os.chmod(sandbox.system_path(path), mode)
        for link, target in sorted(rendered["symlinks"].items()):
            host = sandbox.system_path(link)
            host.parent.mkdir(parents=True, exist_ok=True)
            os.chown(host.parent, sandbox.host_uid, sandbox.host_uid)
            os.symlink(target, host)
            os.lchown(host, sandbox.host_uid, sandbox.host_uid)
        tops = [sandbox.system_path(f"/{d}") for d in WRITABLE_DIRS]
        tops += [sandbox.workspace, sandbox.workspace.parent / "home", sandbox.workspace.parent / "tmp"]
        for top in tops:
            for path in sorted(top.rglob("*"), reverse=True) + [top]:
                os.utime(path, (FIXED_EPOCH, FIXED_EPOCH), follow_symlinks=False)
        result: CommandResult = sandbox.run(f"cd {ROOT_HOME}", timeout_s=max(30.0, self.sandbox_params.command_timeout_s))
        self._pin_control_times()
        if result.exit_code != 0:
            raise SandboxError(f"setup of task {task.task_id} failed (exit {result.exit_code}): {result.output[:500]}")

    def _pin_control_times(self) -> None:
        """/run/sandbox and /run/sandbox-env (the sandbox's own shell-state plumbing) show up in
        `ls -l /run`; give them the fixed epoch so listings do not carry wall-clock times."""
        root = self.sandbox.workspace.parent
        for name in ("control", "restore.sh", "check.sh"):
            try:
                os.utime(root / name, (FIXED_EPOCH, FIXED_EPOCH))
            except OSError:
                pass

    def _info(self, result: CommandResult | None, solved: bool) -> dict[str, Any]:
        info = super()._info(result, solved)
        if result is not None:  # the observation is also cut at MAX_OBSERVATION_CHARS (see `truncate`)
            info["truncated"] = result.truncated or len(result.output) > MAX_OBSERVATION_CHARS
        return info


# ----------------------------------------------------------------------------- behaviour policies
_PATH_RE = re.compile(r"(?<![\w.-])(/(?:etc|var|srv|opt|run|root)(?:/[\w.@-]+)+)")
_GENERIC = ("id", "whoami", "hostname", "pwd", "ls -la", "ls /etc", "cat /etc/passwd", "cat /etc/group",
            "cat /etc/hostname", "ls /var/log", "ls -l /run", "ls /opt", "ls -R /opt/app | head -n 20",
            "ls /etc/systemd/system", "ls -l /etc/systemd/system/multi-user.target.wants/", "cat /etc/crontab",
            "ls -l /etc/cron.d", "dpkg -l | head -n 12", "dpkg -l | tail -n 5", "ps -eo pid,ppid,user,comm",
            "ps -o pid,comm", "ls -l /srv/data", "du -sh /srv/data", "du -sk /srv/data/* | sort -n",
            "tail -n 5 /var/log/syslog", "tail -n 5 /var/log/auth.log", "wc -l /var/log/nginx/access.log",
            "echo $HOME", "cat /etc/shells", "awk -F: '$3 >= 1000 {print $1}' /etc/passwd",
            "find /opt -type f -perm -4000", "find /opt/app -perm -0002", "getent passwd root",
            "grep -c Failed /var/log/auth.log", "ls /var/lib/dpkg/info | head", "cut -d: -f1,3 /etc/group")
_MISSING_COMMANDS = ("crontab -l", "sudo -l", "apt install htop", "htop", "netstat -tlnp", "service nginx status",
                     "vim /etc/passwd", "nano /etc/crontab", "lsof -i", "ifconfig", "locate passwd",
                     "yum list installed", "rpm -qa", "docker ps", "strace -p 1", "tree /opt")
_BAD_SYNTAX = ("for u in $(cut -d: -f1 /etc/passwd); do echo $u", "awk -F: '{print $1' /etc/passwd",
               "if [ -f /etc/passwd ]; then echo yes", "grep 'unterminated /etc/group", "cat /etc/passwd |",
               "echo $((1 + ))", "[[ -d /opt ]] &&", "case $USER in", "while true do echo x; done", "fi",
               "sed -i 's/a/ /etc/hostname", "find /opt -name '*.sh' -exec ls {} ;", "ls /etc )")


class _OsVocabulary:
    """Names an administrator could type for this episode's server (the OS domain's DomainActions)."""

    done_action = "submit"

    def __init__(self, task: Task) -> None:
        world: World = build_world(int(task.setup.get("world_seed", 0)))
        self.users = [u.name for u in world.users]
        self.humans = [u.name for u in world.humans]
        self.groups = sorted(world.groups)
        self.services = [s.name for s in world.services]
        self.packages = [p.name for p in world.packages]
        self.jobs = [j.name for j in world.cron]
        self.paths = sorted({*world.data_files, *world.app_modes, *world.setuid_tools, world.secret_conf,
                             "/var/log/auth.log", "/var/log/syslog", "/var/log/nginx/access.log",
                             *(f"/etc/systemd/system/{s}.service" for s in self.services),
                             *(f"/etc/cron.d/{j}" for j in self.jobs), *task.setup.get("files", {})})
        self.seen: list[str] = []

    def observe(self, observation: str) -> None:
        for path in _PATH_RE.findall(observation[:3000]):
            if path not in self.seen and path not in self.paths:
                self.seen.append(path)
        del self.seen[:-30]

    def path(self, rng) -> str:
        return rng.choice(self.paths + self.seen)

    def inspect(self, rng) -> str:
        return rng.choice(("pwd", "ls", "ls -l /etc/systemd/system", "cat /etc/passwd", "ls /var/log",
                           f"ls -l {self.path(rng)}", f"head -n 5 {self.path(rng)}"))

    def explore(self, rng) -> str:
        user, group, svc = rng.choice(self.users), rng.choice(self.groups), rng.choice(self.services)
        pkg, job, path = rng.choice(self.packages), rng.choice(self.jobs), self.path(rng)
        human = rng.choice(self.humans)
        options = (
            f"id {user}", f"getent passwd {user}", f"getent group {group}", f"groups {human}",
            f"grep '^{group}:' /etc/group", f"cat /etc/systemd/system/{svc}.service",
            f"grep -E '^(User|Restart|ExecStart)=' /etc/systemd/system/{svc}.service", f"cat /run/{svc}.pid",
            f"dpkg -s {pkg}", f"dpkg -L {pkg}", f"dpkg -l {pkg}", f"cat /etc/cron.d/{job}", f"ls -l {path}",
            f"stat -c '%a %U %G %s %n' {path}", f"head -n 3 {path}", f"wc -c {path}", f"file {path}",
            f"grep {human} /var/log/auth.log | tail -n 3", f"grep -c 'Failed password for {human}' /var/log/auth.log",
            f"grep {svc} /var/log/syslog | head -n 5", "awk '{print $9}' /var/log/nginx/access.log | sort | uniq -c",
            f"du -sk {path.rsplit('/', 1)[0]}", "find /srv/data -type f -size +80k", "sleep 1 & ps -o pid,ppid,comm",
            f"touch /tmp/{human}.txt && ls -l /tmp", f"mkdir -p /root/notes && echo {svc} > /root/notes/{svc}.txt",
            f"cp /etc/cron.d/{job} /tmp/ && ls /tmp", f"chmod 640 /tmp/{human}.txt 2>&1; ls -l /tmp",
            "sh -c 'echo $$; exit 3'; echo rc=$?", f"pgrep -c {svc} || echo none running",
        )
        return rng.choice(options + _GENERIC)

    def mistake(self, rng) -> str:
        user, group, svc, pkg = rng.choice(self.users), rng.choice(self.groups), rng.choice(self.services), rng.choice(self.packages)
        ghost = rng.choice(("nosuchuser", "admin2", "deploy", "jenkins", "svc-" + svc))
        kind = rng.randrange(6)
        if kind == 0:  # unknown ids and names
            return rng.choice((f"id {ghost}", f"usermod -aG {group} {ghost}", f"usermod -aG no{group} {user}",
                               f"getent passwd {ghost} || echo missing", f"chown {ghost} {self.path(rng)}",
                               f"kill -9 {rng.randint(5000, 60000)}", f"kill -HUP $(cat /run/{svc}.pid)",
                               f"dpkg -s {pkg}-tools", f"dpkg -S /usr/bin/{ghost}", f"groupdel {ghost}",
                               f"userdel {ghost}", f"passwd -S {ghost}"))
        if kind == 1:  # bad arguments
            return rng.choice((f"chmod 999 {self.path(rng)}", f"chmod u+q {self.path(rng)}", f"useradd {user}",
                               f"groupadd {group}", f"usermod -s {user}", "kill -FOO 1", "du --max-depht=1 /srv",
                               "find /opt -perm 99999", "ps --bogus", f"dpkg -l --long {pkg}", "stat",
                               f"ln -s /etc/systemd/system/{svc}.service /etc/systemd/system/{svc}.service",
                               "grep -E '(' /etc/passwd", "sort -k /etc/passwd", "date -d yesterday-ish"))
        if kind == 2:  # missing files
            return rng.choice((f"cat /etc/systemd/system/{ghost}.service", f"cat /run/{ghost}.pid",
                               "cat /var/log/messages", "tail /var/log/nginx/error.log", f"ls /home/{user}",
                               "cat /etc/shadow", f"cat /etc/cron.d/{ghost}", f"rm /etc/cron.d/{ghost}",
                               f"cd /opt/{ghost}", f"ls {self.path(rng)}.bak", "cat /root/.ssh/id_rsa"))
        if kind == 3:  # services and tools that are not there
            return rng.choice((f"systemctl restart {svc}", f"systemctl status {svc}", f"journalctl -u {svc}",
                               *_MISSING_COMMANDS))
        if kind == 4:  # typos
            return rng.choice((f"cta {self.path(rng)}", "sl /etc", f"gerp {user} /etc/passwd", "pgrpe sleep",
                               f"usermd -aG {group} {user}", "dpgk -l", "chmdo 600 /etc/passwd", "psa aux"))
        return rng.choice(_BAD_SYNTAX)

    def reply(self, observation: str, rng, policy: str) -> str | None:
        return None  # a shell never waits for an answer


def os_policy(name: str, task: Task) -> Policy:
    """A fresh behaviour policy (scripted, exploratory, erroneous) for one episode of `task`."""
    return behaviour_policy(name, task, _OsVocabulary, inspect_prob=0.2)


def factory(sandbox_params: SandboxParams | None = None) -> TextEnv:
    return OsEnv(sandbox_params)


def templates() -> list[str]:
    return available_templates()

