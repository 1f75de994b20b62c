"""Parametrised system-administration tasks for the OS environment.

Every episode runs on a seeded "server": a world (`build_world(world_seed)`) of users and
groups, systemd units, pid files, cron jobs, logs (auth.log, syslog, nginx access log), a dpkg
database, a data tree and an application tree with interesting permissions. It is rendered into
files under the sandbox's per-episode /etc, /var, /srv, /opt, /run and /root (`render_world`).
A template then asks one question about that world, or asks for one change to it:

- answer tasks: the agent ends with `answer <text>`; `setup["answer"]` holds the kind
  (`text`, `number` or `set`) and the accepted values, compared after normalisation
  (`answer_matches`);
- state tasks: `setup["check"]` is a shell command run in the sandbox after each step that
  exits 0 once the system is in the requested state.

The task's setup stores only the world seed plus the template's own extra files, so tasks
stay small while the whole server is rebuilt deterministically on every reset.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentworld.envs.base import Task

DOMAIN = "os"
HOSTNAME = "server"
q = shlex.quote

HUMANS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
          "mallory", "oscar", "peggy", "trent", "victor", "wendy")
HUMAN_SHELLS = ("/bin/bash", "/bin/bash", "/bin/bash", "/usr/bin/zsh", "/bin/sh", "/usr/sbin/nologin", "/bin/false")
NOLOGIN = ("/usr/sbin/nologin", "/bin/false")
SYSTEM_USERS = (  # name, uid, gid, gecos, home, shell
    ("root", 0, 0, "root", "/root", "/bin/bash"),
    ("daemon", 1, 1, "daemon", "/usr/sbin", "/usr/sbin/nologin"),
    ("bin", 2, 2, "bin", "/bin", "/usr/sbin/nologin"),
    ("sys", 3, 3, "sys", "/dev", "/usr/sbin/nologin"),
    ("www-data", 33, 33, "www-data", "/var/www", "/usr/sbin/nologin"),
    ("backup", 34, 34, "backup", "/var/backups", "/usr/sbin/nologin"),
    ("sshd", 105, 65534, "", "/run/sshd", "/usr/sbin/nologin"),
    ("postgres", 114, 121, "PostgreSQL administrator", "/var/lib/postgresql", "/bin/bash"),
    ("redis", 115, 122, "", "/var/lib/redis", "/usr/sbin/nologin"),
    ("appsvc", 998, 998, "application services", "/opt/app", "/usr/sbin/nologin"),
    ("nobody", 65534, 65534, "nobody", "/nonexistent", "/usr/sbin/nologin"),
)
SYSTEM_GROUPS = (("root", 0), ("daemon", 1), ("bin", 2), ("sys", 3), ("adm", 4), ("sudo", 27),
                 ("www-data", 33), ("backup", 34), ("users", 100), ("postgres", 121), ("redis", 122),
                 ("appsvc", 998), ("docker", 999), ("developers", 2000), ("ops", 2001), ("nogroup", 65534))
MEMBER_GROUPS = ("adm", "sudo", "docker", "developers", "ops", "users")

SERVICE_DEFS = (  # name, description, ExecStart, user
    ("nginx", "A high performance web server", "/usr/sbin/nginx -g 'daemon off;'", "www-data"),
    ("postgresql", "PostgreSQL database server", "/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main", "postgres"),
    ("redis", "Advanced key-value store", "/usr/bin/redis-server /etc/redis/redis.conf", "redis"),
    ("api", "Company API server", "/opt/app/bin/api-server --port 8080", "appsvc"),
    ("worker", "Background queue worker", "/opt/app/bin/queue-worker --concurrency 4", "appsvc"),
    ("backup-agent", "Nightly backup agent", "/opt/tools/bin/backup-agent --daily", "backup"),
    ("metrics-exporter", "Prometheus metrics exporter", "/opt/tools/bin/node-exporter --web.listen-address=:9100", "nobody"),
    ("mailer", "Outgoing mail relay", "/opt/mailer/bin/mailerd --queue /var/spool/mailer", "appsvc"),
)
JOB_DEFS = (  # cron.d file name, command
    ("db-backup", "/opt/scripts/db-backup.sh"), ("cleanup-tmp", "/opt/scripts/cleanup-tmp.sh"),
    ("report-mailer", "/opt/scripts/send-report.sh"), ("cert-renew", "/opt/scripts/renew-certs.sh"),
    ("sync-mirror", "/opt/scripts/sync-mirror.sh"), ("rotate-app-logs", "/opt/scripts/rotate-app-logs.sh"),
    ("index-rebuild", "/opt/scripts/rebuild-index.sh"), ("health-ping", "/opt/scripts/health-ping.sh"),
)
PACKAGE_DEFS = (  # name, version, section, installed size (KiB), description, main file
    ("curl", "7.88.1-10+deb12u5", "web", 500, "command line tool for transferring data with URL syntax", "/usr/bin/curl"),
    ("htop", "3.2.2-2", "utils", 412, "interactive processes viewer", "/usr/bin/htop"),
    ("jq", "1.6-2.1", "utils", 102, "lightweight and flexible command-line JSON processor", "/usr/bin/jq"),
    ("nginx", "1.22.1-9", "httpd", 1205, "small, powerful, scalable web/proxy server", "/usr/sbin/nginx"),
    ("rsync", "3.2.7-1", "net", 749, "fast, versatile, remote (and local) file-copying tool", "/usr/bin/rsync"),
    ("tmux", "3.3a-3", "admin", 1136, "terminal multiplexer", "/usr/bin/tmux"),
    ("vim", "2:9.0.1378-2", "editors", 3764, "Vi IMproved - enhanced vi editor", "/usr/bin/vim.basic"),
    ("git", "1:2.39.2-1.1", "vcs", 44457, "fast, scalable, distributed revision control system", "/usr/bin/git"),
    ("redis-server", "5:7.0.15-1~deb12u1", "database", 212, "Persistent key-value database with network interface", "/usr/bin/redis-server"),
    ("postgresql-15", "15.6-0+deb12u1", "database", 54235, "The World's Most Advanced Open Source Relational Database", "/usr/lib/postgresql/15/bin/postgres"),
    ("fail2ban", "1.0.2-2", "net", 2113, "ban hosts that cause multiple authentication errors", "/usr/bin/fail2ban-server"),
    ("logrotate", "3.21.0-1", "admin", 162, "Log rotation utility", "/usr/sbin/logrotate"),
    ("ncdu", "1.18-0.2", "admin", 137, "ncurses disk usage viewer", "/usr/bin/ncdu"),
    ("tree", "2.1.0-1", "utils", 119, "displays an indented directory tree, in color", "/usr/bin/tree"),
    ("zstd", "1.5.4+dfsg2-5", "utils", 1733, "fast lossless compression algorithm -- CLI tool", "/usr/bin/zstd"),
    ("apache2", "2.4.59-1~deb12u1", "httpd", 589, "Apache HTTP Server", "/usr/sbin/apache2"),
)
DATA_WORDS = ("alpha", "bravo", "cobalt", "delta", "ember", "falcon", "garnet", "harbor", "indigo",
              "juniper", "kepler", "lumen", "mosaic", "nimbus", "onyx", "pixel", "quasar", "raven")
URL_PATHS = ("/", "/index.html", "/login", "/api/v1/items", "/api/v1/users", "/static/app.js",
             "/static/style.css", "/favicon.ico", "/admin", "/health", "/search?q=disk", "/wp-login.php")
STATUSES = (200, 200, 200, 200, 200, 301, 304, 404, 404, 403, 500, 502)
AGENTS = ("curl/8.5.0", "Mozilla/5.0 (X11; Linux x86_64)", "python-requests/2.31.0", "Googlebot/2.1")
SYSLOG_MESSAGES = {
    "info": ("started", "configuration reloaded", "listening on port {port}", "health check ok",
             "processed {n} jobs", "connection pool size {n}"),
    "warning": ("slow request took {n} ms", "queue length {n} above threshold", "retrying connection"),
    "error": ("connection refused by upstream", "failed to open /var/lib/{svc}/state: permission denied",
              "out of memory while allocating {n} bytes", "worker {n} exited unexpectedly"),
}
LOG_DAY = "Jan 15"
DAYS_SECONDS = 86_400
PERMISSION_FILES = ("bin/api-server", "bin/queue-worker", "bin/migrate", "conf/app.ini", "conf/db.ini",
                    "data/cache.db", "data/uploads.idx", "logs/app.log", "logs/error.log", "README")


# ----------------------------------------------------------------------------- the world
@dataclass
class User:
    name: str
    uid: int
    gid: int
    gecos: str
    home: str
    shell: str


@dataclass
class Service:
    name: str
    description: str
    exec_start: str
    user: str
    restart: str  # always | on-failure | no
    enabled: bool
    pid: int | None  # pid file content when "running"


@dataclass
class CronJob:
    name: str
    command: str
    minute: int
    hour: int
    user: str


@dataclass
class Package:
    name: str
    version: str
    section: str
    size: int
    description: str
    main_file: str
    status: str  # "ii" or "rc"


@dataclass
class World:
    seed: int
    users: list[User]
    groups: dict[str, tuple[int, list[str]]]  # name -> (gid, members)
    services: list[Service]
    cron: list[CronJob]
    packages: list[Package]
    auth_log: list[str]
    syslog: list[str]
    access_log: list[str]
    data_files: dict[str, int]  # /srv/data path -> size in bytes (multiple of 4 KiB)
    app_modes: dict[str, int]  # /opt/app path -> mode
    setuid_tools: list[str]  # /opt/tools/bin paths with the setuid bit
    secret_conf: str

    @property
    def humans(self) -> list[User]:
        return [u for u in self.users if 1000 <= u.uid < 65534]


def _clock(rng: random.Random, n: int, start: int = 0, end: int = DAYS_SECONDS - 1) -> list[int]:
    """n sorted, distinct second-of-day timestamps."""
    return sorted(rng.sample(range(start, end), n))


def _hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def build_world(seed: int) -> World:
    """The whole seeded server for `seed` (pure function of the seed)."""
    rng = random.Random(f"os-world-{seed}")
    names = rng.sample(HUMANS, rng.randint(5, 8))
    users = [User(*u) for u in SYSTEM_USERS]
    shells = [rng.choice(HUMAN_SHELLS) for _ in names]
    shells[0], shells[1] = "/bin/bash", rng.choice(NOLOGIN)  # at least one of each kind
    for i, (name, shell) in enumerate(zip(names, shells)):
        uid = 1001 + i
        users.append(User(name, uid, uid, f"{name.capitalize()},,,", f"/home/{name}", shell))
    users.sort(key=lambda u: (u.uid == 65534, u.uid))
    groups: dict[str, tuple[int, list[str]]] = {}
    for gname, gid in SYSTEM_GROUPS:
        members = sorted(rng.sample(names, rng.randint(1, 3))) if gname in MEMBER_GROUPS else []
        groups[gname] = (gid, members)
    for u in users:
        if u.uid >= 1000 and u.uid != 65534:
            groups[u.name] = (u.uid, [])

    defs = rng.sample(SERVICE_DEFS, rng.randint(5, 7))
    restarts = ["on-failure", "always", "no"] + [rng.choice(("on-failure", "always", "no")) for _ in defs[3:]]
    rng.shuffle(restarts)
    enabled = [True, False] + [rng.random() < 0.6 for _ in defs[2:]]
    rng.shuffle(enabled)
    pids = rng.sample(range(300, 4000), len(defs))
    services = [Service(name, desc, exe, user, restart, en, pid if en else None)
                for (name, desc, exe, user), restart, en, pid in zip(defs, restarts, enabled, pids)]

    slots = rng.sample([(h, m) for h in range(24) for m in (0, 5, 10, 15, 20, 30, 40, 45, 50)], 5)
    cron = [CronJob(name, cmd, m, h, rng.choice(("root", "root", "backup", "appsvc", "postgres")))
            for (name, cmd), (h, m) in zip(rng.sample(JOB_DEFS, 5), slots)]

    pkgs = rng.sample(PACKAGE_DEFS, rng.randint(10, 13))
    removed = {p[0] for p in rng.sample(pkgs, 2)}
    packages = sorted((Package(*p, status="rc" if p[0] in removed else "ii") for p in pkgs), key=lambda p: p.name)

    ips = [f"{rng.choice((10, 172, 192))}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}"
           for _ in range(6)]
    auth_log = []
    bogus = rng.sample(("admin", "test", "oracle", "ubuntu", "guest", "pi", "ftpuser"), 3)
    for t in _clock(rng, rng.randint(40, 60)):
        pid, ip, port = rng.randint(1000, 30000), rng.choice(ips), rng.randint(30000, 65000)
        kind = rng.random()
        who = rng.choice(names)
        if kind < 0.45:
            msg = f"sshd[{pid}]: Failed password for {who} from {ip} port {port} ssh2"
        elif kind < 0.6:
            msg = f"sshd[{pid}]: Failed password for invalid user {rng.choice(bogus)} from {ip} port {port} ssh2"
        elif kind < 0.8:
            method = rng.choice(("password", "publickey"))
            msg = f"sshd[{pid}]: Accepted {method} for {who} from {ip} port {port} ssh2"
        else:
            msg = f"CRON[{pid}]: pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)"
        auth_log.append(f"{LOG_DAY} {_hms(t)} {HOSTNAME} {msg}")

    syslog = []
    times = _clock(rng, rng.randint(35, 55))
    levels = [rng.choice(("info", "info", "info", "warning", "error")) for _ in times]
    levels[rng.randrange(len(levels) // 2, len(levels))] = "error"
    for t, level in zip(times, levels):
        svc = rng.choice(services)
        text = rng.choice(SYSLOG_MESSAGES[level]).format(n=rng.randint(2, 5000), port=rng.randint(1024, 9999),
                                                         svc=svc.name)
        syslog.append(f"{LOG_DAY} {_hms(t)} {HOSTNAME} {svc.name}[{svc.pid or rng.randint(300, 4000)}]: "
                      f"{level}: {text}")

    weights = rng.sample(range(1, 12), len(ips))
    access_log = []
    for t in _clock(rng, rng.randint(60, 90), 8 * 3600, 20 * 3600):
        ip = rng.choices(ips, weights)[0]
        path, status = rng.choice(URL_PATHS), rng.choice(STATUSES)
        method = "POST" if path == "/login" and rng.random() < 0.5 else "GET"
        size = 0 if status in (301, 304) else rng.randint(150, 60000)
        access_log.append(f'{ip} - - [15/Jan/2024:{_hms(t)} +0000] "{method} {path} HTTP/1.1" {status} {size} '
                          f'"-" "{rng.choice(AGENTS)}"')
    counts = {ip: sum(line.startswith(ip + " ") for line in access_log) for ip in ips}
    top = max(counts.values())
    if list(counts.values()).count(top) > 1:  # make the busiest client unique
        first = min(ip for ip, c in counts.items() if c == top)
        access_log.append(f'{first} - - [15/Jan/2024:20:30:00 +0000] "GET /health HTTP/1.1" 200 2 "-" "curl/8.5.0"')

    data_files: dict[str, int] = {}
    for top_dir in rng.sample(DATA_WORDS, 4):
        for sub in rng.sample(("raw", "processed", "archive", "exports", "tmp"), rng.randint(1, 2)):
            for _ in range(rng.randint(2, 4)):
                name = f"{rng.choice(DATA_WORDS)}-{rng.randint(1, 999):03d}.{rng.choice(('csv', 'bin', 'json', 'log'))}"
                data_files[f"/srv/data/{top_dir}/{sub}/{name}"] = 4096 * rng.randint(1, 40)
    totals = _dir_totals(data_files)
    biggest = max(totals.values())
    if list(totals.values()).count(biggest) > 1:  # make the largest project unique
        path = max(data_files)
        data_files[path] += 4096

    app_modes = {f"/opt/app/{rel}": (0o755 if rel.startswith("bin/") else 0o644) for rel in PERMISSION_FILES}
    for path in rng.sample(sorted(app_modes), rng.randint(2, 3)):
        app_modes[path] = 0o777 if path.startswith("/opt/app/bin/") else 0o666
    setuid_tools = sorted(rng.sample(["/opt/tools/bin/backup-agent", "/opt/tools/bin/node-exporter",
                                      "/opt/tools/bin/netcheck", "/opt/tools/bin/diskstat",
                                      "/opt/tools/bin/pinger"], 2))
    secret_conf = f"/etc/app/{rng.choice(('secrets', 'credentials', 'db-password', 'api-keys'))}.conf"
    return World(seed, users, groups, services, cron, packages, auth_log, syslog, access_log, data_files,
                 app_modes, setuid_tools, secret_conf)


def _dir_totals(data_files: dict[str, int]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for path, size in data_files.items():
        top = "/".join(path.split("/")[:4])
        totals[top] = totals.get(top, 0) + size
    return totals


def _unit(svc: Service) -> str:
    lines = ["[Unit]", f"Description={svc.description}", "After=network.target", "", "[Service]",
             "Type=simple", f"User={svc.user}", f"ExecStart={svc.exec_start}"]
    if svc.restart != "no":
        lines += [f"Restart={svc.restart}", "RestartSec=5"]
    lines += [f"PIDFile=/run/{svc.name}.pid", "", "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


def _cron_line(job: CronJob, with_user: bool = True) -> str:
    user = f" {job.user}" if with_user else ""
    return f"{job.minute} {job.hour} * * *{user} {job.command}"


CRONTAB = """\
# /etc/crontab: system-wide crontab
# Unlike any other crontab you don't have to run the `crontab'
# command to install the new version when you edit this file
# and files in /etc/cron.d. These files also have username fields,
# that none of the other crontabs do.

SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin

# Example of job definition:
# .---------------- minute (0 - 59)
# |  .------------- hour (0 - 23)
# |  |  .---------- day of month (1 - 31)
# |  |  |  .------- month (1 - 12) OR jan,feb,mar,apr ...
# |  |  |  |  .---- day of week (0 - 6) (Sunday=0 or 7) OR sun,mon,tue,wed,thu,fri,sat
# |  |  |  |  |
# *  *  *  *  * user-name command to be executed
17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly
25 6\t* * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }
47 6\t* * 7\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }
52 6\t1 * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }
"""


def _data_bytes(path: str, size: int) -> bytes:
    seed_line = f"{path} " * 3 + "\n"
    return (seed_line.encode() * (size // len(seed_line) + 1))[:size]


def render_world(world: World) -> dict[str, Any]:
    """Files (abs path -> str|bytes), modes (abs path -> int), symlinks (abs path -> target)."""
    files: dict[str, str | bytes] = {}
    modes: dict[str, int] = {}
    symlinks: dict[str, str] = {"/var/run": "/run"}
    files["/etc/passwd"] = "".join(f"{u.name}:x:{u.uid}:{u.gid}:{u.gecos}:{u.home}:{u.shell}\n" for u in world.users)
    files["/etc/group"] = "".join(f"{name}:x:{gid}:{','.join(members)}\n"
                                  for name, (gid, members) in sorted(world.groups.items(), key=lambda g: g[1][0]))
    files["/etc/shells"] = "# /etc/shells: valid login shells\n/bin/sh\n/bin/bash\n/usr/bin/bash\n/usr/bin/zsh\n"
    files["/etc/hostname"] = f"{HOSTNAME}\n"
    files["/etc/hosts"] = f"127.0.0.1\tlocalhost\n127.0.1.1\t{HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    for svc in world.services:
        files[f"/etc/systemd/system/{svc.name}.service"] = _unit(svc)
        if svc.enabled:
            symlinks[f"/etc/systemd/system/multi-user.target.wants/{svc.name}.service"] = \
                f"/etc/systemd/system/{svc.name}.service"
        if svc.pid is not None:
            files[f"/run/{svc.name}.pid"] = f"{svc.pid}\n"
    files["/etc/crontab"] = CRONTAB
    for job in world.cron:
        files[f"/etc/cron.d/{job.name}"] = (f"# /etc/cron.d/{job.name}: {job.name.replace('-', ' ')} job\n"
                                            f"SHELL=/bin/sh\n{_cron_line(job)}\n")
        files[job.command] = f"#!/bin/sh\n# {job.name}\nset -eu\necho \"{job.name} done\"\n"
        modes[job.command] = 0o755
    status, lists = [], {}
    for p in world.packages:
        state = "install ok installed" if p.status == "ii" else "deinstall ok config-files"
        block = [f"Package: {p.name}", f"Status: {state}", "Priority: optional", f"Section: {p.section}",
                 f"Installed-Size: {p.size}", "Maintainer: Debian Maintainers <debian-devel@lists.debian.org>",
                 "Architecture: amd64", f"Version: {p.version}"]
        if p.status == "rc":
            block.append(f"Conffiles:\n /etc/{p.name}/{p.name}.conf 0123456789abcdef0123456789abcdef")
        block.append(f"Description: {p.description}")
        status.append("\n".join(block) + "\n")
        if p.status == "ii":
            dirs = sorted({"/".join(p.main_file.split("/")[:i]) for i in range(2, p.main_file.count("/") + 1)})
            lists[p.name] = "/.\n" + "".join(f"{d}\n" for d in dirs) + f"{p.main_file}\n" \
                f"/usr/share/doc/{p.name}\n/usr/share/doc/{p.name}/copyright\n"
        else:
            lists[p.name] = f"/etc/{p.name}\n/etc/{p.name}/{p.name}.conf\n"
    files["/var/lib/dpkg/status"] = "\n".join(status)
    files["/var/lib/dpkg/available"] = ""
    for name, text in lists.items():
        files[f"/var/lib/dpkg/info/{name}.list"] = text
    files["/var/log/auth.log"] = "\n".join(world.auth_log) + "\n"
    files["/var/log/syslog"] = "\n".join(world.syslog) + "\n"
    files["/var/log/nginx/access.log"] = "\n".join(world.access_log) + "\n"
    for path, size in world.data_files.items():
        files[path] = _data_bytes(path, size)
    for path, mode in world.app_modes.items():
        files[path] = (f"#!/bin/sh\nexec echo {path.rsplit('/', 1)[1]}\n" if "/bin/" in path
                       else f"# {path}\n")
        modes[path] = mode
    for name in ("backup-agent", "node-exporter", "netcheck", "diskstat", "pinger"):
        path = f"/opt/tools/bin/{name}"
        files[path] = f"#!/bin/sh\necho {name}\n"
        modes[path] = 0o4755 if path in world.setuid_tools else 0o755
    files[world.secret_conf] = "[database]\nuser = app\npassword = not-a-real-password\n"
    modes[world.secret_conf] = 0o644
    files["/root/.bashrc"] = "# ~/.bashrc: executed by bash(1) for non-login shells.\nexport PS1='\\u@\\h:\\w\\$ '\n"
    files["/root/.profile"] = "# ~/.profile: executed by Bourne-compatible login shells.\n"
    return {"files": files, "modes": modes, "symlinks": symlinks}


# ----------------------------------------------------------------------------- templates
@dataclass(frozen=True)
class Spec:
    instruction: str
    solution: list[str]
    answer: dict[str, Any] | None = None  # {"kind": text|number|set, "values": [...]}
    check: str | None = None  # state tasks
    files: dict[str, str] = field(default_factory=dict)  # extra files (override the world's)
    modes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskTemplate:
    name: str
    category: str
    build: Callable[[random.Random, World], Spec]


TEMPLATES: dict[str, TaskTemplate] = {}
Builder = Callable[[random.Random, World], Spec]


def template(name: str, category: str) -> Callable[[Builder], Builder]:
    def register(build: Builder) -> Builder:
        TEMPLATES[name] = TaskTemplate(name, category, build)
        return build
    return register


def available_templates() -> list[str]:
    return sorted(TEMPLATES)


def generate_task(seed: int, template_name: str | None = None) -> Task:
    """The task for `seed`: the world comes from the seed, the template too unless named."""
    rng = random.Random(seed)
    name = template_name or rng.choice(available_templates())
    if name not in TEMPLATES:
        raise KeyError(f"unknown os task template {name!r}; known: {', '.join(sorted(TEMPLATES))}")
    tpl = TEMPLATES[name]
    world = build_world(seed)
    spec = tpl.build(rng, world)
    setup = {"template": name, "category": tpl.category, "world_seed": seed, "files": spec.files,
             "modes": spec.modes, "answer": spec.answer, "check": spec.check}
    digest = hashlib.sha1(json.dumps([spec.instruction, setup], sort_keys=True).encode()).hexdigest()[:10]
    return Task(task_id=f"{name}-{digest}", domain=DOMAIN, instruction=spec.instruction, setup=setup,
                solution=list(spec.solution))


def _norm(text: str) -> str:
    text = " ".join(str(text).split()).strip().strip("\"'`").strip().rstrip(".").strip().lower()
    return text


def answer_matches(given: str, spec: dict[str, Any]) -> bool:
    """Whether the agent's answer matches the expected one (normalised; sets ignore order)."""
    values = [str(v) for v in spec["values"]]
    if spec["kind"] == "set":
        tokens = {t for t in re.split(r"[,\s]+", _norm(given)) if t}
        return tokens == {_norm(v) for v in values}
    if spec["kind"] == "number":
        return _norm(given) in {str(int(v)) for v in values}
    return _norm(given) in {_norm(v) for v in values}


