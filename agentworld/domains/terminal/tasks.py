"""Parametrised shell tasks for the Terminal environment.

Each template draws its parameters (file names, words, numbers, contents) from a seeded
`random.Random`, so one seed always gives the same task and the same files, while thousands
of seeds give thousands of distinct episodes. A template returns:

- the instruction the agent reads;
- setup: files written into /workspace, file modes, shell commands run in the sandbox
  (exports made there persist into the episode), explicit mtimes;
- a scripted multi-step solution (what an expert would type; some steps fail on purpose
  where a real expert would look before leaping, e.g. `cat` of a file that is missing);
- a checker: a shell command, run in the sandbox after every step, that exits 0 once solved.

Templates list the binaries they need; those missing from the sandbox's /usr are skipped.
"""

from __future__ import annotations

import hashlib
import json
import random
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from agentworld.envs.base import Task

WS = "/workspace"
SANDBOX_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
q = shlex.quote

WORDS = ("apple", "banana", "cherry", "delta", "falcon", "garden", "harbor", "island", "jungle",
         "kernel", "lemon", "mango", "nectar", "orbit", "pepper", "quartz", "river", "salmon",
         "tiger", "umbrella", "violet", "walnut", "xenon", "yellow", "zebra", "amber", "birch",
         "cobalt", "dune", "fjord", "granite", "hazel", "indigo", "jade", "lotus", "meadow")
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
         "mallory", "oscar", "peggy", "trent", "victor", "wendy")
CITIES = ("paris", "tokyo", "lima", "oslo", "cairo", "delhi", "quito", "seoul", "rome", "accra")
STEMS = ("report", "notes", "data", "config", "backup", "draft", "summary", "inventory", "todo",
         "results", "server", "metrics", "records", "journal", "ledger", "sample")
SERVICES = ("api", "db", "auth", "cache", "worker", "scheduler", "gateway")
LEVELS = ("INFO", "INFO", "INFO", "WARN", "DEBUG", "ERROR")
MESSAGES = ("request served", "connection opened", "connection closed", "retrying job",
            "config reloaded", "slow query", "cache miss", "user login", "timeout waiting for lock",
            "disk usage high", "health check ok", "queue drained")
MISSING_TOOLS = ("kubectl", "terraform", "ansible", "redis-cli", "mysql", "cargo", "rustc", "node")
PRESENT_TOOLS = ("tar", "gzip", "sed", "awk", "grep", "sort", "python3", "perl")


@dataclass(frozen=True)
class Spec:
    """What a template produces before it is packed into a `Task`."""

    instruction: str
    solution: list[str]
    check: str
    files: dict[str, str] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    mtimes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskTemplate:
    name: str
    category: str
    build: Callable[[random.Random], Spec]
    requires: tuple[str, ...] = ()

    def available(self) -> bool:
        return all(shutil.which(tool, path=SANDBOX_PATH) for tool in self.requires)


TEMPLATES: dict[str, TaskTemplate] = {}


Builder = Callable[[random.Random], Spec]


def template(name: str, category: str, requires: tuple[str, ...] = ()) -> Callable[[Builder], Builder]:
    """Register a builder as a task template (`requires`: binaries it needs in /usr)."""
    def register(build: Builder) -> Builder:
        TEMPLATES[name] = TaskTemplate(name, category, build, requires)
        return build
    return register


def template_names() -> list[str]:
    """Every template name, whether or not its tools exist on this machine."""
    return sorted(TEMPLATES)


def available_templates() -> list[str]:
    """Template names whose tools exist here, in a fixed order (seeds map the same way)."""
    return sorted(name for name, tpl in TEMPLATES.items() if tpl.available())


def generate_task(seed: int, template_name: str | None = None) -> Task:
    """The task for `seed`: the template is drawn from the seed unless named."""
    rng = random.Random(seed)
    names = available_templates()
    if not names:
        raise RuntimeError("no terminal task template is usable: core tools are missing from /usr/bin")
    name = template_name or rng.choice(names)
    if name not in TEMPLATES:
        raise KeyError(f"unknown terminal task template {name!r}; known: {', '.join(sorted(TEMPLATES))}")
    tpl = TEMPLATES[name]
    spec = tpl.build(rng)
    setup = {"template": name, "category": tpl.category, "files": spec.files, "modes": spec.modes,
             "commands": spec.commands, "mtimes": spec.mtimes, "check": spec.check}
    digest = hashlib.sha1(json.dumps([spec.instruction, setup], sort_keys=True).encode()).hexdigest()[:10]
    return Task(task_id=f"{name}-{digest}", domain="terminal", instruction=spec.instruction,
                setup=setup, solution=list(spec.solution))


