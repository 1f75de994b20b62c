"""Professional corpora available offline, for the continual pre-training (CPT) stage.

CPT trains the world model as a plain causal LM before it learns to predict observations. Its
data is (1) serialized agent trajectories, which inject the environments' state-transition
dynamics, and (2) the corpora built here, which inject the professional knowledge an environment
assumes: what `grep -i` does, what `json.dumps` accepts, which tools the CRM server exposes and
how it answers, which verbs a TextWorld parser understands. Qwen-AgentWorld mixes exactly these
two kinds of data (state-transition data plus professional corpora); `cpt.mix` sets the shares.

Nothing is downloaded. Every source reads what is already on the machine or in the project:

- `manpages`: `man` pages of the commands agents use in the terminal/os domains (`--help` text
  where there is no page, `bash -c 'help X'` for shell builtins); missing commands are skipped.
- `python_docs`: the CPython documentation corpus of the `search` domain
  (`agentworld.domains.search.corpus`: pydoc topics, stdlib modules, functions and classes).
- `mcp_schemas`: the tools of our MCP applications (tracker, crm, shop) with their JSON input
  schemas, and example calls with the exact observations the MCP env returns, run in-process
  against a seeded database (no server subprocess).
- `game_rules`: TextWorld's command list and logic rules (from the installed package's files),
  ScienceWorld's task list, action templates and task descriptions (the latter two need its JVM).

`build_corpora` writes one JSONL file per source (`<out_dir>/<source>.jsonl`: source, id, title,
text per line), sorted by id, long documents split into `<id>#<n>` parts, written atomically, so a
rerun on the same machine gives byte-identical files. `load_corpora` reads them back, validated.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import os
import random
import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agentworld.data.io import write_jsonl

__all__ = ["COMMANDS", "BUILTINS", "SOURCES", "Document", "build_corpora", "game_rules", "load_corpora",
           "manpages", "mcp_schemas", "normalise_text", "prepare_documents", "python_docs",
           "scienceworld_rules", "textworld_rules"]

log = logging.getLogger(__name__)

FIELDS = ("source", "id", "title", "text")


@dataclass(frozen=True)
class Document:
    """One corpus document: `source` is the corpus name, `id` is unique within the source."""

    source: str
    id: str
    title: str
    text: str


# ----------------------------------------------------------------------------- text helpers
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OVERSTRIKE = re.compile(r".\x08")  # nroff bold/underline: "x\bx", "_\bx"
_BLANK_RUNS = re.compile(r"\n{3,}")


def normalise_text(text: str) -> str:
    """`\\n` line endings, no trailing whitespace on any line, no leading/trailing blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _split_text(text: str, max_chars: int) -> list[str]:
    """Cut `text` into pieces of at most `max_chars`, at line boundaries where possible."""
    pieces = []
    while len(text) > max_chars:
        cut = text.rfind("\n", 0, max_chars + 1)
        if cut <= 0:
            cut = max_chars  # one very long line: hard cut
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    pieces.append(text)
    return [p.strip("\n") for p in pieces if p.strip()]


def prepare_documents(documents: Iterable[Document], max_chars_per_doc: int) -> list[Document]:
    """What `build_corpora` writes: normalised, empty ones dropped, sorted by id, long ones split."""
    if max_chars_per_doc < 1:
        raise ValueError(f"max_chars_per_doc must be >= 1, got {max_chars_per_doc}")
    by_id: dict[str, Document] = {}
    for doc in documents:
        text = normalise_text(doc.text)
        if not text.strip():
            continue
        if doc.id in by_id:
            raise ValueError(f"duplicate document id {doc.id!r} in source {doc.source!r}")
        by_id[doc.id] = Document(doc.source, doc.id, " ".join(doc.title.split()), text)
    out: list[Document] = []
    for doc_id in sorted(by_id):
        doc = by_id[doc_id]
        parts = _split_text(doc.text, max_chars_per_doc)
        if len(parts) == 1:
            out.append(doc)
            continue
        for n, part in enumerate(parts, start=1):
            out.append(Document(doc.source, f"{doc.id}#{n}", f"{doc.title} (part {n}/{len(parts)})", part))
    return out


# ----------------------------------------------------------------------------- 1. manpages
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


# ----------------------------------------------------------------------------- 2. python_docs
def python_docs() -> list[Document]:
    """CPython's documentation, as indexed for the `search` domain (topics, modules, functions, classes).

    Read from `search_corpus.ensure_index()` (built once per Python version in a clean child
    interpreter, then cached), so the text is the same whatever process or directory asks.
    """
    from agentworld.domains.search import corpus as search_corpus

    path = search_corpus.ensure_index()
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        rows = conn.execute("SELECT doc_id, title, body FROM documents ORDER BY doc_id").fetchall()
    finally:
        conn.close()
    return [Document("python_docs", doc_id, title, body) for doc_id, title, body in rows]