def _text(*values: str) -> dict[str, Any]:
    return {"kind": "text", "values": list(values)}


def _number(value: int) -> dict[str, Any]:
    return {"kind": "number", "values": [value]}


def _set(values: list[str]) -> dict[str, Any]:
    return {"kind": "set", "values": sorted(values)}


def _answer(value: Any) -> str:
    if isinstance(value, list):
        return "answer " + ",".join(value)
    return f"answer {value}"


# ---- users and groups
@template("group_members", "users")
def _group_members(rng: random.Random, w: World) -> Spec:
    group = rng.choice(MEMBER_GROUPS)
    members = w.groups[group][1]
    return Spec(f"Which users are members of the group '{group}' (supplementary members listed in /etc/group)? "
                "Answer with `answer <user1,user2,...>`.",
                [f"getent group {group}", f"grep '^{group}:' /etc/group", _answer(members)], _set(members))


@template("user_shell", "users")
def _user_shell(rng: random.Random, w: World) -> Spec:
    user = rng.choice(w.humans)
    return Spec(f"What is the login shell of user {user.name}? Answer with `answer <path>`.",
                [f"grep '^{user.name}:' /etc/passwd", f"awk -F: '$1 == \"{user.name}\" {{print $7}}' /etc/passwd",
                 _answer(user.shell)], _text(user.shell))