# ---------------------------------------------------------------- helpers for templates
#: Checkers never see the agent's shell; its exported variables reach them as data, renamed
#: with this prefix (`AGENT_ENV_PATH`), so the checker's own PATH and tools stay fixed.
AGENT_ENV_PREFIX = "AGENT_ENV_"


def agent_env(var: str) -> str:
    """The checker's shell expression for the agent's exported `var` (empty when not exported)."""
    return f'"${{{AGENT_ENV_PREFIX}{var}-}}"'


def answer_is(value: str | int) -> str:
    """/workspace/answer.txt holds `value` (whitespace ignored)."""
    want = "".join(str(value).split())
    return f'[ "$(tr -d "[:space:]" < {WS}/answer.txt 2>/dev/null)" = {q(want)} ]'


def file_is(path: str, content: str) -> str:
    """`path` (relative to /workspace) holds exactly `content`."""
    return f"printf %s {q(content)} | cmp -s - {WS}/{path}"


def fname(rng: random.Random, ext: str) -> str:
    return f"{rng.choice(STEMS)}_{rng.randint(1, 99)}.{ext}"


def word_lines(rng: random.Random, n: int, per_line: tuple[int, int] = (2, 6)) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(*per_line))) for _ in range(n)]


def text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def log_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        out.append(f"2024-03-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
                   f"{i % 60:02d} {rng.choice(LEVELS)} {rng.choice(SERVICES)}: {rng.choice(MESSAGES)}")
    return out


# ---------------------------------------------------------------- files and directories
@template("create_file", "files")
def _create_file(rng: random.Random) -> Spec:
    name, phrase = fname(rng, "txt"), " ".join(rng.sample(WORDS, 3))
    return Spec(f"Create a file named {name} in /workspace that contains exactly one line: {phrase}",
                ["ls", f"echo {q(phrase)} > {name}"], file_is(name, phrase + "\n"))


@template("copy_into_dir", "files")
def _copy_into_dir(rng: random.Random) -> Spec:
    src, folder = fname(rng, "txt"), rng.choice(("archive", "old", "keep", "saved", "copies"))
    content = text(word_lines(rng, rng.randint(2, 6)))
    return Spec(f"Copy {src} into a new directory named {folder}/ (keep the original where it is).",
                ["ls -l", f"mkdir -p {folder}", f"cp {src} {folder}/"],
                f"[ -f {WS}/{src} ] && cmp -s {WS}/{src} {WS}/{folder}/{src}", files={src: content})


@template("rename_file", "files")
def _rename_file(rng: random.Random) -> Spec:
    old = fname(rng, "txt")
    new = f"{rng.choice(WORDS)}_{rng.choice(STEMS)}.txt"
    content = text(word_lines(rng, 3))
    return Spec(f"Rename {old} to {new}.", ["ls", f"mv {old} {new}"],
                f"[ ! -e {WS}/{old} ] && {file_is(new, content)}", files={old: content})


@template("delete_tmp_files", "files")
def _delete_tmp(rng: random.Random) -> Spec:
    tmp = [f"cache/{w}.tmp" for w in rng.sample(WORDS, rng.randint(2, 5))]
    keep = [f"cache/{w}.dat" for w in rng.sample(WORDS, rng.randint(1, 3))]
    files = {p: f"{rng.randint(0, 10**6)}\n" for p in tmp + keep}
    check = f'[ -z "$(find {WS}/cache -name "*.tmp")" ] && ' + " && ".join(f"[ -f {WS}/{p} ]" for p in keep)
    return Spec("Delete every .tmp file in /workspace/cache but keep all the other files there.",
                ["ls cache", "rm cache/*.tmp"], check, files=files)


@template("make_tree", "files")
def _make_tree(rng: random.Random) -> Spec:
    top = rng.choice(("project", "site", "app", "service"))
    a, b, c = rng.sample(("src", "docs", "tests", "assets", "build", "lib", "bin", "conf"), 3)
    leaf = f"{top}/{b}/{c}"
    empty = f"{top}/{a}/{rng.choice(STEMS)}.md"
    return Spec(f"Create the directories {top}/{a} and {leaf} inside /workspace, and an empty file {empty}.",
                [f"mkdir -p {top}/{a} {leaf}", f"touch {empty}"],
                f"[ -d {WS}/{top}/{a} ] && [ -d {WS}/{leaf} ] && [ -f {WS}/{empty} ] && [ ! -s {WS}/{empty} ]")


@template("find_file_path", "files")
def _find_file_path(rng: random.Random) -> Spec:
    dirs = ["project/" + "/".join(rng.sample(("src", "lib", "util", "core", "io", "net", "old"), k))
            for k in (1, 2, 2, 3)]
    files = {f"{d}/{w}.py": f"# {w}\n" for d in dirs for w in rng.sample(WORDS, 2)}
    target_dir = rng.choice(dirs)
    target = f"{rng.choice(NAMES)}_{rng.randint(100, 999)}.cfg"
    files[f"{target_dir}/{target}"] = "enabled=true\n"
    return Spec(f"Somewhere under /workspace/project there is a file named {target}. Write its path "
                "relative to /workspace (like project/a/b.txt) into /workspace/answer.txt.",
                [f"find project -name {target}", f"find project -name {target} > answer.txt"],
                answer_is(f"{target_dir}/{target}"), files=files)


