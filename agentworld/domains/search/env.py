"""Search domain: a real full-text search engine (SQLite FTS5, BM25) over CPython's documentation.

The corpus and index are built once per Python version by `search_corpus.ensure_index` and opened
read-only (`mode=ro&immutable=1`, `PRAGMA query_only`): one connection per env, reused across
episodes, so `reset` only draws a task and clears the open page.

Actions (parsed strictly; anything else is an error observation naming the valid actions):
- `search(<query>)`: FTS5 query syntax (barewords, "phrases", AND/OR/NOT, NEAR, prefix*,
  `title:`/`body:` column filters). Top 8 by BM25 (title weighted 5x; ties by doc_id) with an
  FTS5 `snippet()` of the body; FTS5 errors come back as SQLite's own message.
- `open(<doc_id>)`: the document's title and its first page (~1,500 characters) with `[page i/n]`.
- `find_in_page(<text>)`: case-insensitive substring search in the open document's lines.
- `next_page()`: the next page of the open document.
- `answer(<text>)`: ends the episode; reward 1.0 if it matches the task's answer (normalised).

Tasks are generated from the index's `facts` table by seed (six kinds: module_of, first_param,
default_value, constant_value, keyword_topic, passage_doc); each is verified at generation time:
its solution's search really returns the target document.
"""

from __future__ import annotations

import random
import re
import sqlite3
from pathlib import Path
from typing import Any

from agentworld.domains.search import WORLD_MODEL_PROMPT
from agentworld.domains.search import corpus as search_corpus
from agentworld.envs.base import Task, TextEnv
from agentworld.envs.behaviour import Policy, behaviour_policy

DOMAIN = "search"
SYSTEM_PROMPT = WORLD_MODEL_PROMPT  # declared in agentworld/domains/search/__init__.py

VALID_ACTIONS = "search(<query>), open(<doc_id>), find_in_page(<text>), next_page(), answer(<text>)"
TOP_K = 8
PAGE_CHARS = 1500
MAX_OBS_CHARS = 4000
MAX_QUERY_CHARS = 500
MAX_ARG_CHARS = 2000
MAX_FIND_LINES = 20
QUERY_BUDGET = 20_000  # progress-handler calls (x1000 VM steps) before a query is interrupted
TASK_KINDS = ("module_of", "first_param", "default_value", "constant_value", "keyword_topic", "passage_doc")
_ACTION_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\((.*)\)$", re.DOTALL)
_ACTIONS = ("search", "open", "find_in_page", "next_page", "answer")
_WS = re.compile(r"\s+")


def probe() -> tuple[bool, str]:
    """Whether the search engine can run here: Python's sqlite3 with the FTS5 extension."""
    try:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(a, tokenize='porter unicode61')")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return False, (f"sqlite3 {sqlite3.sqlite_version} lacks FTS5 ({exc}); use a Python built against "
                       "an SQLite with FTS5 enabled (Debian's libsqlite3-0 has it)")
    try:
        from pydoc_data.topics import topics  # noqa: F401
    except ImportError as exc:
        return False, f"pydoc_data is missing from this Python ({exc}); install the full standard library"
    return True, f"sqlite {sqlite3.sqlite_version} with FTS5; corpus v{search_corpus.CORPUS_VERSION}"


def truncate(text: str, limit: int = MAX_OBS_CHARS) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n[... truncated {len(text) - (limit - 40)} characters]"
    return text[: limit - 40] + marker


def normalise_answer(text: str, case_sensitive: bool = False) -> str:
    text = _WS.sub(" ", text.strip())
    for _ in range(2):
        text = text.strip().rstrip(".").strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "`\"'" and text.count(text[0]) == 2:
            text = text[1:-1]
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
    return text if case_sensitive else text.casefold()


def paginate(body: str, page_chars: int = PAGE_CHARS) -> list[str]:
    """Split a body into pages of at most `page_chars` characters, at line boundaries."""
    pages, current = [], ""
    for line in body.split("\n"):
        while len(line) > page_chars:  # a single very long line is cut hard
            if current:
                pages.append(current)
                current = ""
            pages.append(line[:page_chars])
            line = line[page_chars:]
        candidate = f"{current}\n{line}" if current else line
        if current and len(candidate) > page_chars:
            pages.append(current)
            current = line
        else:
            current = candidate
    if current or not pages:
        pages.append(current)
    return pages