@template("user_uid", "users")
def _user_uid(rng: random.Random, w: World) -> Spec:
    user = rng.choice(w.humans + [u for u in w.users if u.name in ("postgres", "redis", "appsvc", "sshd")])
    return Spec(f"What is the numeric UID of the account {user.name}? Answer with `answer <number>`.",
                [f"id -u {user.name}", _answer(user.uid)], _number(user.uid))


@template("user_home", "users")
def _user_home(rng: random.Random, w: World) -> Spec:
    user = rng.choice([u for u in w.users if u.name in ("postgres", "redis", "appsvc", "www-data", "backup", "sshd")])
    return Spec(f"What is the home directory of the account {user.name}? Answer with `answer <path>`.",
                [f"getent passwd {user.name}", f"grep '^{user.name}:' /etc/passwd | cut -d: -f6", _answer(user.home)],
                _text(user.home))


@template("login_users", "users")
def _login_users(rng: random.Random, w: World) -> Spec:
    names = [u.name for u in w.humans if u.shell not in NOLOGIN]
    return Spec("List the regular users (UID 1000 to 65533) whose shell allows interactive login, i.e. not "
                "/usr/sbin/nologin or /bin/false. Answer with `answer <user1,user2,...>`.",
                ["cat /etc/passwd",
                 "awk -F: '$3 >= 1000 && $3 < 65534 && $7 !~ /(nologin|false)$/ {print $1}' /etc/passwd",
                 _answer(names)], _set(names))