@template("largest_file", "files")
def _largest_file(rng: random.Random) -> Spec:
    names = rng.sample(WORDS, 4)
    sizes = rng.sample(range(10, 4000), 4)
    files = {f"data/{n}.bin": "x" * s for n, s in zip(names, sizes)}
    biggest = names[sizes.index(max(sizes))] + ".bin"
    return Spec("Which file in /workspace/data is the largest? Write only its file name to /workspace/answer.txt.",
                ["ls -lS data", "ls -S data | head -n 1 > answer.txt"], answer_is(biggest), files=files)


@template("count_log_files", "files")
def _count_log_files(rng: random.Random) -> Spec:
    files: dict[str, str] = {}
    n_logs = 0
    for sub in rng.sample(SERVICES, 3):
        for i in range(rng.randint(1, 4)):
            ext = rng.choice(("log", "log", "txt", "gz"))
            n_logs += ext == "log"
            files[f"logs/{sub}/part{i}.{ext}"] = "x\n"
    files["logs/main.log"] = "x\n"
    n_logs += 1
    return Spec("How many files ending in .log are there anywhere under /workspace/logs? "
                "Write just the number to /workspace/answer.txt.",
                ["find logs -type f | head", "find logs -type f -name '*.log' | wc -l > answer.txt"],
                answer_is(n_logs), files=files)


@template("symlink_latest", "files")
def _symlink_latest(rng: random.Random) -> Spec:
    days = sorted(rng.sample(range(1, 29), 4))
    svc = rng.choice(SERVICES)
    logs = [f"{svc}-2024-05-{d:02d}.log" for d in days]
    files = {f"logs/{name}": text(log_lines(rng, 2)) for name in logs}
    return Spec(f"Create a symbolic link /workspace/latest.log pointing to the newest {svc} log in logs/ "
                "(the dates are in the file names).",
                ["ls logs", f"ln -s logs/{logs[-1]} latest.log"],
                f'[ -L {WS}/latest.log ] && [ "$(readlink -f {WS}/latest.log)" = {WS}/logs/{logs[-1]} ]',
                files=files)


# ---------------------------------------------------------------- text processing
@template("count_lines", "text")
def _count_lines(rng: random.Random) -> Spec:
    name, n = fname(rng, "txt"), rng.randint(5, 60)
    return Spec(f"How many lines does {name} contain? Write just the number to /workspace/answer.txt.",
                [f"wc -l {name}", f"wc -l < {name} > answer.txt"], answer_is(n),
                files={name: text(word_lines(rng, n))})


@template("grep_count", "text")
def _grep_count(rng: random.Random) -> Spec:
    name, word = fname(rng, "txt"), rng.choice(WORDS)
    lines = word_lines(rng, rng.randint(10, 40))
    lines[rng.randrange(len(lines))] += " " + word
    count = sum(word in line for line in lines)
    return Spec(f"How many lines of {name} contain the word '{word}'? Write just the number to /workspace/answer.txt.",
                [f"grep {word} {name} | head", f"grep -c {word} {name} > answer.txt"], answer_is(count),
                files={name: text(lines)})


@template("grep_errors", "text")
def _grep_errors(rng: random.Random) -> Spec:
    name = f"{rng.choice(SERVICES)}.log"
    lines = log_lines(rng, rng.randint(15, 40))
    lines[rng.randrange(len(lines))] = lines[0][:20] + "ERROR db: connection refused"
    errors = text([line for line in lines if " ERROR " in line])
    return Spec(f"Save all ERROR lines of {name}, in their original order, to /workspace/errors.txt.",
                [f"head -n 5 {name}", f"grep ERROR {name} > errors.txt"], file_is("errors.txt", errors),
                files={name: text(lines)})


@template("sed_replace", "text")
def _sed_replace(rng: random.Random) -> Spec:
    old, new = rng.sample(CITIES, 2)
    name = f"{rng.choice(('app', 'site', 'db'))}.conf"
    keys = rng.sample(("host", "backup_host", "mirror", "region", "fallback", "primary"), 4)
    lines = [f"{k}={old if rng.random() < 0.6 else rng.choice(WORDS)}" for k in keys] + [f"# default city: {old}"]
    content = text(lines)
    return Spec(f"In {name}, replace every occurrence of '{old}' with '{new}', editing the file in place.",
                [f"grep -n {old} {name}", f"sed -i 's/{old}/{new}/g' {name}"],
                file_is(name, content.replace(old, new)), files={name: content})


