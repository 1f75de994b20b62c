"""Behaviour policies that play the Terminal env to produce diverse real trajectories.

Expert-only data teaches a world model only the happy path (Word2World), so collection mixes:
- `scripted`: the task's solution, with the inspection steps real agents interleave;
- `exploratory`: valid but aimless commands over the task's files, words and directories,
  picking up names it sees in earlier observations the way an agent reads `ls` output;
- `erroneous`: typos, wrong flags, missing files, unknown commands and broken syntax, mixed
  with valid steps, so the world model learns what errors look like.

A policy is built per episode from its task; `act(observation, history, rng)` is deterministic
given the rng state. `history` holds the episode's earlier (action, observation) pairs.
"""

from __future__ import annotations

import random
import re
from typing import Protocol
from collections.abc import Sequence

from agentworld.envs.base import Task

History = Sequence[tuple[str, str]]
POLICY_NAMES = ("scripted", "exploratory", "erroneous")

_NAME_RE = re.compile(r"(?<![\w/.-])([A-Za-z_][\w-]*\.[A-Za-z][A-Za-z0-9]{0,4})(?![\w.])")
_WORD_RE = re.compile(r"\b[a-z]{4,12}\b")
_GENERIC = ("ls", "ls -la", "ls -l", "pwd", "whoami", "id", "uname -s", "env | sort",
            "echo $HOME", "echo $PATH", "ls ~", "df -h /workspace", "du -sh .", "ls -R | head -n 20",
            "find . -maxdepth 2 -type f | sort | head", "cat /etc/os-release | head -n 2", "hostname",
            "echo $SHELL", "ls -a", "cd -", "cd ~", "cd /workspace", "history | tail -n 3", "type ls")
_MISSING_COMMANDS = ("python", "vi notes.txt", "nano file.txt", "ifconfig", "sudo ls", "apt install tree",
                     "tree", "kubectl get pods", "docker ps", "node -v", "pip install requests", "open .",
                     "ll", "cls", "dir", "systemctl status nginx", "service ssh start", "htop")
_BAD_SYNTAX = ("if [ -f {f} ]; then echo found", "for i in 1 2 3; do echo $i", "echo $(( 1 + ))",
               "echo \"unterminated", "cat {f} |", "while true do echo x; done", "[ -f {f} ] && ",
               "case {w} in", "echo ${{{w}", "fi", "done", "then echo {w}", "echo 'oops", "{f} = 3",
               "export {W}= value", "let x=1/0", "((x = 5 +))")
_BAD_FLAGS = ("ls --colour=sometimes", "ls -y", "wc --line {f}", "grep -P '(' {f}", "sort -k {f}",
              "head -n -x {f}", "cat --number-all {f}", "cut -f {f}", "tail +3x {f}", "mkdir -z {d}",
              "cp {f}", "mv {f}", "tar -xqf {f}", "chmod 999 {f}", "find . -nmae {f}", "du --max {d}",
              "touch -d yesterday-ish {f}", "sed -i s/a/ {f}", "awk '{{print $1' {f}", "uniq -z -q {f}",
              "tr {f}", "stat -q", "date +%Q --bogus", "seq a b")
_TYPOS = (("ls", "sl"), ("cat", "cta"), ("grep", "gerp"), ("echo", "ehco"), ("cd", "dc"), ("pwd", "pdw"),
          ("head", "haed"), ("tail", "tial"), ("mkdir", "mkdri"), ("sort", "srot"), ("wc", "cw"),
          ("find", "fnid"), ("touch", "tuoch"), ("chmod", "chmdo"), ("python3", "pyhton3"))


class Policy(Protocol):
    name: str

    def act(self, observation: str, history: History, rng: random.Random) -> str: ...


class _TaskVocabulary:
    """Names and words an agent could plausibly type for this task."""

    def __init__(self, task: Task) -> None:
        files = list(task.setup.get("files", {}))
        self.files = [f for f in files if not f.startswith("stage/")] or ["README"]
        self.dirs = sorted({f.rsplit("/", 1)[0] for f in self.files if "/" in f})
        self.words = sorted(set(_WORD_RE.findall(task.instruction)) | {"error", "test", "hello"})
        self.seen: list[str] = []

    def observe(self, observation: str) -> None:
        for name in _NAME_RE.findall(observation[:2000]):
            if name not in self.seen and name not in self.files:
                self.seen.append(name)
        del self.seen[:-30]

    def file(self, rng: random.Random) -> str:
        pool = self.files + self.seen
        return rng.choice(pool)

    def dir(self, rng: random.Random) -> str:
        return rng.choice(self.dirs) if self.dirs else "."

    def word(self, rng: random.Random) -> str:
        return rng.choice(self.words)