@template("add_to_group", "users")
def _add_to_group(rng: random.Random, w: World) -> Spec:
    group = rng.choice(MEMBER_GROUPS)
    user = rng.choice([u.name for u in w.humans if u.name not in w.groups[group][1]])
    check = (f"awk -F: -v u={user} '$1 == \"{group}\" {{n = split($4, m, \",\"); for (i = 1; i <= n; i++) "
             f"if (m[i] == u) found = 1}} END {{exit !found}}' /etc/group && "
             f"grep -q '^{user}:x:' /etc/passwd")
    return Spec(f"Add user {user} to the supplementary group {group}, keeping the group's existing members.",
                [f"id {user}", f"usermod -aG {group} {user}", f"getent group {group}"], check=check)


@template("set_shell", "users")
def _set_shell(rng: random.Random, w: World) -> Spec:
    user = rng.choice(w.humans)
    shell = rng.choice([s for s in ("/bin/bash", "/bin/sh", "/usr/sbin/nologin") if s != user.shell])
    check = f"[ \"$(awk -F: '$1 == \"{user.name}\" {{print $7}}' /etc/passwd)\" = {shell} ]"
    return Spec(f"Change the login shell of user {user.name} to {shell}.",
                [f"grep '^{user.name}:' /etc/passwd", f"usermod -s {shell} {user.name}",
                 f"getent passwd {user.name}"], check=check)


# ---- permissions
@template("world_writable", "permissions")
def _world_writable(rng: random.Random, w: World) -> Spec:
    paths = sorted(p for p, m in w.app_modes.items() if m & 0o002)
    return Spec("Which regular files under /opt/app are world-writable? Answer with their full paths: "
                "`answer <path1,path2,...>`.",
                ["ls -lR /opt/app", "find /opt/app -type f -perm -0002", _answer(paths)], _set(paths))