@template("sort_unique", "text")
def _sort_unique(rng: random.Random) -> Spec:
    name = fname(rng, "txt")
    words = [rng.choice(WORDS[:12]) for _ in range(rng.randint(10, 30))]
    expected = text(sorted(set(words)))
    return Spec(f"Write the distinct words of {name} (one word per line), sorted alphabetically, to /workspace/sorted.txt.",
                [f"head {name}", f"sort -u {name} > sorted.txt"], file_is("sorted.txt", expected),
                files={name: text(words)})


@template("most_frequent_word", "text")
def _most_frequent(rng: random.Random) -> Spec:
    name = fname(rng, "txt")
    pool = rng.sample(WORDS, 5)
    counts = dict(zip(pool, rng.sample(range(1, 12), 5)))
    words = [w for w, c in counts.items() for _ in range(c)]
    rng.shuffle(words)
    top = max(counts, key=counts.__getitem__)
    return Spec(f"Which word occurs most often in {name} (one word per line)? Write only that word to /workspace/answer.txt.",
                [f"sort {name} | uniq -c | sort -rn | head -n 3",
                 f"sort {name} | uniq -c | sort -rn | head -n 1 | awk '{{print $2}}' > answer.txt"],
                answer_is(top), files={name: text(words)})


@template("csv_column_sum", "text")
def _csv_sum(rng: random.Random) -> Spec:
    name = f"{rng.choice(('inventory', 'orders', 'stock'))}.csv"
    rows = [(w, rng.randint(1, 500), rng.randint(1, 99)) for w in rng.sample(WORDS, rng.randint(4, 12))]
    content = text(["item,qty,price"] + [f"{w},{qty},{price}" for w, qty, price in rows])
    return Spec(f"What is the total quantity (the sum of the qty column) in {name}? "
                "Write just the number to /workspace/answer.txt.",
                [f"head -n 3 {name}", f"awk -F, 'NR>1 {{s+=$2}} END {{print s}}' {name} > answer.txt"],
                answer_is(sum(r[1] for r in rows)), files={name: content})


@template("cut_column", "text")
def _cut_column(rng: random.Random) -> Spec:
    people = rng.sample(NAMES, rng.randint(3, 8))
    emails = [f"{p}.{rng.randint(1, 99)}@example.org" for p in people]
    content = text(["name,email,city"] + [f"{p},{e},{rng.choice(CITIES)}" for p, e in zip(people, emails)])
    return Spec("Extract the email column of users.csv (without the header line) into /workspace/emails.txt, "
                "one address per line, in the original order.",
                ["head -n 2 users.csv", "tail -n +2 users.csv | cut -d, -f2 > emails.txt"],
                file_is("emails.txt", text(emails)), files={"users.csv": content})


@template("line_range", "text")
def _line_range(rng: random.Random) -> Spec:
    name = fname(rng, "txt")
    lines = [f"{i + 1}: {line}" for i, line in enumerate(word_lines(rng, rng.randint(12, 30)))]
    a = rng.randint(2, len(lines) - 6)
    b = a + rng.randint(1, 5)
    return Spec(f"Write lines {a} through {b} (inclusive) of {name} to /workspace/slice.txt.",
                [f"sed -n '{a},{b}p' {name} > slice.txt"], file_is("slice.txt", text(lines[a - 1:b])),
                files={name: text(lines)})


@template("to_upper", "text")
def _to_upper(rng: random.Random) -> Spec:
    name = fname(rng, "txt")
    out = name.replace(".txt", "_upper.txt")
    content = text(word_lines(rng, rng.randint(2, 6)))
    return Spec(f"Create {out} containing the contents of {name} converted to upper case.",
                [f"cat {name}", f"tr '[:lower:]' '[:upper:]' < {name} > {out}"],
                file_is(out, content.upper()), files={name: content})


@template("word_count", "text")
def _word_count(rng: random.Random) -> Spec:
    name = fname(rng, "md")
    content = text(word_lines(rng, rng.randint(3, 15), (1, 9)))
    return Spec(f"How many words are in {name}? Write just the number to /workspace/answer.txt.",
                [f"wc {name}", f"wc -w < {name} > answer.txt"], answer_is(len(content.split())),
                files={name: content})


@template("reverse_lines", "text")
def _reverse_lines(rng: random.Random) -> Spec:
    name = fname(rng, "txt")
    lines = [f"step {i + 1}: {w}" for i, w in enumerate(rng.sample(WORDS, rng.randint(3, 9)))]
    return Spec(f"Write the lines of {name} in reverse order (last line first) to /workspace/reversed.txt.",
                [f"cat {name}", f"tac {name} > reversed.txt"], file_is("reversed.txt", text(lines[::-1])),
                files={name: text(lines)})