# ----------------------------------------------------------------------------- 3. mcp_schemas
SCHEMA_MARKER = "Input schema (JSON Schema):"
MCP_EXAMPLE_SEED = 0
MCP_MISTAKE_DRAWS = 12


def _observe(server: Any, action: str, run: Callable[[Any], Any]) -> str:
    """The observation the MCP env returns for `action`, computed with the tool called in-process
    (`run` runs a coroutine: an `asyncio.Runner`'s, so all calls share one event loop)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from agentworld.domains.mcp.env import parse_action, render

    tool, arguments, error = parse_action(action)
    if tool == "submit":
        return render({"isError": False, "result": {"episode": "submitted"}})
    if error is not None:
        return render({"isError": True, "error": error})
    try:
        result = run(server.call_tool(tool, arguments))
    except ToolError as exc:  # the server sends str(exc) as the error text
        return render({"isError": True, "error": str(exc)})
    if result.structured_content is not None:
        return render({"isError": False, "result": result.structured_content})
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    return render({"isError": False, "result": "\n".join(texts)})


def _tool_doc(app: str, description: str, tool: Any) -> Document:
    from agentworld.domains.mcp.env import tool_signature

    schema = json.dumps(tool.input_schema or {}, indent=2, sort_keys=True)
    text = (f'MCP server "{app}" ({description})\nTool: {tool.name}\n'
            f"Description: {(tool.description or '').strip()}\nSignature: {tool_signature(tool)[2:]}\n"
            f"{SCHEMA_MARKER}\n{schema}")
    return Document("mcp_schemas", f"mcp:{app}:tool:{tool.name}", f"{app} MCP tool {tool.name}", text)


def _app_docs(app: str, workdir: Path) -> list[Document]:
    from agentworld.domains.mcp.apps import app_module
    from agentworld.domains.mcp.apps.common import AppDB
    from agentworld.domains.mcp.seed import write_database

    module = app_module(app)
    db_path = workdir / f"{app}.db"
    write_database(app, MCP_EXAMPLE_SEED, db_path)
    server = module.build_server(AppDB(str(db_path)))  # opens the file per call: rewriting it resets the app
    with asyncio.Runner() as runner:
        tools = sorted(runner.run(server.list_tools()), key=lambda t: t.name)
        docs = _tool_docs(app, module, server, tools)
        docs += _example_docs(app, module, server, db_path, runner.run)
    return docs


def _tool_docs(app: str, module: Any, server: Any, tools: list[Any]) -> list[Document]:
    from agentworld.domains.mcp.env import tool_signature

    header = f'MCP server "{app}": {module.DESCRIPTION}.'
    instructions = (server.instructions or "").strip()
    overview = "\n".join([header, *([f"Instructions: {instructions}"] if instructions else []), "Tools:",
                          *(tool_signature(t) for t in tools),
                          'An agent calls a tool with one JSON object: {"tool": "<name>", "arguments": {...}}.',
                          'Results come back as {"isError":false,"result":...}, failures as '
                          '{"isError":true,"error":"..."}.'])
    docs = [Document("mcp_schemas", f"mcp:{app}:tools", f"{app} MCP server tools", overview)]
    return docs + [_tool_doc(app, module.DESCRIPTION, t) for t in tools]


def _example_docs(app: str, module: Any, server: Any, db_path: Path, run: Callable[[Any], Any]) -> list[Document]:
    """Each task kind's solution replayed on a freshly seeded database, then typical failed calls."""
    from agentworld.domains.mcp.env import McpActions, parse_action
    from agentworld.domains.mcp.seed import write_database
    from agentworld.domains.mcp.tasks import generate_task

    docs: list[Document] = []
    mistakes: list[str] = []
    for kind in module.KINDS:
        task = generate_task(MCP_EXAMPLE_SEED, app, kind)
        write_database(app, int(task.setup["data_seed"]), db_path)
        lines = [f'Example session with the "{app}" MCP server (task kind {kind}).', f"Task: {task.instruction}"]
        for action in [*task.solution, "submit"]:
            lines += [f"Action: {action}", f"Observation: {_observe(server, action, run)}"]
        docs.append(Document("mcp_schemas", f"mcp:{app}:example:{kind}", f"{app} MCP example: {kind}",
                             "\n".join(lines)))
        if not mistakes:  # erroneous actions, drawn from the env's own mistake model
            rng, vocabulary = random.Random(f"corpora:mcp:{app}"), McpActions(task)
            for _ in range(MCP_MISTAKE_DRAWS):
                action = vocabulary.mistake(rng)
                tool, arguments, _ = parse_action(action)
                # Non-object arguments are refused by the SDK client before they reach a server.
                if tool is None or isinstance(arguments, dict):
                    mistakes.append(action)
    write_database(app, MCP_EXAMPLE_SEED, db_path)
    lines = [f'Failed calls to the "{app}" MCP server and the errors they return.']
    for action in dict.fromkeys(mistakes):
        lines += [f"Action: {action}", f"Observation: {_observe(server, action, run)}"]
    docs.append(Document("mcp_schemas", f"mcp:{app}:example:errors", f"{app} MCP example: errors", "\n".join(lines)))
    return docs