@template("setuid_files", "permissions")
def _setuid_files(rng: random.Random, w: World) -> Spec:
    return Spec("Which files under /opt have the setuid bit set? Answer with their full paths: "
                "`answer <path1,path2,...>`.",
                ["find /opt -type f -perm -4000", _answer(w.setuid_tools)], _set(w.setuid_tools))


@template("file_mode", "permissions")
def _file_mode(rng: random.Random, w: World) -> Spec:
    path, mode = rng.choice(sorted(w.app_modes.items()))
    return Spec(f"What are the permission bits of {path} in octal (for example 640)? Answer with `answer <mode>`.",
                [f"ls -l {path}", f"stat -c '%a %n' {path}", _answer(f"{mode:o}")], _text(f"{mode:o}", f"0{mode:o}"))


@template("fix_secret_mode", "permissions")
def _fix_secret_mode(rng: random.Random, w: World) -> Spec:
    path = w.secret_conf
    return Spec(f"{path} holds credentials but anyone can read it. Make it readable and writable by its "
                "owner only (mode 600).",
                [f"ls -l {path}", f"chmod 600 {path}", f"stat -c '%a %U %n' {path}"],
                check=f"[ \"$(stat -c %a {path})\" = 600 ]")


@template("remove_world_write", "permissions")
def _remove_world_write(rng: random.Random, w: World) -> Spec:
    paths = sorted(p for p, m in w.app_modes.items() if m & 0o002)
    keep = " && ".join(f"[ \"$(stat -c %a {p})\" = {m & ~0o002:o} ]" for p, m in sorted(w.app_modes.items()))
    return Spec("Remove write permission for 'others' from every world-writable file under /opt/app, "
                "leaving all other permission bits unchanged.",
                ["find /opt/app -type f -perm -0002 -ls", "find /opt/app -type f -perm -0002 -exec chmod o-w {} +",
                 "find /opt/app -type f -perm -0002"], check=keep if paths else "true")


# ---- processes
SPAWN = """#!/bin/sh
# spawn-workers: starts the worker pool configured in /etc/app/workers.conf, then waits for it.
. /etc/app/workers.conf
i=0
while [ "$i" -lt "$((WORKERS + EXTRA))" ]; do
  sleep 30 &
  i=$((i + 1))
done
: > /run/workers.ready
wait
"""

STATUSD = """#!/bin/bash
# statusd: writes its PID to /run/statusd.pid; on SIGUSR1 it writes its status to
# /var/log/statusd.status; SIGTERM stops it.
echo $$ > /run/statusd.pid
trap 'printf "statusd ok\\nworkers=%s\\nqueue=%s\\n" {workers} {queue} > /var/log/statusd.status' USR1
trap 'exit 0' TERM
while :; do sleep 0.1; done
"""


@template("worker_count", "processes")
def _worker_count(rng: random.Random, w: World) -> Spec:
    workers, extra = rng.randint(2, 6), rng.randint(0, 2)
    conf = f"# worker pool\nWORKERS={workers}\n# spare workers started for bursts\nEXTRA={extra}\n"
    run = ("rm -f /run/workers.ready; /opt/app/bin/spawn-workers & "
           "until [ -e /run/workers.ready ]; do sleep 0.05; done; pgrep -c -P $!")
    return Spec("Run /opt/app/bin/spawn-workers in the background and, in the same command, count how many "
                "worker processes (its child processes) it has started once it has created /run/workers.ready. "
                "Answer with `answer <number>`.",
                ["cat /opt/app/bin/spawn-workers", run, _answer(workers + extra)], _number(workers + extra),
                files={"/opt/app/bin/spawn-workers": SPAWN, "/etc/app/workers.conf": conf},
                modes={"/opt/app/bin/spawn-workers": 0o755})


@template("signal_status", "processes")
def _signal_status(rng: random.Random, w: World) -> Spec:
    workers, queue = rng.randint(1, 16), rng.randint(0, 500)
    run = ("rm -f /run/statusd.pid; /opt/app/bin/statusd & until [ -s /run/statusd.pid ]; do sleep 0.05; done; "
           "kill -USR1 \"$(cat /run/statusd.pid)\"; sleep 0.5; kill \"$(cat /run/statusd.pid)\"; wait")
    return Spec("The daemon /opt/app/bin/statusd writes its status report to /var/log/statusd.status when it "
                "receives the right signal. Start it and make it write that report (processes do not outlive "
                "one command, so do it within a single command).",
                ["head -n 4 /opt/app/bin/statusd", run, "cat /var/log/statusd.status"],
                check=f"grep -qx 'queue={queue}' /var/log/statusd.status",
                files={"/opt/app/bin/statusd": STATUSD.format(workers=workers, queue=queue)},
                modes={"/opt/app/bin/statusd": 0o755})


@template("pidfile_owner", "processes")
def _pidfile_owner(rng: random.Random, w: World) -> Spec:
    svc = rng.choice([s for s in w.services if s.pid is not None])
    return Spec(f"Which service's pid file under /run records PID {svc.pid}? Answer with `answer <service>`.",
                ["ls /run", f"grep -l '^{svc.pid}$' /run/*.pid", _answer(svc.name)],
                _text(svc.name, f"{svc.name}.service"))


# ---- services
@template("restart_on_failure", "services")
def _restart_on_failure(rng: random.Random, w: World) -> Spec:
    names = [s.name for s in w.services if s.restart == "on-failure"]
    return Spec("Which systemd units in /etc/systemd/system are configured with Restart=on-failure? "
                "Answer with the service names: `answer <name1,name2,...>`.",
                ["ls /etc/systemd/system", "grep -l '^Restart=on-failure' /etc/systemd/system/*.service",
                 _answer(names)], _set(names))


@template("unit_for_binary", "services")
def _unit_for_binary(rng: random.Random, w: World) -> Spec:
    svc = rng.choice(w.services)
    binary = svc.exec_start.split()[0]
    return Spec(f"Which systemd service runs the binary {binary}? Answer with `answer <service>`.",
                [f"grep -l 'ExecStart={binary}' /etc/systemd/system/*.service", _answer(svc.name)],
                _text(svc.name, f"{svc.name}.service"))