@template("unique_ips", "text")
def _unique_ips(rng: random.Random) -> Spec:
    ips = [f"10.0.{rng.randint(0, 3)}.{rng.randint(1, 254)}" for _ in range(rng.randint(3, 9))]
    lines = [f'{rng.choice(ips)} - - [10/Mar/2024:13:{i:02d}:00 +0000] "GET /{rng.choice(WORDS)} HTTP/1.1" '
             f'{rng.choice((200, 200, 404, 500))} {rng.randint(100, 9000)}' for i in range(rng.randint(10, 40))]
    distinct = len({line.split()[0] for line in lines})
    return Spec("How many distinct client IP addresses (first field) appear in access.log? "
                "Write just the number to /workspace/answer.txt.",
                ["head -n 3 access.log", "awk '{print $1}' access.log | sort -u | wc -l > answer.txt"],
                answer_is(distinct), files={"access.log": text(lines)})


@template("diff_line", "text")
def _diff_line(rng: random.Random) -> Spec:
    keys = rng.sample(("port", "host", "user", "timeout", "retries", "mode", "level", "path"), 6)
    a = [f"{k}={rng.randint(1, 9999)}" for k in keys]
    b = list(a)
    idx = rng.randrange(len(b))
    b[idx] = f"{keys[idx]}={rng.randint(10000, 20000)}"
    return Spec("a.conf and b.conf differ in exactly one line. Write that line's number to /workspace/answer.txt.",
                ["diff a.conf b.conf", "diff a.conf b.conf | head -n 1 | grep -o '^[0-9]*' > answer.txt"],
                answer_is(idx + 1), files={"a.conf": text(a), "b.conf": text(b)})


@template("find_by_content", "text")
def _find_by_content(rng: random.Random) -> Spec:
    names = [f"{n}.txt" for n in rng.sample(NAMES, 5)]
    secret = f"{rng.choice(WORDS)}{rng.randint(100, 999)}"
    files = {f"notes/{n}": text(word_lines(rng, 4)) for n in names}
    target = rng.choice(names)
    files[f"notes/{target}"] += f"the code is {secret}\n"
    return Spec(f"Which file in /workspace/notes mentions '{secret}'? Write only its file name to /workspace/answer.txt.",
                ["cd notes", f"grep -l {secret} *", f"grep -l {secret} * > ../answer.txt"],
                answer_is(target), files=files)


@template("append_line", "text")
def _append_line(rng: random.Random) -> Spec:
    name = rng.choice(("todo.txt", "hosts.txt", "notes.md", "CHANGELOG"))
    content = text(word_lines(rng, rng.randint(2, 5)))
    line = f"{rng.choice(NAMES)}: {' '.join(rng.sample(WORDS, 2))}"
    return Spec(f"Append the line '{line}' to the end of {name} without changing its existing lines.",
                [f"tail -n 2 {name}", f"echo {q(line)} >> {name}"], file_is(name, content + line + "\n"),
                files={name: content})


@template("sort_numbers_desc", "text")
def _sort_numbers(rng: random.Random) -> Spec:
    nums = rng.sample(range(1, 5000), rng.randint(5, 15))
    return Spec("numbers.txt holds one integer per line. Write them sorted from largest to smallest into /workspace/sorted.txt.",
                ["sort --reverse-numeric numbers.txt", "sort -rn numbers.txt > sorted.txt"],
                file_is("sorted.txt", text([str(n) for n in sorted(nums, reverse=True)])),
                files={"numbers.txt": text([str(n) for n in nums])})


# ---------------------------------------------------------------- scripts and arithmetic
@template("numbered_files", "scripts")
def _numbered_files(rng: random.Random) -> Spec:
    n, folder = rng.randint(3, 12), rng.choice(("items", "parts", "chunks"))
    return Spec(f"Create files {folder}/item_1.txt through {folder}/item_{n}.txt in /workspace, each containing "
                "only its own number.",
                [f"mkdir -p {folder}", f"for i in $(seq 1 {n}); do echo $i > {folder}/item_$i.txt; done"],
                f'for i in $(seq 1 {n}); do [ "$(cat {WS}/{folder}/item_$i.txt 2>/dev/null)" = "$i" ] || exit 1; done')


@template("sum_range", "scripts")
def _sum_range(rng: random.Random) -> Spec:
    a = rng.randint(1, 50)
    b = a + rng.randint(5, 500)
    return Spec(f"Compute the sum of all integers from {a} to {b} (inclusive). Write just the number to /workspace/answer.txt.",
                [f"seq {a} {b} | awk '{{s+=$1}} END {{print s}}' > answer.txt"], answer_is(sum(range(a, b + 1))))