class SearchEngine:
    """Read-only queries over the FTS5 index (one connection, one thread)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.conn = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        self.conn.execute("PRAGMA query_only = 1")
        self._budget = 0
        self.conn.set_progress_handler(self._tick, 1000)
        self.doc_ids: list[str] = [r[0] for r in self._run("SELECT doc_id FROM documents ORDER BY rowid")]
        self._known = set(self.doc_ids)

    def _tick(self) -> int:
        self._budget -= 1
        return 1 if self._budget < 0 else 0

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        self._budget = QUERY_BUDGET
        return self.conn.execute(sql, params).fetchall()

    def search(self, query: str, k: int = TOP_K) -> tuple[int, list[tuple[str, str, str]]]:
        """(number of matches, top-k (doc_id, title, snippet)); raises sqlite3.Error on bad queries."""
        total = self._run("SELECT count(*) FROM docs WHERE docs MATCH ?", (query,))[0][0]
        rows = self._run(
            "WITH top AS (SELECT rowid AS r, round(bm25(docs, 5.0, 1.0), 6) AS score FROM docs "
            "WHERE docs MATCH ?1 ORDER BY score, rowid LIMIT ?2) "
            "SELECT d.doc_id, d.title, snippet(docs, 1, '**', '**', '...', 12) FROM top "
            "JOIN docs ON docs.rowid = top.r JOIN documents d ON d.rowid = top.r "
            "WHERE docs MATCH ?1 ORDER BY top.score, top.r", (query, k))
        return total, rows

    def document(self, doc_id: str) -> tuple[str, str] | None:
        if doc_id not in self._known:
            return None
        row = self._run("SELECT title, body FROM documents WHERE doc_id = ?", (doc_id,))
        return (row[0][0], row[0][1]) if row else None

    def facts(self, kind: str) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self._run("SELECT key, value, doc_id FROM facts WHERE kind = ? "
                                            "ORDER BY key, value, doc_id", (kind,))]

    def close(self) -> None:
        self.conn.close()


# ----------------------------------------------------------------------------- tasks
class TaskGenerator:
    """Seeded, verified tasks from the index's facts (see module docstring)."""

    def __init__(self, engine: SearchEngine) -> None:
        self.engine = engine
        members = engine.facts("member")
        owners: dict[str, set[str]] = {}
        for name, module, _ in members:
            owners.setdefault(name, set()).add(module)
        self.unique_members = [m for m in members if len(owners[m[0]]) == 1 and len(m[0]) >= 4]
        self.first_params = [f for f in engine.facts("first_param") if f[1] not in ("self", "cls")]
        self.defaults = engine.facts("default")
        self.constants = [c for c in engine.facts("constant") if len(c[1]) <= 40]
        self.keywords = engine.facts("keyword")
        self.passage_docs = [d for d in engine.doc_ids]

    def _finds(self, query: str, doc_id: str) -> bool:
        try:
            return any(r[0] == doc_id for r in self.engine.search(query)[1])
        except sqlite3.Error:
            return False

    def generate(self, seed: int, kind: str | None = None) -> Task:
        kind = kind or TASK_KINDS[seed % len(TASK_KINDS)]
        if kind not in TASK_KINDS:
            raise ValueError(f"unknown task kind {kind!r}; choose from {', '.join(TASK_KINDS)}")
        rng = random.Random(f"search-task:{seed}:{kind}")
        make = getattr(self, f"_{kind}")
        for _ in range(200):
            task = make(rng)
            if task is not None:
                return task
        raise RuntimeError(f"no verifiable {kind} task found for seed {seed}")

    @staticmethod
    def _task(kind: str, key: str, instruction: str, answer: str, solution: list[str], *,
              case_sensitive: bool = False, target: str = "") -> Task:
        return Task(task_id=f"search-{kind}-{key}", domain=DOMAIN, instruction=instruction,
                    setup={"kind": kind, "answer": answer, "case_sensitive": case_sensitive, "target": target},
                    solution=solution)

    @staticmethod
    def _words(dotted: str) -> str:
        return " ".join(p for p in re.split(r"[._]", dotted) if p)

    def _module_of(self, rng: random.Random) -> Task | None:
        name, module, doc_id = rng.choice(self.unique_members)
        query = f"title:{name}"
        if not self._finds(query, doc_id):
            return None
        what = "class" if doc_id.startswith("class:") else "function"
        return self._task("module_of", f"{module}.{name}",
                          f"Which Python standard-library module provides the {what} `{name}`? "
                          "Answer with the module's dotted name (for example `os.path`).",
                          module, [f"search({query})", f"open({doc_id})", f"answer({module})"], target=doc_id)

    def _first_param(self, rng: random.Random) -> Task | None:
        qual, param, doc_id = rng.choice(self.first_params)
        query = self._words(qual)
        if not self._finds(query, doc_id):
            return None
        name = qual.rsplit(".", 1)[1]
        return self._task("first_param", qual,
                          f"What is the name of the first parameter of the function `{qual}`? "
                          "Answer with the parameter name only.",
                          param, [f"search({query})", f"open({doc_id})", f"find_in_page({name}()", f"answer({param})"],
                          case_sensitive=True, target=doc_id)

    def _default_value(self, rng: random.Random) -> Task | None:
        key, value, doc_id = rng.choice(self.defaults)
        qual, param = key.split("|")
        query = self._words(qual)
        if not self._finds(query, doc_id):
            return None
        return self._task("default_value", f"{qual}.{param}",
                          f"What is the default value of the parameter `{param}` of `{qual}`? "
                          "Answer with the value exactly as the documentation writes it.",
                          value, [f"search({query})", f"open({doc_id})", f"find_in_page({param}=)",
                                  f"answer({value})"], case_sensitive=True, target=doc_id)

    def _constant_value(self, rng: random.Random) -> Task | None:
        qual, value, doc_id = rng.choice(self.constants)
        module, name = qual.rsplit(".", 1)
        query = f"{self._words(module)} {name}"
        if not self._finds(query, doc_id):
            return None
        return self._task("constant_value", qual,
                          f"What is the value of the constant `{name}` of the module `{module}`? "
                          "Answer with the value exactly as the module's documentation writes it.",
                          value, [f"search({query})", f"open({doc_id})", f"find_in_page({name} =)",
                                  f"answer({value})"], case_sensitive=True, target=doc_id)

    def _keyword_topic(self, rng: random.Random) -> Task | None:
        keyword, doc_id, _ = rng.choice(self.keywords)
        for query in (f'title:"{keyword}"', f"{keyword} statement", f'"{keyword}"'):
            if self._finds(query, doc_id):
                break
        else:
            return None
        return self._task("keyword_topic", keyword,
                          f"Which page of the Python reference topics documents the keyword `{keyword}`? "
                          "Answer with the page's doc id (for example `topic:assert`).",
                          doc_id, [f"search({query})", f"open({doc_id})", f"answer({doc_id})"], target=doc_id)

    def _passage_doc(self, rng: random.Random) -> Task | None:
        doc_id = rng.choice(self.passage_docs)
        doc = self.engine.document(doc_id)
        if doc is None:
            return None
        lines = [ln.strip(" |") for ln in doc[1].split("\n")]
        lines = [ln.strip() for ln in lines
                 if 40 <= len(ln.strip()) <= 90 and re.fullmatch(r"[A-Za-z][A-Za-z ,;'()-]*[A-Za-z.]", ln.strip())
                 and len(ln.split()) >= 6]
        if not lines:
            return None
        line = rng.choice(lines)
        phrase = re.sub(r"[^A-Za-z ]", " ", line)
        phrase = _WS.sub(" ", phrase).strip()
        query = f'"{phrase}"'
        try:
            total, rows = self.engine.search(query)
        except sqlite3.Error:
            return None
        if total != 1 or rows[0][0] != doc_id:
            return None
        return self._task("passage_doc", f"{doc_id}-{abs(hash_text(line)) % 10**8:08d}",
                          f'Which document contains the passage "{line}"? Answer with its doc id '
                          "(for example `module:json`).",
                          doc_id, [f"search({query})", f"open({doc_id})", f"find_in_page({line[:30].strip()})",
                                   f"answer({doc_id})"], target=doc_id)