@template("service_user", "services")
def _service_user(rng: random.Random, w: World) -> Spec:
    svc = rng.choice(w.services)
    return Spec(f"As which user does the {svc.name} service run? Answer with `answer <user>`.",
                [f"cat /etc/systemd/system/{svc.name}.service", f"grep '^User=' /etc/systemd/system/{svc.name}.service",
                 _answer(svc.user)], _text(svc.user))


@template("enabled_services", "services")
def _enabled_services(rng: random.Random, w: World) -> Spec:
    names = [s.name for s in w.services if s.enabled]
    return Spec("Which services are enabled for multi-user.target (they have a symlink in its .wants "
                "directory)? Answer with `answer <name1,name2,...>`.",
                ["ls -l /etc/systemd/system/multi-user.target.wants/", _answer(names)], _set(names))


@template("enable_service", "services")
def _enable_service(rng: random.Random, w: World) -> Spec:
    svc = rng.choice([s for s in w.services if not s.enabled])
    link = f"/etc/systemd/system/multi-user.target.wants/{svc.name}.service"
    return Spec(f"Enable the {svc.name} service for multi-user.target the way `systemctl enable` would: create "
                f"the symlink {link} pointing to its unit file.",
                ["ls -l /etc/systemd/system/multi-user.target.wants/",
                 f"ln -s /etc/systemd/system/{svc.name}.service {link}", f"ls -l {link}"],
                check=f"[ -L {link} ] && [ \"$(readlink -f {link})\" = /etc/systemd/system/{svc.name}.service ]")


@template("disable_service", "services")
def _disable_service(rng: random.Random, w: World) -> Spec:
    svc = rng.choice([s for s in w.services if s.enabled])
    link = f"/etc/systemd/system/multi-user.target.wants/{svc.name}.service"
    return Spec(f"Disable the {svc.name} service: remove it from multi-user.target's wants, but keep its unit file.",
                ["ls -l /etc/systemd/system/multi-user.target.wants/", f"rm {link}",
                 "ls /etc/systemd/system/multi-user.target.wants/"],
                check=f"[ ! -e {link} ] && [ ! -L {link} ] && [ -f /etc/systemd/system/{svc.name}.service ]")


# ---- disk usage
@template("largest_dir", "disk")
def _largest_dir(rng: random.Random, w: World) -> Spec:
    totals = _dir_totals(w.data_files)
    top = max(totals, key=lambda k: totals[k])
    return Spec("Which directory directly under /srv/data uses the most disk space? Answer with `answer <path>`.",
                ["du -sk /srv/data/* | sort -n", _answer(top)], _text(top, top.rsplit("/", 1)[1], top + "/"))


@template("files_over_size", "disk")
def _files_over_size(rng: random.Random, w: World) -> Spec:
    sizes = sorted(set(w.data_files.values()))
    limit_kb = sizes[-min(len(sizes), rng.randint(2, 4))] // 1024 - 1
    paths = sorted(p for p, s in w.data_files.items() if s > limit_kb * 1024)
    return Spec(f"Which files under /srv/data are larger than {limit_kb} KiB? Answer with their full paths: "
                "`answer <path1,path2,...>`.",
                [f"find /srv/data -type f -size +{limit_kb}k", _answer(paths)], _set(paths))


@template("dir_usage", "disk")
def _dir_usage(rng: random.Random, w: World) -> Spec:
    totals = _dir_totals(w.data_files)
    top = rng.choice(sorted(totals))
    kib = totals[top] // 1024
    return Spec(f"How much disk space does {top} use, in KiB as reported by `du -sk`? Answer with `answer <number>`.",
                [f"du -sk {top}", _answer(kib)], _number(kib))