@template("write_script", "scripts")
def _write_script(rng: random.Random) -> Spec:
    who = rng.choice(NAMES).capitalize()
    script = rng.choice(("greet.sh", "hello.sh", "welcome.sh"))
    return Spec(f"Write an executable bash script /workspace/{script} that prints exactly: Hello, {who}!",
                [f"echo '#!/bin/bash' > {script}", f"echo 'echo \"Hello, {who}!\"' >> {script}",
                 f"chmod +x {script}"],
                f'[ -x {WS}/{script} ] && [ "$(cd {WS} && ./{script})" = {q(f"Hello, {who}!")} ]')


@template("json_sum", "scripts", requires=("python3",))
def _json_sum(rng: random.Random) -> Spec:
    orders = [{"id": i + 1, "customer": rng.choice(NAMES), "price": rng.randint(1, 300)}
              for i in range(rng.randint(3, 10))]
    return Spec("orders.json is a list of orders. Write the sum of their price fields to /workspace/answer.txt.",
                ["head -c 200 orders.json",
                 "python3 -c 'import json; print(sum(o[\"price\"] for o in json.load(open(\"orders.json\"))))' > answer.txt"],
                answer_is(sum(o["price"] for o in orders)), files={"orders.json": json.dumps(orders, indent=1) + "\n"})


@template("python_power", "scripts", requires=("python3",))
def _python_power(rng: random.Random) -> Spec:
    a, b = rng.randint(2, 99), rng.randint(20, 60)
    return Spec(f"Compute {a} to the power of {b} exactly (all digits) and write it to /workspace/answer.txt.",
                [f"echo $(({a}**{b}))", f"python3 -c 'print({a}**{b})' > answer.txt"], answer_is(a ** b))


@template("fix_syntax_error", "scripts")
def _fix_syntax(rng: random.Random) -> Spec:
    word, n = rng.choice(WORDS), rng.randint(1, 99)
    script = rng.choice(("run.sh", "check.sh", "deploy.sh"))
    broken = f'#!/bin/bash\ncount={n}\nif [ "$count" -gt 0 ]; then\n  echo "{word} $count"\n'
    return Spec(f"The script {script} fails with a syntax error. Fix it so that `bash {script}` prints: {word} {n}",
                [f"bash {script}", f"cat -n {script}", f"echo fi >> {script}", f"bash {script}"],
                f'[ "$(cd {WS} && bash {script} 2>&1)" = {q(f"{word} {n}")} ]', files={script: broken})


# ---------------------------------------------------------------- environment variables
@template("export_variable", "env")
def _export_variable(rng: random.Random) -> Spec:
    var = rng.choice(("APP_MODE", "DEPLOY_ENV", "LOG_LEVEL", "REGION", "FEATURE_FLAG"))
    value = f"{rng.choice(WORDS)}{rng.randint(1, 9)}"
    return Spec(f"Set the environment variable {var} to {value} and export it, so programs started from this shell see it.",
                [f"echo ${var}", f"export {var}={value}"], f'[ {agent_env(var)} = {q(value)} ]')


@template("read_env_token", "env")
def _read_env(rng: random.Random) -> Spec:
    var = rng.choice(("API_TOKEN", "DB_PASSWORD", "SERVICE_KEY"))
    token = "".join(rng.choice("abcdef0123456789") for _ in range(16))
    return Spec(f"The environment variable {var} holds a secret. Write its value to /workspace/token.txt.",
                ["env | sort | head -n 5", f'echo "${var}" > token.txt'], file_is("token.txt", token + "\n"),
                commands=[f"export {var}={token}"])


@template("path_tool", "env")
def _path_tool(rng: random.Random) -> Spec:
    tool = rng.choice(("hello", "greet", "sayhi", "banner"))
    msg = rng.choice(WORDS)
    return Spec(f"Make a command named {tool} available on your PATH: a script in ~/bin that prints {msg}.",
                ["mkdir -p ~/bin", f"printf '#!/bin/sh\\necho {msg}\\n' > ~/bin/{tool}", f"chmod +x ~/bin/{tool}",
                 'export PATH="$HOME/bin:$PATH"', tool],
                f'[ "$(PATH={agent_env("PATH")} {tool} 2>/dev/null)" = {q(msg)} ]')


@template("source_env_file", "env")
def _source_env_file(rng: random.Random) -> Spec:
    port, mode = rng.randint(3000, 9000), rng.choice(("debug", "release", "staging"))
    content = f"APP_PORT={port}\nAPP_MODE={mode}\n"
    return Spec("Load the settings in /workspace/.env into your shell as exported environment variables, "
                "so that programs you start see APP_PORT and APP_MODE.",
                ["cat .env", "set -a; . ./.env; set +a", "printenv APP_PORT"],
                f'[ {agent_env("APP_PORT")} = {port} ] && [ {agent_env("APP_MODE")} = {mode} ]',
                files={".env": content})


