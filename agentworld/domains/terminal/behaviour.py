"""The Terminal's behaviour-policy vocabulary (the policies themselves are in behaviour.py).

- exploratory commands: valid but aimless commands over the task's files, words and
  directories, picking up names it sees in earlier observations the way an agent reads `ls`;
- erroneous commands: typos, wrong flags, missing files, unknown commands and broken syntax.
"""

from __future__ import annotations

import random
import re

from agentworld.envs.base import Task
from agentworld.envs.behaviour import POLICY_NAMES, History, Policy, behaviour_policy

__all__ = ["POLICY_NAMES", "History", "Policy", "make_policy"]

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


class _TaskVocabulary:
    """Names and words an agent could plausibly type for this task (the Terminal's DomainActions)."""

    done_action = "submit"

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

    def inspect(self, rng: random.Random) -> str:
        return rng.choice(("ls", "pwd", "ls -la", f"cat {self.file(rng)}", f"ls {self.dir(rng)}"))

    def explore(self, rng: random.Random) -> str:
        return _exploratory_command(self, rng)

    def mistake(self, rng: random.Random) -> str:
        return _erroneous_command(self, rng)

    def reply(self, observation: str, rng: random.Random, policy: str) -> str | None:
        return None  # a shell never waits for an answer


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


def make_policy(name: str, task: Task) -> Policy:
    """A fresh Terminal behaviour policy for one episode of `task`."""
    return behaviour_policy(name, task, _TaskVocabulary, inspect_prob=0.25)