def mcp_schemas(apps: Sequence[str] | None = None) -> list[Document]:
    """Tool lists, per-tool JSON input schemas and example calls of our MCP applications.

    The servers are built and called in-process (no subprocess) on seeded SQLite files in a
    temp dir; the observations are rendered exactly as `agentworld.domains.mcp.env` renders them.
    """
    try:
        from agentworld.domains.mcp.apps import APP_NAMES
        from agentworld.domains.mcp.env import probe
    except ImportError as exc:
        log.warning("mcp_schemas: MCP domain unavailable (%s); source is empty", exc)
        return []
    ok, reason = probe()
    if not ok:
        log.warning("mcp_schemas: %s; source is empty", reason)
        return []
    docs: list[Document] = []
    with tempfile.TemporaryDirectory(prefix="agentworld-corpora-mcp-") as workdir:
        for app in apps or APP_NAMES:
            docs += _app_docs(app, Path(workdir))
    return docs


# ----------------------------------------------------------------------------- 4. game_rules
def _package_dir(name: str) -> Path | None:
    """Directory of an installed package, found without importing it."""
    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _textworld_help(world2inform7: Path) -> str | None:
    """The in-game `help` text, read from the Inform 7 source TextWorld compiles into every game."""
    source = world2inform7.read_text(encoding="utf-8")
    start = source.find("Available commands:")
    end = source.find('Understand "help"', start)
    if start < 0 or end < 0:
        return None
    lines = re.findall(r'say "(.*?)\[line break\]";', source[start - 60:end])
    lines = [re.sub(r"\[[^\]]*\]", "", line) for line in lines]  # drop [fixed letter spacing] etc.
    return "\n".join(lines) if len(lines) > 3 else None


def textworld_rules() -> list[Document]:
    """TextWorld's `help` text, its logic rules (`.twl`: predicates, rules, commands) and game types."""
    root = _package_dir("textworld")
    if root is None:
        log.warning("game_rules: python package 'textworld' is not installed; TextWorld part skipped")
        return []
    docs = []
    help_file = root / "generator" / "inform7" / "world2inform7.py"
    help_text = _textworld_help(help_file) if help_file.is_file() else None
    if help_text is not None:
        docs.append(Document("game_rules", "textworld:help", "TextWorld commands (in-game help)",
                             "TextWorld text adventures understand these commands (output of `help`):\n" + help_text))
    else:
        log.warning("game_rules: TextWorld help text not found in %s", help_file)

    base = root / "generator" / "data" / "logic"
    base_files = {p.name: p.read_text(encoding="utf-8") for p in sorted(base.glob("*.twl"))}
    for name, text in base_files.items():
        docs.append(Document("game_rules", f"textworld:logic/{name}", f"TextWorld logic: {name}",
                             f"TextWorld game logic file {name} (types, predicates, rules, commands):\n{text}"))
    for challenge in sorted((root / "challenges").glob("tw_*")):  # tw_cooking, ...: the game types
        game = "tw-" + challenge.name[3:]
        module = challenge / f"{challenge.name[3:]}.py"
        about = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) if module.is_file() else None
        if about and about.strip():
            docs.append(Document("game_rules", f"textworld:{challenge.name}", f"TextWorld game type {game}",
                                 f"TextWorld game type {game}:\n{about}"))
        for path in sorted((challenge / "textworld_data" / "logic").glob("*.twl")):
            text = path.read_text(encoding="utf-8")
            if base_files.get(path.name) != text:  # only what the game type adds or changes
                docs.append(Document("game_rules", f"textworld:{challenge.name}/logic/{path.name}",
                                     f"TextWorld {game} logic: {path.name}",
                                     f"TextWorld game logic file {path.name} of game type {game}:\n{text}"))
    return docs