# ---------------------------------------------------------------- pipes and redirection
@template("split_streams", "redirection")
def _split_streams(rng: random.Random) -> Spec:
    present = fname(rng, "txt")
    missing = f"missing_{rng.choice(WORDS)}.txt"
    return Spec(f"Run `ls {present} {missing}` so that its normal output goes to /workspace/out.txt and its "
                "error messages go to /workspace/err.txt.",
                [f"ls {present} {missing}", f"ls {present} {missing} > out.txt 2> err.txt"],
                f"grep -qx {present} {WS}/out.txt 2>/dev/null && grep -q 'No such file' {WS}/err.txt 2>/dev/null",
                files={present: "x\n"})


@template("pipeline_top_service", "redirection")
def _top_service(rng: random.Random) -> Spec:
    counts = dict(zip(rng.sample(SERVICES, 4), rng.sample(range(1, 15), 4)))
    lines = [f"svc={svc} status=ok" for svc, c in counts.items() for _ in range(c)]
    rng.shuffle(lines)
    top = max(counts, key=counts.__getitem__)
    return Spec("events.txt has one event per line. Which service (the svc= value) has the most events? "
                "Write only the service name to /workspace/answer.txt.",
                ["head -n 3 events.txt",
                 "cut -d' ' -f1 events.txt | cut -d= -f2 | sort | uniq -c | sort -rn | head -n 1"
                 " | awk '{print $2}' > answer.txt"],
                answer_is(top), files={"events.txt": text(lines)})


@template("heredoc_config", "redirection")
def _heredoc_config(rng: random.Random) -> Spec:
    host, port = rng.choice(CITIES), rng.randint(1024, 9999)
    content = f"host={host}\nport={port}\n"
    return Spec(f"Create /workspace/service.conf with exactly two lines: host={host} and then port={port}.",
                ["ls", f"cat > service.conf <<'EOF'\nhost={host}\nport={port}\nEOF", "cat service.conf"],
                file_is("service.conf", content))


@template("merge_streams", "redirection")
def _merge_streams(rng: random.Random) -> Spec:
    present = fname(rng, "txt")
    missing = f"missing_{rng.choice(WORDS)}.txt"
    return Spec(f"Run `cat {present} {missing}` and save everything it prints, normal output and error messages "
                "together, to /workspace/all.txt.",
                [f"cat {present} {missing}", f"cat {present} {missing} > all.txt 2>&1"],
                f"grep -qx {q(present.split('.')[0])} {WS}/all.txt 2>/dev/null && "
                f"grep -q 'No such file or directory' {WS}/all.txt 2>/dev/null",
                files={present: present.split(".")[0] + "\n"})


# ---------------------------------------------------------------- permissions
@template("chmod_private", "permissions")
def _chmod_private(rng: random.Random) -> Spec:
    name = rng.choice(("secret.key", "credentials.txt", "id_token", "vault.pass"))
    return Spec(f"Make {name} readable and writable only by its owner (no permissions for anyone else).",
                [f"ls -l {name}", f"chmod 600 {name}"], f'[ "$(stat -c %a {WS}/{name})" = 600 ]',
                files={name: f"{rng.randint(10**8, 10**9)}\n"})


@template("run_script", "permissions")
def _run_script(rng: random.Random) -> Spec:
    code = f"{rng.choice(WORDS)}-{rng.randint(1000, 9999)}"
    return Spec("Make run.sh executable, run it, and save what it prints to /workspace/result.txt.",
                ["./run.sh", "chmod +x run.sh", "./run.sh > result.txt"],
                f"[ -x {WS}/run.sh ] && {file_is('result.txt', code + chr(10))}",
                files={"run.sh": f"#!/bin/bash\necho {code}\n"})


@template("readonly_dir", "permissions")
def _readonly_dir(rng: random.Random) -> Spec:
    folder = rng.choice(("published", "release", "frozen"))
    files = {f"{folder}/{w}.txt": f"{w}\n" for w in rng.sample(WORDS, 3)}
    return Spec(f"Make the directory {folder}/ read-only for everyone: mode 555 (files can still be read, none created).",
                [f"ls -ld {folder}", f"chmod 555 {folder}"], f'[ "$(stat -c %a {WS}/{folder})" = 555 ]', files=files)


@template("chmod_group_read", "permissions")
def _chmod_group_read(rng: random.Random) -> Spec:
    name = fname(rng, "csv")
    return Spec(f"Set the permissions of {name} so that the owner can read and write it, its group can only "
                "read it, and others have no access.",
                [f"ls -l {name}", f"chmod 640 {name}", f"ls -l {name}"],
                f'[ "$(stat -c %a {WS}/{name})" = 640 ]', files={name: "id,value\n1,2\n"})