def hash_text(text: str) -> int:
    """A process-independent hash (Python's str hash is salted per process)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


# ----------------------------------------------------------------------------- the env
class SearchEnv(TextEnv):
    """Gymnasium-style text env over the FTS5 documentation search engine (see module docstring)."""

    domain = DOMAIN
    env_version = "1"

    def __init__(self, sandbox_params: Any = None, *, cache_dir: str | Path | None = None) -> None:
        super().__init__()
        self.sandbox_params = sandbox_params  # unused: read-only in-process SQLite needs no sandbox
        self.cache_dir = cache_dir
        self._engine: SearchEngine | None = None
        self._tasks: TaskGenerator | None = None
        self._done = True
        self._steps = 0
        self._page: tuple[str, list[str], int] | None = None  # (doc_id, pages, index)

    @property
    def engine(self) -> SearchEngine:
        if self._engine is None:
            self._engine = SearchEngine(search_corpus.ensure_index(self.cache_dir))
            self._tasks = TaskGenerator(self._engine)
        return self._engine

    @property
    def index_path(self) -> Path:
        return self.engine.path

    def generate_task(self, seed: int, kind: str | None = None) -> Task:
        self.engine  # noqa: B018 - opens the index
        assert self._tasks is not None
        return self._tasks.generate(seed, kind)

    # ----------------------------------------------------------------- protocol
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self.episode_task(
            seed, options, lambda s, o: self.generate_task(s, o.get("kind")))
        self.engine  # noqa: B018
        self.task, self._done, self._steps, self._page = task, False, 0, None
        observation = f"{task.instruction}\n\nActions: {VALID_ACTIONS}"
        info = {"task_id": task.task_id, "kind": task.setup.get("kind"), "seed": seed,
                "documents": len(self.engine.doc_ids)}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self.task is None:
            raise RuntimeError("episode is over (or never started); call reset() first")
        self._steps += 1
        name, observation, ok, extra = self._dispatch(action)
        solved, terminated = False, False
        if name == "answer" and ok:
            solved = self.check(extra.pop("answer_text"))
            terminated = True
        self._done = terminated
        info = {"task_id": self.task.task_id, "step": self._steps, "action_type": name, "error": not ok,
                "solved": solved, "open_doc": self._page[0] if self._page else None,
                "page": (self._page[2] + 1) if self._page else None, **extra}
        observation = observation.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates echoed back
        return truncate(observation), float(solved), terminated, False, info

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine, self._tasks = None, None
        self._done, self._page = True, None

    # ----------------------------------------------------------------- actions
    def check(self, text: str) -> bool:
        assert self.task is not None
        cs = bool(self.task.setup.get("case_sensitive"))
        return normalise_answer(text, cs) == normalise_answer(str(self.task.setup.get("answer", "")), cs)

    def _dispatch(self, action: str) -> tuple[str, str, bool, dict[str, Any]]:
        text = action.strip()
        match = _ACTION_RE.match(text)
        if match is None:
            head = re.match(r"[A-Za-z_]*", text).group(0)
            if head in _ACTIONS:
                return "invalid", (f"Error: malformed action {_quote(text)}: arguments go in parentheses, "
                                   f"e.g. {head}(...). Valid actions: {VALID_ACTIONS}"), False, {}
            return "invalid", f"Error: unknown action {_quote(text)}. Valid actions: {VALID_ACTIONS}", False, {}
        name, arg = match.group(1), match.group(2)
        if name not in _ACTIONS:
            return "invalid", f"Error: unknown action {_quote(name + '(...)')}. Valid actions: {VALID_ACTIONS}", False, {}
        if len(arg) > MAX_ARG_CHARS:
            return name, f"Error: argument of {name}() too long ({len(arg)} characters; at most {MAX_ARG_CHARS}).", False, {}
        if name == "next_page":
            if arg.strip():
                return name, "Error: next_page() takes no argument.", False, {}
            return (name, *self._next_page())
        if not arg.strip():
            what = {"search": "a query", "open": "a doc_id", "find_in_page": "a text", "answer": "a text"}[name]
            return name, f"Error: {name}() needs {what}, e.g. {name}(...).", False, {}
        if name == "search":
            return (name, *self._search(arg.strip()))
        if name == "open":
            return (name, *self._open(arg.strip()))
        if name == "find_in_page":
            return (name, *self._find(arg.strip()))
        return name, f"Answer submitted: {arg.strip()}", True, {"answer_text": arg}

    def _search(self, query: str) -> tuple[str, bool, dict[str, Any]]:
        if len(query) > MAX_QUERY_CHARS:
            return f"Error: query too long ({len(query)} characters; at most {MAX_QUERY_CHARS}).", False, {}
        try:
            total, rows = self.engine.search(query)
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if message == "interrupted":
                message = "interrupted: the query exceeded its cost budget"
            return f"Error: {message}", False, {"results": 0}
        except (sqlite3.Error, ValueError) as exc:  # e.g. NUL bytes, unencodable text
            return f"Error: {exc}", False, {"results": 0}
        if not rows:
            return f"No results for {_quote(query)}.", True, {"results": 0}
        lines = [f"Results 1-{len(rows)} of {total} for {_quote(query)}:"]
        for i, (doc_id, title, snippet) in enumerate(rows, 1):
            lines.append(f"{i}. [{doc_id}] {_WS.sub(' ', title).strip()}")
            lines.append(f"   {_WS.sub(' ', snippet).strip()[:300]}")
        return "\n".join(lines), True, {"results": total}

    def _open(self, doc_id: str) -> tuple[str, bool, dict[str, Any]]:
        doc = self.engine.document(doc_id)
        if doc is None:
            hint = doc_id.strip("[]")
            suggestion = f" Did you mean [{hint}]?" if hint != doc_id and self.engine.document(hint) else ""
            return (f"Error: no document with id {_quote(doc_id)}.{suggestion} Use an id shown in search results, "
                    "e.g. module:json."), False, {}
        title, body = doc
        self._page = (doc_id, paginate(body), 0)
        return self._render_page(title), True, {}

    def _render_page(self, title: str | None = None) -> str:
        assert self._page is not None
        doc_id, pages, index = self._page
        head = f"[{doc_id}] {title}\n" if title is not None else f"[{doc_id}]\n"
        return f"{head}[page {index + 1}/{len(pages)}]\n{pages[index]}"

    def _next_page(self) -> tuple[str, bool, dict[str, Any]]:
        if self._page is None:
            return "Error: no document is open; use open(<doc_id>) first.", False, {}
        doc_id, pages, index = self._page
        if index + 1 >= len(pages):
            return f"Error: already at the last page ({index + 1}/{len(pages)}) of {doc_id}.", False, {}
        self._page = (doc_id, pages, index + 1)
        return self._render_page(), True, {}

    def _find(self, text: str) -> tuple[str, bool, dict[str, Any]]:
        if self._page is None:
            return "Error: no document is open; use open(<doc_id>) first.", False, {}
        doc_id, pages, _ = self._page
        needle = text.casefold()
        hits: list[str] = []
        count, line_no = 0, 0
        for page_no, page in enumerate(pages, 1):
            for line in page.split("\n"):
                line_no += 1
                if needle in line.casefold():
                    count += 1
                    if len(hits) < MAX_FIND_LINES:
                        shown = line.strip()
                        shown = shown if len(shown) <= 160 else shown[:157] + "..."
                        hits.append(f"  L{line_no} (page {page_no}): {shown}")
        if not hits:
            return f"No matches for {_quote(text)} in {doc_id}.", True, {"matches": 0}
        more = f"\n  ... {count - len(hits)} more matching lines" if count > len(hits) else ""
        return (f"{count} matching line{'s' if count != 1 else ''} for {_quote(text)} in {doc_id}:\n"
                + "\n".join(hits) + more), True, {"matches": count}


def _quote(text: str, limit: int = 120) -> str:
    text = text.replace("\n", " ")
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f'"{text}"'


# ----------------------------------------------------------------------------- policies
_SEED_WORDS = ("json", "thread", "socket", "parse", "decimal", "file", "path", "encode", "iterator", "timeout",
               "exception", "dictionary", "format", "random", "queue", "email", "date", "regular expression")
_STOP = frozenset("the and for that with this from are was were which when what have has its into not can "
                  "answer value name page function module documentation python parameter first default "
                  "results showing exactly writes constant keyword passage contains example".split())
_DOC_ID_RE = re.compile(r"\[((?:topic|module|func|class):[A-Za-z0-9_.\-]+)\]")
_WORD_RE = re.compile(r"\b[a-zA-Z][a-zA-Z_]{3,20}\b")
_BAD_QUERIES = ("json AND", "(json OR", '"unterminated phrase', "json.dumps", "foo:bar", "NEAR(", "*", "a OR OR b",
                "title:", "select * from documents; --", "' OR 1=1 --", "json)", "NOT", "^^^", "body:json AND (")
_BAD_ACTIONS = ("lookup(json)", "search json", "open json", "search(json", "Search(json)", "find(text)",
                "open()", "search()", "find_in_page()", "next_page(2)", "click(1)", "open[module:json]",
                "back()", "search(json))x", "submit")
_GHOST_IDS = ("module:jsonx", "json", "func:json.dump_all", "topic:loops", "module:numpy", "class:os.Path",
              "1", "module:", "[module:json", "func:os.path.joinpath")


class _SearchVocabulary:
    """Queries, doc ids and words an agent could use in this episode (the search DomainActions)."""

    done_action = "answer(I don't know)"

    def __init__(self, task: Task) -> None:
        self.solution = list(task.solution)
        words = [w for w in _WORD_RE.findall(task.instruction) if w.lower() not in _STOP]
        self.words: list[str] = list(dict.fromkeys(words + list(_SEED_WORDS)))
        self.doc_ids: list[str] = [a[5:-1] for a in self.solution if a.startswith("open(")]
        self.page_open = False

    def observe(self, observation: str) -> None:
        for doc_id in _DOC_ID_RE.findall(observation[:4000]):
            if doc_id not in self.doc_ids:
                self.doc_ids.append(doc_id)
        for word in _WORD_RE.findall(observation[:1500]):
            if word.lower() not in _STOP and word not in self.words:
                self.words.append(word)
        del self.doc_ids[:-30]
        del self.words[:-60]
        if re.match(r"^\[[a-z]+:[^\]]+\][^\n]*\n?\[page \d+/\d+\]", observation) or \
                re.match(r"^\[[a-z]+:[^\]]+\]\n\[page", observation):
            self.page_open = True

    def _query(self, rng: random.Random) -> str:
        n = rng.choice((1, 1, 2, 2, 3))
        return " ".join(rng.choice(self.words) for _ in range(n))

    def inspect(self, rng: random.Random) -> str:
        return f"search({self._query(rng)})"

    def explore(self, rng: random.Random) -> str:
        roll = rng.random()
        if roll < 0.35 or not self.doc_ids:
            return f"search({self._query(rng)})"
        if roll < 0.6:
            return f"open({rng.choice(self.doc_ids)})"
        if roll < 0.7:
            return f"search({rng.choice(('title:', 'body:'))}{rng.choice(self.words)})"
        if self.page_open and roll < 0.85:
            return f"find_in_page({rng.choice(self.words)})"
        if self.page_open:
            return "next_page()"
        return f'search("{self._query(rng)}")'

    def mistake(self, rng: random.Random) -> str:
        kind = rng.randrange(5)
        if kind == 0:
            return f"search({rng.choice(_BAD_QUERIES)})"
        if kind == 1:
            return rng.choice(_BAD_ACTIONS)
        if kind == 2:
            return f"open({rng.choice(_GHOST_IDS)})"
        if kind == 3:
            return rng.choice(("next_page()", f"find_in_page({rng.choice(self.words)})", "find_in_page(zzqx)"))
        word = rng.choice(self.words)
        return rng.choice((f"search({word} AND)", f"search({word} NEAR/)", f"search({word}:x)",
                           f"open({word})", f"search(\"{word})"))

    def reply(self, observation: str, rng: random.Random, policy: str) -> str | None:
        return None  # the engine never waits for an answer


def search_policy(name: str, task: Task) -> Policy:
    """A fresh behaviour policy for one episode of `task`."""
    return behaviour_policy(name, task, _SearchVocabulary)


def factory(sandbox_params: Any = None) -> TextEnv:
    return SearchEnv(sandbox_params)