def scienceworld_rules(with_simulator: bool = True) -> list[Document]:
    """ScienceWorld's task list (package file) and, from the simulator, its action templates and
    the description of every task (variation 0). The simulator part needs Java (~15-20 s)."""
    try:
        from scienceworld.constants import TASKS
    except ImportError as exc:
        log.warning("game_rules: python package 'scienceworld' is unavailable (%s); ScienceWorld part skipped", exc)
        return []
    info = {t["task_name"]: t for t in TASKS}
    listing = "\n".join(f"- {t['task_id']} {t['task_name']}: {t['topic']}, {t['task']}"
                        for t in sorted(TASKS, key=lambda t: [int(x) for x in t["task_id"].split("-")]))
    docs = [Document("game_rules", "scienceworld:tasks", "ScienceWorld tasks",
                     f"ScienceWorld tasks (id, name: topic, task):\n{listing}")]
    if not with_simulator:
        return docs
    from agentworld.domains.scienceworld.env import AMBIGUOUS_PREFIX, REFUSAL, ScienceWorldTextEnv, probe

    ok, reason = probe()
    if not ok:
        log.warning("game_rules: ScienceWorld simulator unavailable (%s); action templates and task "
                    "descriptions skipped", reason)
        return docs
    env = ScienceWorldTextEnv()
    try:
        sw = env._server()  # the project's deterministic JVM launch; closed (and killed if need be) below
        names = sorted(str(n) for n in sw.get_task_names())
        for name in tqdm(names, desc="scienceworld tasks", disable=None):
            sw.load(name, 0, "", generateGoldPath=False)
            if len(docs) == 1:  # the templates do not depend on the task: read them once
                templates = sorted({str(a["action_example"]) for a in sw.get_possible_actions_with_IDs()})
                simplifications = ", ".join(sorted(str(s) for s in sw.get_possible_simplifications()))
                docs.append(Document("game_rules", "scienceworld:actions", "ScienceWorld action templates", "\n".join([
                    "ScienceWorld action templates (OBJ stands for an object or location in view):",
                    *(f"  {t}" for t in templates),
                    f'Unparseable input is answered with "{REFUSAL}"; input matching several objects starts '
                    f'with "{AMBIGUOUS_PREFIX}" and lists numbered choices to answer with.',
                    f"Optional simplifications: {simplifications}."])))
            meta = info.get(name, {})
            title = f"ScienceWorld task {name}" + (f" ({meta['topic']}: {meta['task']})" if meta else "")
            text = "\n".join([title + (f", task id {meta['task_id']}" if meta else ""),
                              f"Variations: {int(sw.get_max_variations(name))}",
                              f"Task description (variation 0): {str(sw.get_task_description()).strip()}"])
            docs.append(Document("game_rules", f"scienceworld:task:{name}", title, text))
    finally:
        env.close()
    return docs


def game_rules() -> list[Document]:
    """TextWorld and ScienceWorld rules (each part skipped, with a warning, when unavailable)."""
    return textworld_rules() + scienceworld_rules()


# ----------------------------------------------------------------------------- build / load
SOURCES: dict[str, Callable[[], list[Document]]] = {
    "manpages": manpages,
    "python_docs": python_docs,
    "mcp_schemas": mcp_schemas,
    "game_rules": game_rules,
}


def _check_sources(sources: Sequence[str]) -> None:
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise ValueError(f"unknown corpus source(s) {', '.join(map(repr, unknown))}; "
                         f"known sources: {', '.join(SOURCES)}")


def build_corpora(out_dir: Path, sources: Sequence[str], max_chars_per_doc: int = 20000) -> dict[str, dict[str, int]]:
    """Build each source into `out_dir/<source>.jsonl`; returns {source: {"documents": n, "chars": c}}."""
    _check_sources(sources)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict[str, int]] = {}
    for source in dict.fromkeys(sources):
        docs = prepare_documents(SOURCES[source](), max_chars_per_doc)
        write_jsonl(out_dir / f"{source}.jsonl", ({f: getattr(d, f) for f in FIELDS} for d in docs))
        counts[source] = {"documents": len(docs), "chars": sum(len(d.text) for d in docs)}
        log.info("corpora: %s: %d documents, %d chars", source, len(docs), counts[source]["chars"])
    return counts


def load_corpora(in_dir: Path, sources: Sequence[str]) -> list[Document]:
    """The documents of `sources`, read from `in_dir/<source>.jsonl` (in file order, source by source)."""
    _check_sources(sources)
    docs: list[Document] = []
    for source in dict.fromkeys(sources):
        path = Path(in_dir) / f"{source}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"corpus file {path} does not exist; run the `corpora` stage first "
                                    f"(agentworld.data.corpora.build_corpora)")
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                docs.append(_parse_line(path, lineno, line, source))
    return docs


def _parse_line(path: Path, lineno: int, line: str, source: str) -> Document:
    where = f"{path}, line {lineno}"
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object with fields {', '.join(FIELDS)}")
    for field in FIELDS:
        if not isinstance(record.get(field), str):
            raise ValueError(f"{where}: field {field!r} is missing or not a string")
    if record["source"] != source:
        raise ValueError(f"{where}: field 'source' is {record['source']!r}, expected {source!r}")
    for field in ("id", "text"):
        if not record[field].strip():
            raise ValueError(f"{where}: field {field!r} is empty")
    return Document(*(record[f] for f in FIELDS))