# ---------------------------------------------------------------- archives
@template("tar_create", "archives", requires=("tar", "gzip"))
def _tar_create(rng: random.Random) -> Spec:
    names = [f"{w}.md" for w in rng.sample(WORDS, rng.randint(2, 5))]
    files = {f"docs/{n}": text(word_lines(rng, 2)) for n in names}
    check = (f'L="$(tar -tzf {WS}/docs.tar.gz 2>/dev/null)" && '
             + " && ".join(f'printf "%s\\n" "$L" | grep -qx docs/{n}' for n in names))
    return Spec("Create a gzip-compressed tar archive /workspace/docs.tar.gz containing the docs/ directory.",
                ["ls docs", "tar -czf docs.tar.gz docs"], check, files=files)


@template("tar_extract", "archives", requires=("tar", "gzip"))
def _tar_extract(rng: random.Random) -> Spec:
    inner = f"{rng.choice(STEMS)}.txt"
    content = text(word_lines(rng, 3))
    return Spec("Extract the archive bundle.tar.gz in /workspace (it contains a directory bundle/).",
                ["tar -tzf bundle.tar.gz", "tar -xzf bundle.tar.gz"],
                f"[ -d {WS}/bundle ] && {file_is('bundle/' + inner, content)}",
                files={f"stage/bundle/{inner}": content},
                commands=["tar -czf bundle.tar.gz -C stage bundle", "rm -rf stage"])


@template("gzip_file", "archives", requires=("gzip",))
def _gzip_file(rng: random.Random) -> Spec:
    name = fname(rng, "log")
    content = text(log_lines(rng, rng.randint(5, 20)))
    return Spec(f"Compress {name} with gzip so that only {name}.gz remains.",
                [f"ls -l {name}", f"gzip {name}"],
                f"[ ! -e {WS}/{name} ] && gzip -dc {WS}/{name}.gz 2>/dev/null | cmp -s - <(printf %s {q(content)})",
                files={name: content})


@template("tar_count_files", "archives", requires=("tar", "gzip"))
def _tar_count_files(rng: random.Random) -> Spec:
    names = sorted({f"{rng.choice(STEMS)}_{i}.txt" for i in range(rng.randint(2, 7))})
    return Spec("How many regular files does the archive logs.tar.gz contain? Write just the number to "
                "/workspace/answer.txt (do not extract it).",
                ["tar -tzf logs.tar.gz", "tar -tzvf logs.tar.gz | grep -c '^-' > answer.txt"],
                answer_is(len(names)), files={f"stage/logs/{n}": f"{n}\n" for n in names},
                commands=["tar -czf logs.tar.gz -C stage logs", "rm -rf stage"])


# ---------------------------------------------------------------- errors and recovery
@template("missing_config", "errors")
def _missing_config(rng: random.Random) -> Spec:
    name = rng.choice(("settings.conf", "app.ini", "config.yaml"))
    content = text([f"{k}={rng.choice(WORDS)}" for k in rng.sample(("mode", "owner", "theme", "zone"), 3)])
    return Spec(f"Show the contents of {name}. If it does not exist yet, create it as a copy of {name}.example.",
                [f"cat {name}", "ls", f"cp {name}.example {name}", f"cat {name}"],
                file_is(name, content), files={f"{name}.example": content})


@template("command_exists", "errors")
def _command_exists(rng: random.Random) -> Spec:
    tool = rng.choice(MISSING_TOOLS + PRESENT_TOOLS)
    answer = "yes" if shutil.which(tool, path=SANDBOX_PATH) else "no"
    return Spec(f"Is the command `{tool}` installed in this environment? Write yes or no to /workspace/answer.txt.",
                [f"{tool} --version | head -n 1",
                 f"if command -v {tool} >/dev/null; then echo yes; else echo no; fi > answer.txt"],
                answer_is(answer))


@template("cd_missing_dir", "errors")
def _cd_missing(rng: random.Random) -> Spec:
    folder = rng.choice(("build", "output", "dist", "release"))
    name = fname(rng, "txt")
    return Spec(f"Go into the directory {folder} (create it first if it does not exist) and create an empty file {name} there.",
                [f"cd {folder}", f"mkdir {folder}", f"cd {folder}", f"touch {name}"],
                f"[ -f {WS}/{folder}/{name} ]")


@template("missing_module", "errors", requires=("python3",))
def _missing_module(rng: random.Random) -> Spec:
    module = rng.choice(("yamlx", "fastjsonx", "colorlog2", "requestz", "tabulatex"))
    return Spec("app.py fails when you run it with python3. Write the name of the module it cannot find to "
                "/workspace/answer.txt.",
                ["python3 app.py", f"echo {module} > answer.txt"], answer_is(module),
                files={"app.py": f"import json\nimport {module}\n\nprint(json.dumps({{'ok': True}}))\n"})