def _exploratory_command(vocab: _TaskVocabulary, rng: random.Random) -> str:
    f, d, w = vocab.file(rng), vocab.dir(rng), vocab.word(rng)
    templates = (
        f"cat {f}", f"head -n {rng.randint(1, 5)} {f}", f"tail -n {rng.randint(1, 5)} {f}", f"wc -l {f}",
        f"wc {f}", f"ls -l {f}", f"stat -c '%n %s %a' {f}", f"file {f}", f"grep -n {w} {f}",
        f"grep -c {w} {f}", f"sort {f} | head -n 5", f"sort {f} | uniq -c | sort -rn | head -n 3",
        f"cut -c1-20 {f} | head -n 3", f"tr a-z A-Z < {f} | head -n 2", f"ls {d}", f"ls -la {d}",
        f"cd {d}", f"find {d} -type f", f"du -sh {d}", f"echo {w}", f"echo {w} > /tmp/{w}.txt",
        f"cat /tmp/{w}.txt", f"mkdir -p /tmp/{w}", f"cp {f} /tmp/", "ls /tmp", f"grep -rl {w} . | head",
        f"md5sum {f}", f"nl {f} | head -n 4", f"awk '{{print NF}}' {f} | head -n 3", f"export NOTE={w}",
        "echo $NOTE", f"x={rng.randint(1, 99)}; echo $((x * {rng.randint(2, 9)}))", f"seq {rng.randint(1, 9)}",
        f"printf '%s\\n' {w} {vocab.word(rng)} | sort",
    )
    return rng.choice(templates + _GENERIC)


def _erroneous_command(vocab: _TaskVocabulary, rng: random.Random) -> str:
    f, d, w = vocab.file(rng), vocab.dir(rng), vocab.word(rng)
    kind = rng.randrange(5)
    if kind == 0:
        right, wrong = rng.choice(_TYPOS)
        return rng.choice((f"{wrong} {f}", wrong, f"{wrong} -l {d}"))
    if kind == 1:
        return rng.choice(_BAD_FLAGS).format(f=f, d=d)
    if kind == 2:
        ghost = rng.choice((f"missing_{w}.txt", f"{d}/nope.log", f"{f}.bak", "/workspace/none", f"../{f}", f"{w}/"))
        return rng.choice((f"cat {ghost}", f"cd {ghost}", f"rm {ghost}", f"wc -l {ghost}", f"head {ghost}",
                           f"grep {w} {ghost}", f"cp {ghost} /tmp/", f"source {ghost}", f"./{w}.sh"))
    if kind == 3:
        return rng.choice(_MISSING_COMMANDS)
    return rng.choice(_BAD_SYNTAX).format(f=f, w=w, W=w.upper())


class ScriptedPolicy:
    """Follows the task's solution, sometimes pausing to look around first."""

    name = "scripted"

    def __init__(self, task: Task, inspect_prob: float = 0.25) -> None:
        self.solution = list(task.solution)
        self.vocab = _TaskVocabulary(task)
        self.inspect_prob = inspect_prob
        self._next = 0

    def act(self, observation: str, history: History, rng: random.Random) -> str:
        if self._next >= len(self.solution):
            return "submit"
        if history and rng.random() < self.inspect_prob:
            return rng.choice(("ls", "pwd", "ls -la", f"cat {self.vocab.file(rng)}", f"ls {self.vocab.dir(rng)}"))
        self._next += 1
        return self.solution[self._next - 1]


class ExploratoryPolicy:
    """Random valid commands over the task's vocabulary; never aims at the goal."""

    name = "exploratory"

    def __init__(self, task: Task) -> None:
        self.vocab = _TaskVocabulary(task)

    def act(self, observation: str, history: History, rng: random.Random) -> str:
        self.vocab.observe(observation)
        return _exploratory_command(self.vocab, rng)


class ErroneousPolicy:
    """Mostly mistakes, with some valid exploration and some real solution steps in between."""

    name = "erroneous"

    def __init__(self, task: Task, error_prob: float = 0.5, solve_prob: float = 0.25) -> None:
        self.solution = list(task.solution)
        self.vocab = _TaskVocabulary(task)
        self.error_prob, self.solve_prob = error_prob, solve_prob
        self._next = 0

    def act(self, observation: str, history: History, rng: random.Random) -> str:
        self.vocab.observe(observation)
        roll = rng.random()
        if roll < self.error_prob:
            return _erroneous_command(self.vocab, rng)
        if roll < self.error_prob + self.solve_prob and self._next < len(self.solution):
            self._next += 1
            return self.solution[self._next - 1]
        return _exploratory_command(self.vocab, rng)


def make_policy(name: str, task: Task) -> Policy:
    """A fresh policy for one episode of `task`."""
    if name == "scripted":
        return ScriptedPolicy(task)
    if name == "exploratory":
        return ExploratoryPolicy(task)
    if name == "erroneous":
        return ErroneousPolicy(task)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")
