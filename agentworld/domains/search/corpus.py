"""The `search` domain's corpus and index: CPython's own documentation in an SQLite FTS5 index.

The corpus ships with the interpreter, so every machine with the same Python builds the same
index: the ~80 reference topics of `pydoc_data.topics` (`topic:assert`, ...), the docstrings
of a fixed list of ~150 pure-Python standard-library modules (`module:json`) and of their
public functions and classes rendered with pydoc's plain-text renderer (`func:json.dumps`,
`class:json.JSONDecoder`). Text is folded to ASCII, memory addresses and machine paths are
scrubbed, so nothing in it depends on the machine.

The index is built once per (Python version, CORPUS_VERSION) in a child interpreter (clean
environment, PYTHONHASHSEED=0, the stdlib imported from scratch) into a temp file that is moved
into place atomically under a file lock: parallel workers never see a half-built index. Envs
open it read-only (`mode=ro&immutable=1`). The cache dir is `$AGENTWORLD_SEARCH_CACHE`, else
`<tmp>/agentworld-search`; the file name carries the Python version and CORPUS_VERSION.

Tables: `documents(rowid, doc_id, kind, title, body)` (rowid order == doc_id order),
`docs` (FTS5 over title and body, external content, porter + unicode61 tokenizer),
`facts(kind, key, value, doc_id)` (what tasks are generated from) and `meta(key, value)`.

Run as a script: `python search_corpus.py build OUT.sqlite` (used by `ensure_index`).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CORPUS_VERSION = "1"
CACHE_ENV_VAR = "AGENTWORLD_SEARCH_CACHE"
BUILD_TIMEOUT_S = 600.0
MAX_BODY_CHARS = 24_000  # long class pages are cut (deterministically) at a line boundary

MODULES: tuple[str, ...] = tuple("""
abc argparse ast asyncio base64 bdb bisect calendar cmd code codecs codeop collections collections.abc
colorsys compileall concurrent.futures configparser contextlib contextvars copy copyreg csv dataclasses
datetime decimal difflib dis doctest email email.header email.message email.mime.text email.parser
email.utils enum filecmp fileinput fnmatch fractions ftplib functools genericpath getopt gettext glob
graphlib gzip hashlib heapq hmac html html.entities html.parser http http.client http.cookies http.server
imaplib importlib importlib.metadata importlib.resources inspect io ipaddress json json.decoder
json.encoder keyword linecache locale logging logging.handlers lzma mailbox mimetypes modulefinder
multiprocessing netrc ntpath numbers opcode operator optparse os os.path pathlib pdb pickle pickletools
pkgutil plistlib poplib posixpath pprint profile pstats py_compile pyclbr queue quopri random re reprlib
rlcompleter runpy sched secrets selectors shelve shlex shutil signal smtplib socket socketserver sqlite3
statistics string stringprep struct subprocess symtable tabnanny tarfile tempfile textwrap threading
timeit token tokenize tomllib trace traceback tracemalloc types typing unittest urllib.error urllib.parse
urllib.request urllib.robotparser uuid warnings wave weakref webbrowser wsgiref.headers
wsgiref.simple_server wsgiref.util xml.dom.minidom xml.etree.ElementTree xml.sax xml.sax.saxutils
xmlrpc.client zipapp zipfile zipimport
""".split())

_ASCII = {"\u2014": "--", "\u2013": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
          "\u2026": "...", "\u00a0": " ", "\u2022": "*", "\u2192": "->", "\u2190": "<-", "\u00d7": "x",
          "\u2264": "<=", "\u2265": ">=", "\u2260": "!=", "\u00b1": "+/-", "\u2212": "-"}


# ----------------------------------------------------------------------------- locating the index
def default_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    # Not under $AGENTWORLD_HOME: the project tree is copied file by file in tests (and .cache/ is
    # not git-ignored), so a 6 MB index there would travel with it.
    return Path(tempfile.gettempdir()) / "agentworld-search"


def index_name() -> str:
    v = sys.version_info
    return f"corpus-py{v.major}.{v.minor}.{v.micro}-v{CORPUS_VERSION}.sqlite"


def ensure_index(cache_dir: str | Path | None = None) -> Path:
    """Path of the finished index, building it first (once, under a lock) if it is missing."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = cache_dir / index_name()
    if path.is_file():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f".{index_name()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others wait, then find the file
        if path.is_file():
            return path
        fd, tmp = tempfile.mkstemp(prefix=f".{index_name()}.", suffix=".tmp", dir=cache_dir)
        os.close(fd)
        os.unlink(tmp)
        try:
            with tempfile.TemporaryDirectory(prefix="agentworld-search-build-") as work:
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0",
                       "LC_ALL": "C.UTF-8", "TZ": "UTC", "HOME": work, "PYTHONDONTWRITEBYTECODE": "1"}
                out = subprocess.run([sys.executable, "-s", "-P", str(Path(__file__).resolve()), "build", tmp],
                                     cwd=work, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if out.returncode != 0 or not Path(tmp).is_file():
                raise RuntimeError(f"building the search index failed (exit {out.returncode}): "
                                   f"{(out.stderr or out.stdout)[-1500:]}")
            os.chmod(tmp, 0o444)
            os.replace(tmp, path)
        finally:
            for leftover in (tmp, tmp + "-journal"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
    return path


# ----------------------------------------------------------------------------- building (child)
def _asciify(text: str) -> str:
    import unicodedata

    out = []
    for ch in text:
        if ch in ("\n", "\t") or 32 <= ord(ch) < 127:
            out.append(ch)
        elif ch in _ASCII:
            out.append(_ASCII[ch])
        else:
            folded = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(folded if folded else "?")
    return "".join(out)


def _scrubber():
    import re

    machine = sorted({p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.expanduser("~"),
                                  os.getcwd(), tempfile.gettempdir()) if p and len(p) > 4}, key=len, reverse=True)
    address = re.compile(r" at 0x[0-9a-fA-F]+")
    blank_runs = re.compile(r"\n{3,}")

    def scrub(text: str) -> str:
        for p in machine:
            text = text.replace(p, "<path>")
        text = address.sub("", text)
        text = "\n".join(line.rstrip() for line in _asciify(text).replace("\r", "").split("\n"))
        return blank_runs.sub("\n\n", text).strip("\n")
    return scrub


def _cut(body: str, limit: int = MAX_BODY_CHARS) -> str:
    if len(body) <= limit:
        return body
    cut = body.rfind("\n", 0, limit)
    return body[: cut if cut > 0 else limit] + "\n[... documentation cut here ...]"


def _simple_repr(value: object) -> str | None:
    """repr of a machine-independent scalar constant (short), else None."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, (str, bytes)) and 0 < len(value) <= 60:
        text = repr(value)
    else:
        return None
    return text if len(text) <= 70 and "<path>" not in text and not text.startswith("<") else None


def build_documents() -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str, str, str]]]:
    """(documents, facts): documents are (doc_id, kind, title, body); facts (kind, key, value, doc_id)."""
    import importlib
    import inspect
    import pydoc
    import warnings
    from pydoc_data.topics import topics

    scrub = _scrubber()
    docs: dict[str, tuple[str, str, str, str]] = {}
    facts: list[tuple[str, str, str, str]] = []

    for key in sorted(topics):
        text = scrub(topics[key])
        first = text.split("\n", 1)[0].strip()
        docs[f"topic:{key}"] = (f"topic:{key}", "topic", first or key, text)
    for keyword, target in sorted(pydoc.Helper.keywords.items()):
        topic = target[0] if isinstance(target, tuple) else target
        if topic and topic.isupper():
            topic = pydoc.Helper.topics.get(topic, ("",))[0]
            topic = topic if isinstance(topic, str) else ""
        if topic and topic in topics:
            facts.append(("keyword", keyword, f"topic:{topic}", f"topic:{topic}"))

    modules = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in MODULES:
            modules[name] = importlib.import_module(name)

    def public(mod_name: str, mod: object) -> list[tuple[str, object]]:
        names = getattr(mod, "__all__", None)
        if not isinstance(names, (list, tuple)):
            names = [n for n in dir(mod) if not n.startswith("_")]
        out = []
        for n in sorted(set(names)):
            obj = getattr(mod, n, None)
            if isinstance(n, str) and not n.startswith("_") and obj is not None:
                out.append((n, obj))
        return out

    # Each function/class belongs to one listed module: the one named in its __module__, else
    # the first listed package it lives under (so json.JSONDecoder is class:json.decoder.JSONDecoder).
    claimed: dict[tuple[str, str], str] = {}
    for exact in (True, False):
        for mod_name in MODULES:
            for n, obj in public(mod_name, modules[mod_name]):
                if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                    continue
                owner = getattr(obj, "__module__", None) or ""
                qual = getattr(obj, "__qualname__", n)
                if qual != n:
                    continue
                ok = owner == mod_name if exact else owner.startswith(mod_name + ".")
                if ok and (owner, qual) not in claimed:
                    claimed[(owner, qual)] = mod_name

    members: dict[str, list[tuple[str, object]]] = {m: [] for m in MODULES}
    for mod_name in MODULES:
        for n, obj in public(mod_name, modules[mod_name]):
            owner = getattr(obj, "__module__", None) or ""
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and claimed.get((owner, n)) == mod_name:
                members[mod_name].append((n, obj))

    for mod_name in MODULES:
        mod = modules[mod_name]
        doc = scrub(inspect.getdoc(mod) or "")
        summary = doc.split("\n", 1)[0].strip() if doc else ""
        lines = [f"{mod_name} - {summary}" if summary else mod_name, ""]
        if doc:
            lines += [doc, ""]
        funcs = [(n, o) for n, o in members[mod_name] if inspect.isfunction(o)]
        classes = [(n, o) for n, o in members[mod_name] if inspect.isclass(o)]
        if classes:
            lines.append("CLASSES")
            for n, o in classes:
                first = (inspect.getdoc(o) or "").split("\n", 1)[0]
                lines.append(f"    {n} - {first}" if first else f"    {n}")
            lines.append("")
        if funcs:
            lines.append("FUNCTIONS")
            for n, o in funcs:
                try:
                    sig = str(inspect.signature(o))
                except (TypeError, ValueError):
                    sig = "(...)"
                lines.append(f"    {n}{sig}")
            lines.append("")
        data = []
        for n, value in public(mod_name, mod):
            if n.isupper() or n.startswith(("ascii_", "hex", "oct", "digits", "punctuation", "printable", "whitespace")):
                if inspect.ismodule(value) or callable(value):
                    continue
                text = _simple_repr(value)
                if text is not None:
                    text = scrub(text)
                    data.append(f"    {n} = {text}")
                    facts.append(("constant", f"{mod_name}.{n}", text, f"module:{mod_name}"))
        if data:
            lines += ["DATA", *data, ""]
        docs[f"module:{mod_name}"] = (f"module:{mod_name}", "module", lines[0], scrub("\n".join(lines)))

        for n, obj in members[mod_name]:
            kind = "class" if inspect.isclass(obj) else "func"
            doc_id = f"{kind}:{mod_name}.{n}"
            try:
                rendered = pydoc.plaintext.document(obj, n)
            except Exception:  # noqa: BLE001 - pydoc can trip on odd objects; skip them
                continue
            body = _cut(scrub(rendered))
            first = (inspect.getdoc(obj) or "").split("\n", 1)[0].strip()
            title = f"{mod_name}.{n}" + (f" - {scrub(first)}" if first else "")
            docs[doc_id] = (doc_id, kind, title[:120], body)
            facts.append(("member", n, mod_name, doc_id))
            if kind != "func":
                continue
            try:
                params = list(inspect.signature(obj).parameters.values())
            except (TypeError, ValueError):
                continue
            if params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
                facts.append(("first_param", f"{mod_name}.{n}", params[0].name, doc_id))
            for p in params:
                if p.default is not p.empty:
                    text = _simple_repr(p.default)
                    if text is not None and f"{p.name}={text}" in body:
                        facts.append(("default", f"{mod_name}.{n}|{p.name}", scrub(text), doc_id))

    return sorted(docs.values()), sorted(set(facts))


def write_index(path: str) -> None:
    import sqlite3

    documents, facts = build_documents()
    conn = sqlite3.connect(path)
    try:
        conn.executescript("""
            CREATE TABLE documents(rowid INTEGER PRIMARY KEY, doc_id TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,
                                   title TEXT NOT NULL, body TEXT NOT NULL);
            CREATE VIRTUAL TABLE docs USING fts5(title, body, content='documents', content_rowid='rowid',
                                                 tokenize='porter unicode61');
            CREATE TABLE facts(kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, doc_id TEXT NOT NULL);
            CREATE INDEX facts_kind ON facts(kind, key);
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        """)
        conn.executemany("INSERT INTO documents(rowid, doc_id, kind, title, body) VALUES (?, ?, ?, ?, ?)",
                         [(i + 1, *d) for i, d in enumerate(documents)])
        conn.execute("INSERT INTO docs(docs) VALUES ('rebuild')")
        conn.execute("INSERT INTO docs(docs) VALUES ('optimize')")
        conn.executemany("INSERT INTO facts VALUES (?, ?, ?, ?)", facts)
        v = sys.version_info
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("corpus_version", CORPUS_VERSION), ("python", f"{v.major}.{v.minor}.{v.micro}"),
            ("documents", str(len(documents))), ("facts", str(len(facts)))])
        conn.commit()
        conn.execute("VACUUM")
    finally:
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: search_corpus.py build OUT.sqlite")
    write_index(sys.argv[2])