@template("clean_archive_logs", "disk")
def _clean_archive_logs(rng: random.Random, w: World) -> Spec:
    limit = rng.choice((32, 64, 100))
    files: dict[str, str] = {}
    big, small = [], []
    for i, svc in enumerate(rng.sample([s.name for s in w.services], 4)):
        for n in range(1, 3):
            size = rng.choice((8, 16, 24, 40, 80, 120, 160)) * 1024
            path = f"/var/log/archive/{svc}.log.{n}"
            files[path] = (f"{svc} rotated log {n}\n" * (size // (len(svc) + 17) + 1))[:size]
            (big if size > limit * 1024 else small).append(path)
    if not big:
        path = sorted(files)[0]
        files[path] = "x" * (limit + 10) * 1024
        big, small = [path], [p for p in small if p != path]
    check = " && ".join([f"[ ! -e {p} ]" for p in big] + [f"[ -f {p} ]" for p in small] or ["true"])
    return Spec(f"Free disk space: delete the files in /var/log/archive that are larger than {limit} KiB and "
                "keep the smaller ones.",
                ["ls -lS /var/log/archive", f"find /var/log/archive -type f -size +{limit}k -delete",
                 "ls -l /var/log/archive"], check=check, files=files)


# ---- logs
@template("failed_logins", "logs")
def _failed_logins(rng: random.Random, w: World) -> Spec:
    user = rng.choice(w.humans).name
    count = sum(f"Failed password for {user} from" in line for line in w.auth_log)
    return Spec(f"How many failed SSH password attempts for the existing user {user} are recorded in "
                "/var/log/auth.log? Answer with `answer <number>`.",
                [f"grep -c 'Failed password for {user} from' /var/log/auth.log", _answer(count)], _number(count))


@template("invalid_users", "logs")
def _invalid_users(rng: random.Random, w: World) -> Spec:
    names = sorted({line.split("invalid user ")[1].split()[0] for line in w.auth_log if "invalid user " in line})
    return Spec("Which non-existent user names did attackers try in /var/log/auth.log (lines with 'invalid "
                "user')? Answer with `answer <name1,name2,...>`.",
                ["grep 'invalid user' /var/log/auth.log | awk '{print $11}' | sort -u", _answer(names)], _set(names))


@template("top_client_ip", "logs")
def _top_client_ip(rng: random.Random, w: World) -> Spec:
    counts: dict[str, int] = {}
    for line in w.access_log:
        counts[line.split()[0]] = counts.get(line.split()[0], 0) + 1
    top = max(counts, key=lambda ip: counts[ip])
    return Spec("Which client IP address sent the most requests according to /var/log/nginx/access.log? "
                "Answer with `answer <ip>`.",
                ["head -n 3 /var/log/nginx/access.log",
                 "awk '{print $1}' /var/log/nginx/access.log | sort | uniq -c | sort -rn | head -n 3", _answer(top)],
                _text(top))


@template("status_count", "logs")
def _status_count(rng: random.Random, w: World) -> Spec:
    status = rng.choice((404, 500, 200, 304))
    count = sum(line.split('"')[2].split()[0] == str(status) for line in w.access_log)
    return Spec(f"How many requests in /var/log/nginx/access.log got HTTP status {status}? "
                "Answer with `answer <number>`.",
                [f"awk '$9 == {status}' /var/log/nginx/access.log | wc -l", _answer(count)], _number(count))


@template("first_error", "logs")
def _first_error(rng: random.Random, w: World) -> Spec:
    line = next(line for line in w.syslog if ": error: " in line)
    when = line.split()[2]
    return Spec("At what time (HH:MM:SS) was the first error-level message logged in /var/log/syslog? "
                "Answer with `answer <HH:MM:SS>`.",
                ["grep -m1 ': error: ' /var/log/syslog", _answer(when)], _text(when, f"{LOG_DAY} {when}"))


# ---- packages
@template("package_version", "packages")
def _package_version(rng: random.Random, w: World) -> Spec:
    pkg = rng.choice([p for p in w.packages if p.status == "ii"])
    return Spec(f"Which version of the package {pkg.name} is installed? Answer with `answer <version>`.",
                [f"dpkg -l {pkg.name}", f"dpkg-query -W -f='${{Version}}\\n' {pkg.name}", _answer(pkg.version)],
                _text(pkg.version))


@template("package_owner", "packages")
def _package_owner(rng: random.Random, w: World) -> Spec:
    pkg = rng.choice([p for p in w.packages if p.status == "ii"])
    return Spec(f"Which installed package provides the file {pkg.main_file}? Answer with `answer <package>`.",
                [f"dpkg -S {pkg.main_file}", _answer(pkg.name)], _text(pkg.name))


@template("removed_packages", "packages")
def _removed_packages(rng: random.Random, w: World) -> Spec:
    names = [p.name for p in w.packages if p.status == "rc"]
    return Spec("Which packages were removed but still have configuration files on the system (state 'rc' "
                "in dpkg -l)? Answer with `answer <pkg1,pkg2,...>`.",
                ["dpkg -l", "dpkg -l | awk '$1 == \"rc\" {print $2}'", _answer(names)], _set(names))


# ---- cron
@template("job_at_time", "cron")
def _job_at_time(rng: random.Random, w: World) -> Spec:
    job = rng.choice(w.cron)
    return Spec(f"Which script does cron run every day at {job.hour:02d}:{job.minute:02d}? "
                "Answer with `answer <path>`.",
                ["cat /etc/crontab", "grep -v '^#' /etc/cron.d/*", _answer(job.command)],
                _text(job.command, job.command.rsplit("/", 1)[1]))


@template("cron_job_user", "cron")
def _cron_job_user(rng: random.Random, w: World) -> Spec:
    job = rng.choice(w.cron)
    return Spec(f"As which user does cron run {job.command}? Answer with `answer <user>`.",
                [f"grep -r {job.command} /etc/crontab /etc/cron.d", _answer(job.user)], _text(job.user))


@template("add_cron_job", "cron")
def _add_cron_job(rng: random.Random, w: World) -> Spec:
    used = {j.name for j in w.cron}
    name, command = rng.choice([j for j in JOB_DEFS if j[0] not in used])
    hour, minute, user = rng.randint(0, 23), rng.choice((0, 15, 30, 45)), rng.choice(("root", "backup"))
    line = f"{minute} {hour} * * * {user} {command}"
    pattern = rf"^[[:space:]]*{minute}[[:space:]]+{hour}[[:space:]]+\*[[:space:]]+\*[[:space:]]+\*[[:space:]]+" \
              rf"{user}[[:space:]]+{command}[[:space:]]*$"
    return Spec(f"Schedule {command} to run as {user} every day at {hour:02d}:{minute:02d} by adding a job "
                f"line to a new file /etc/cron.d/{name}.",
                ["ls /etc/cron.d", f"cat /etc/cron.d/{w.cron[0].name}", f"echo {q(line)} > /etc/cron.d/{name}",
                 f"cat /etc/cron.d/{name}"],
                check=f"grep -Eq {q(pattern)} /etc/cron.d/{name}",
                files={command: f"#!/bin/sh\n# {name}\necho \"{name} done\"\n"}, modes={command: 0o755})


@template("fix_cron_user", "cron")
def _fix_cron_user(rng: random.Random, w: World) -> Spec:
    job = rng.choice(w.cron)
    path = f"/etc/cron.d/{job.name}"
    broken = f"# /etc/cron.d/{job.name}: {job.name.replace('-', ' ')} job\nSHELL=/bin/sh\n{_cron_line(job, False)}\n"
    pattern = rf"^{job.minute}[[:space:]]+{job.hour}[[:space:]]+\*[[:space:]]+\*[[:space:]]+\*[[:space:]]+" \
              rf"{job.user}[[:space:]]+{job.command}[[:space:]]*$"
    return Spec(f"The job line in {path} is missing its user field, so cron ignores it. Make it run as "
                f"{job.user} without changing its schedule or command.",
                [f"cat {path}", f"sed -i 's|\\* \\* \\* {job.command}|* * * {job.user} {job.command}|' {path}",
                 f"cat {path}"],
                check=f"grep -Eq {q(pattern)} {path} && [ \"$(grep -c {q(job.command)} {path})\" = 1 ]",
                files={path: broken})


__all__ = ["DOMAIN", "TEMPLATES", "World", "answer_matches", "available_templates", "build_world",
           "generate_task", "render_world"]
