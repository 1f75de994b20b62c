"""The terminal domain's CPT corpus source `manpages`: `man` pages of the commands agents use in
the terminal and os domains (`--help` text where there is no page, `bash -c 'help X'` for shell
builtins); missing commands are skipped. Nothing is downloaded (agentworld/data/corpora.py)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from agentworld.data.corpora import Document, normalise_text

log = logging.getLogger(__name__)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OVERSTRIKE = re.compile(r".\x08")  # nroff bold/underline: "x\bx", "_\bx"
_BLANK_RUNS = re.compile(r"\n{3,}")



#: Commands agents run in the terminal / os domains (documented when present on this machine).
COMMANDS: tuple[str, ...] = tuple(sorted(set("""
apt-get awk base64 basename bzip2 cat chgrp chmod chown cmp column comm cp crontab curl cut date df diff
dirname dpkg du echo env expr file find fold free getent git grep groupadd groups gzip head hostname id
join journalctl jq kill ln ls md5sum mkdir mktemp mv nl nohup od paste patch pgrep pkill printf ps
python3 readlink realpath rev rm rmdir sed seq service sha256sum sleep sort split sqlite3 stat
systemctl tac tail tar tee test timeout touch tr tree truncate uname uniq unzip uptime useradd userdel
usermod wc wget which whoami xargs xxd xz zip
""".split())))

#: bash builtins, documented with `help NAME` (what actually runs in an agent's shell).
BUILTINS: tuple[str, ...] = tuple(sorted(set("""
alias bg cd declare dirs echo eval exec exit export fg getopts hash help history jobs kill let local
popd printf pushd pwd read readonly return set shift source test trap type ulimit umask unalias unset wait
""".split())))

MAN_TIMEOUT_S = 15.0
HELP_TIMEOUT_S = 5.0
MAN_WORKERS = 4


def _run_text(argv: list[str], timeout_s: float) -> tuple[int, str, str] | None:
    """(returncode, stdout, stderr) of `argv` in a plain C locale, or None if it cannot run."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C", "TERM": "dumb",
           "MANWIDTH": "80", "COLUMNS": "80", "MANPAGER": "cat", "PAGER": "cat", "SYSTEMD_PAGER": "cat",
           "HOME": os.environ.get("HOME", "/tmp")}
    try:
        out = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.returncode, out.stdout.decode("utf-8", "replace"), out.stderr.decode("utf-8", "replace")


def _clean_man(text: str) -> str:
    text = _OVERSTRIKE.sub("", _ANSI.sub("", text))
    text = "\n".join(line.expandtabs(8) for line in text.split("\n"))
    return _BLANK_RUNS.sub("\n\n", normalise_text(text))


def _man_page(cmd: str) -> str | None:
    """`man` page of `cmd` as plain 80-column text (no hyphenation/justification), or None."""
    if shutil.which("man") is None:
        return None
    for argv in (["man", "--nj", "--nh", "-P", "cat", cmd], ["man", "-P", "cat", cmd]):
        result = _run_text(argv, MAN_TIMEOUT_S)
        if result is None:
            return None
        code, stdout, stderr = result
        if code == 0:
            text = _clean_man(stdout)
            # A real page has a NAME section (minimised images ship a stub `man` that only complains).
            return text if re.search(r"^NAME$", text, re.MULTILINE) else None
        if "option" not in stderr:  # "No manual entry"; retry only when the options were refused
            return None
    return None


def _man_title(cmd: str, text: str) -> str:
    """The NAME section's line ("grep, egrep - print lines that match patterns"), else the command."""
    match = re.search(r"^NAME\n(.*?)(?:\n\n|\n\S|$)", text, re.MULTILINE | re.DOTALL)
    name = " ".join(match.group(1).split()) if match else ""
    return name or cmd


def _help_output(cmd: str) -> str | None:
    """`cmd --help` (stdout, else stderr) when `cmd` is installed and that looks like help text."""
    path = shutil.which(cmd)
    if path is None:
        return None
    result = _run_text([cmd, "--help"], HELP_TIMEOUT_S)
    if result is None:
        return None
    code, stdout, stderr = result
    text = normalise_text(_ANSI.sub("", stdout if stdout.strip() else stderr))
    if len(text.splitlines()) < 2 or (code != 0 and "usage" not in text.lower()):
        return None
    return text


def _builtin_help(name: str) -> str | None:
    if shutil.which("bash") is None:
        return None
    result = _run_text(["bash", "-c", f"help {name}"], HELP_TIMEOUT_S)
    if result is None or result[0] != 0:
        return None
    return normalise_text(result[1]) or None


def _command_doc(cmd: str) -> Document | None:
    page = _man_page(cmd)
    if page is not None:
        return Document("manpages", f"man:{cmd}", _man_title(cmd, page), page)
    text = _help_output(cmd)
    if text is not None:
        return Document("manpages", f"help:{cmd}", f"{cmd} --help", text)
    return None


def _builtin_doc(name: str) -> Document | None:
    text = _builtin_help(name)
    if text is None:
        return None
    first = text.split("\n", 1)[0]  # "cd: cd [-L|[-P [-e]] [-@]] [dir]"
    return Document("manpages", f"builtin:{name}", f"bash builtin {first}", text)


def manpages(commands: Sequence[str] = COMMANDS, builtins: Sequence[str] = BUILTINS) -> list[Document]:
    """Documentation of `commands` (man page, else `--help`) and bash `builtins` (`help NAME`).

    Commands that are not on this machine are skipped; pages shared by several commands
    (gzip/gunzip) are kept once, under the first command that has them.
    """
    jobs: list[Callable[[], Document | None]] = [lambda c=c: _command_doc(c) for c in commands]
    jobs += [lambda b=b: _builtin_doc(b) for b in builtins]
    with ThreadPoolExecutor(max_workers=MAN_WORKERS) as pool:  # subprocess-bound: threads suffice
        found = list(tqdm(pool.map(lambda job: job(), jobs), total=len(jobs), desc="manpages", disable=None))
    docs, seen = [], set()
    for doc in found:
        if doc is not None and doc.text not in seen:
            seen.add(doc.text)
            docs.append(doc)
    missing = [c for c, d in zip([*commands, *builtins], found) if d is None]
    if missing:
        log.info("manpages: no documentation found for %d command(s): %s", len(missing), " ".join(missing))
    return docs
