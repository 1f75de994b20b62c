"""Web domain: Agora (a Flask shop + forum over SQLite) driven through headless Chromium.

One env instance owns a temp dir (the SQLite file), the app server (werkzeug thread on a free
127.0.0.1 port) and one Chromium (Playwright, sync API). `reset(seed)` draws a task from the
seed (tasks.generate_task), rewrites the database from the seed, wipes the browser's state (cookies,
storage, cache and tab history; a fresh context every 50 episodes), confined to the app's origin,
and loads the home page. Reset costs a database write and a page load, never a browser or server
start (those happen once per env).

Observation: `URL: <path>[ (HTTP <code> <reason>)]`, then the page as lines in document order:
`heading "..."`, `text "..."` and interactive elements `[id] link|button|textbox|combobox|checkbox|radio "name" ...`
(textboxes show `value="..."`, passwords as `*`; comboboxes `value="..." options=[...]`). At most
WINDOW_LINES lines are shown, with `... N lines above/below` markers that `scroll` moves past;
the whole observation is capped at MAX_OBS_CHARS. A failed action answers one line `Error: ...`:
the parser's usage message, the browser's own error (Playwright's first line), or the refusal
of a URL outside the app. `stop` (optionally `stop "answer"`) ends the episode: `Episode ended.`

Actions: click [id] | type [id] "text" | select [id] "option" | goto /path | back | scroll down|up | stop ["answer"].
Reward 1.0 at the step where the task's database checker (or the answer check of info tasks)
first passes; the episode terminates then, or at `stop`.
"""

from __future__ import annotations

import atexit
import os
import random
import re
import shutil
import sqlite3
import tempfile
import weakref
from http import HTTPStatus
from pathlib import Path
from typing import Any

from agentworld.domains.web import WORLD_MODEL_PROMPT
from agentworld.domains.web.tasks import DOMAIN, TEMPLATES, check, generate_task
from agentworld.envs.base import Task, TextEnv, pick_template
from agentworld.envs.behaviour import Policy, behaviour_policy

SYSTEM_PROMPT = WORLD_MODEL_PROMPT  # declared in agentworld/domains/web/__init__.py
MAX_OBS_CHARS = 4000
WINDOW_LINES = 40
MAX_LINE_CHARS = 400
USAGE = ('click [id] | type [id] "text" | select [id] "option" | goto /path | back | scroll down|up | '
         'stop ["answer"]')
ENDED = "Episode ended."
INSTALL_HINT = ("pip install playwright==1.65.2 (into the project venv; never `playwright install`) and "
                "apt-get install chromium (provides /usr/bin/chromium)")

# What every observation matches, by action verb (for the dataset's per-domain checks):
# click/type/select/goto/back/scroll -> PAGE_RE or ERROR_RE; stop -> ENDED_RE or ERROR_RE; anything else -> ERROR_RE.
PAGE_LINE = (r'(?:\[\d+\] (?:link|button|textbox|combobox|checkbox|radio) ".*"(?: .*)?|heading ".*"|text ".*"'
             r"|\.\.\. \d+ lines (?:above|below) \(scroll (?:up|down)\)|\.\.\. \(observation truncated\))")
PAGE_RE = rf"^URL: /\S*(?: \(HTTP \d{{3}} [A-Za-z -]+\))?(?:\n{PAGE_LINE})*$"
ERROR_RE = r"^Error: [^\n]+$"
ENDED_RE = r"^Episode ended\.$"
BROWSER_VERBS = ("click", "type", "select", "goto", "back", "scroll")

_ACTION_RES = {
    "click": re.compile(r"^click \[(\d+)\]$"),
    "type": re.compile(r'^type \[(\d+)\] "(.*)"$', re.DOTALL),
    "select": re.compile(r'^select \[(\d+)\] "(.*)"$', re.DOTALL),
    "goto": re.compile(r"^goto (\S+)$"),
    "back": re.compile(r"^back$"),
    "scroll": re.compile(r"^scroll (down|up)$"),
    "stop": re.compile(r'^stop(?: "(.*)")?$', re.DOTALL),
}
_USAGE_OF = {"click": "click [id]", "type": 'type [id] "text"', "select": 'select [id] "option"',
             "goto": "goto /path", "back": "back", "scroll": "scroll down|up", "stop": 'stop or stop "answer"'}


class ActionError(ValueError):
    """The action does not parse; the message is the observation."""


def parse_action(action: str) -> tuple[str, tuple[str, ...]]:
    """(verb, arguments) of an action string, or ActionError naming the valid syntax."""
    text = action.strip()
    verb = text.split(None, 1)[0].lower() if text else ""
    if verb not in _ACTION_RES:
        shown = (text if len(text) <= 80 else text[:80] + "...").replace("\n", "\\n")
        raise ActionError(f'Error: unknown action "{shown}". Valid actions: {USAGE}')
    match = _ACTION_RES[verb].match(text)
    if match is None:
        raise ActionError(f"Error: invalid {verb} action; usage: {_USAGE_OF[verb]}")
    return verb, tuple(g for g in match.groups() if g is not None)


# ----------------------------------------------------------------------------- availability
def probe() -> tuple[bool, str]:
    """Whether the web domain can run here: playwright (Python), flask, Chromium and the sandbox
    (bubblewrap with unprivileged user namespaces) that the browser runs in."""
    try:
        import flask  # noqa: F401
        import playwright  # noqa: F401
        from playwright.sync_api import sync_playwright  # noqa: F401
    except ImportError as exc:
        return False, f"missing Python package ({exc}); {INSTALL_HINT}"
    from agentworld.domains.web.confine import CHROMIUM_BINARY as CHROMIUM
    from agentworld.envs.sandbox import sandbox_available

    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return False, f"no Chromium at {CHROMIUM}; {INSTALL_HINT}"
    confinable, why = sandbox_available()
    if not confinable:
        return False, f"the browser's sandbox cannot start: {why}"
    from importlib.metadata import version

    return True, f"playwright {version('playwright')}, chromium at {CHROMIUM} (confined)"


def _close_at_exit(ref: weakref.ref) -> None:
    env = ref()
    if env is not None:
        env.close()


# ----------------------------------------------------------------------------- the env
class WebEnv(TextEnv):
    """Gymnasium-style text env over the Agora web app in headless Chromium (see module docstring)."""

    domain = DOMAIN
    env_version = "1"

    def __init__(self, sandbox_params: Any = None, *, templates: list[str] | None = None) -> None:
        super().__init__()
        unknown = [t for t in templates or [] if t not in TEMPLATES]
        if unknown:
            raise ValueError(f"unknown web task templates {unknown}; choose from {', '.join(sorted(TEMPLATES))}")
        self.sandbox_params = sandbox_params
        self.templates = list(templates) if templates else None
        self.tmpdir: str | None = None
        self.server: Any = None
        self.browser: Any = None
        self._snapshot: Any = None
        self._offset = 0
        self._steps = 0
        self._done = True
        self._solved = False
        self._atexit = False

    # ------------------------------------------------------------------ lifecycle
    @property
    def db_path(self) -> Path:
        if self.tmpdir is None:
            raise RuntimeError("web env not started; call reset() first")
        return Path(self.tmpdir) / "agora.db"

    def _start(self) -> None:
        if self.browser is not None and self.browser.started and self.server is not None and self.server.running:
            return
        from agentworld.domains.web.app import AppServer
        from agentworld.domains.web.browser import Browser
        from agentworld.domains.web.seed import build_world, write_db

        self.close()
        try:
            self.tmpdir = tempfile.mkdtemp(prefix="agentworld-web-")
            write_db(build_world(0), self.db_path)  # a valid database before the first episode's own
            self.server = AppServer(self.db_path)
            self.server.start()
            self.browser = Browser(self.server.port)
            self.browser.start()
        except Exception:
            self.close()
            raise
        if not self._atexit:
            atexit.register(_close_at_exit, weakref.ref(self))
            self._atexit = True

    def close(self) -> None:
        if self.browser is not None:
            self.browser.close()
            self.browser = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        self._done = True

    # ------------------------------------------------------------------ protocol
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self.episode_task(
            seed, options, lambda s, o: generate_task(s, pick_template(s, o, self.templates)))
        from agentworld.domains.web.browser import BrowserError
        from agentworld.domains.web.seed import build_world, write_db

        self._start()
        write_db(build_world(int(task.setup["db_seed"])), self.db_path)
        try:
            self.browser.new_episode(self.server.origin, "/")
        except BrowserError:  # the reused tab was in a bad state: start over with a fresh context
            self.browser.close_episode()
            self.browser.new_episode(self.server.origin, "/")
        self.task, self._steps, self._done, self._solved, self._offset = task, 0, False, False, 0
        self._snapshot = self.browser.snapshot()
        observation = f"{task.instruction}\n\n{self.render()}"
        info = {"task_id": task.task_id, "template": task.setup["template"], "seed": seed,
                **self._page_info()}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self.task is None or self.browser is None:
            raise RuntimeError("episode is over (or never started); call reset() first")
        self._steps += 1
        error: str | None = None
        verb = "invalid"
        answer: str | None = None
        try:
            verb, args = parse_action(action)
            if verb == "stop":
                answer = args[0] if args else ""
            else:
                self._act(verb, args)
        except ActionError as exc:
            error = str(exc)
        if verb == "stop" and error is None:
            solved = self._check(answer)
            self._done, self._solved = True, solved
            info = {**self._info(verb, None, solved), "ended_by_agent": True, "answer": answer}
            return ENDED, float(solved), True, False, info
        solved = self._check(None)
        reward = float(solved and not self._solved)
        self._solved = self._solved or solved
        self._done = solved
        observation = error if error is not None else self.render()
        return observation, reward, solved, False, self._info(verb, error, solved)

    # ------------------------------------------------------------------ actions
    def _act(self, verb: str, args: tuple[str, ...]) -> None:
        from agentworld.domains.web.browser import BrowserError

        browser = self.browser
        try:
            if verb in ("click", "type", "select"):
                element_id = int(args[0])
                element = self._snapshot.elements.get(element_id)
                if element is None:
                    count = len(self._snapshot.elements)
                    known = f"ids on this page: 1-{count}" if count else "this page has no interactive elements"
                    raise ActionError(f"Error: no element [{element_id}] on this page ({known})")
                if verb == "click":
                    browser.click(element_id)
                    self._offset = 0
                elif verb == "type":
                    browser.fill(element_id, args[1])
                else:
                    options = element.get("options")
                    if options is not None and args[1] not in options:
                        shown = ", ".join(f'"{o}"' for o in options)
                        raise ActionError(f'Error: combobox [{element_id}] has no option "{args[1]}"; options: {shown}')
                    browser.select(element_id, args[1])
            elif verb == "goto":
                browser.goto(self._resolve(args[0]))
                self._offset = 0
            elif verb == "back":
                if not browser.back():
                    raise ActionError("Error: there is no previous page in this tab's history")
                self._offset = 0
            elif verb == "scroll":
                browser.scroll(args[0])
                total = len(self._snapshot.lines)
                if args[0] == "down" and self._offset + WINDOW_LINES < total:
                    self._offset += WINDOW_LINES
                elif args[0] == "up":
                    self._offset = max(0, self._offset - WINDOW_LINES)
        except BrowserError as exc:
            raise ActionError(f"Error: {exc}") from None
        finally:
            self._snapshot = browser.snapshot()

    def _resolve(self, target: str) -> str:
        """The URL `goto target` opens, or ActionError: only paths of the app's own origin."""
        origin = self.server.origin
        if target.startswith("/") and not target.startswith("//"):
            return origin + target
        if target == origin or target.startswith(origin + "/"):
            return target
        shown = target if len(target) <= 120 else target[:120] + "..."
        raise ActionError(f'Error: navigation to "{shown}" is blocked: this browser only opens pages of the '
                          f"Agora site; use goto /path (e.g. goto /products)")

    # ------------------------------------------------------------------ helpers
    def render(self) -> str:
        """The current page as observation text (window at the scroll offset, capped)."""
        snap = self._snapshot
        head = f"URL: {snap.path}"
        if snap.status and snap.status != 200:
            try:
                head += f" (HTTP {snap.status} {HTTPStatus(snap.status).phrase})"
            except ValueError:
                head += f" (HTTP {snap.status})"
        lines = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "..." for line in snap.lines]
        offset = min(self._offset, max(0, len(lines) - 1))
        window = lines[offset:offset + WINDOW_LINES]
        out = [head]
        if offset:
            out.append(f"... {offset} lines above (scroll up)")
        out.extend(window)
        below = len(lines) - offset - len(window)
        if below > 0:
            out.append(f"... {below} lines below (scroll down)")
        text = "\n".join(out)
        if len(text) > MAX_OBS_CHARS:
            marker = "\n... (observation truncated)"
            text = text[:MAX_OBS_CHARS - len(marker)].rsplit("\n", 1)[0] + marker
        return text

    def _check(self, answer: str | None) -> bool:
        assert self.task is not None
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            return check(self.task, conn, answer)
        finally:
            conn.close()

    def _page_info(self) -> dict[str, Any]:
        snap = self._snapshot
        return {"url": snap.path, "status": snap.status, "title": snap.title, "elements": len(snap.elements),
                "lines": len(snap.lines), "scroll_offset": self._offset}

    def _info(self, verb: str, error: str | None, solved: bool) -> dict[str, Any]:
        assert self.task is not None
        return {"task_id": self.task.task_id, "template": self.task.setup["template"], "step": self._steps,
                "action_type": verb, "error": error is not None, "solved": solved,
                "blocked_urls": list(self.browser.blocked) if self.browser else [], **self._page_info()}

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Read-only SQL on the app's database (tests and debugging)."""
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()


# ----------------------------------------------------------------------------- policies
_ELEMENT_RE = re.compile(r'^\[(\d+)\] (link|button|textbox|combobox|checkbox|radio) "(.*?)"(?: (.*))?$')
_OPTIONS_RE = re.compile(r'options=\[(.*)\]$')
_PATHS = ("/", "/products", "/products?page=2", "/products?category=Garden", "/products?category=Office",
          "/forum", "/forum?page=2", "/orders", "/account", "/login", "/forum/new")
_BAD_PATHS = ("/admin", "/products/9999", "/forum/0", "/orders/999", "/logout", "/products?page=99", "/cart",
              "/forum/1/reply", "/users/alice", "/products/abc", "/static/app.js")
_FOREIGN = ("http://example.com", "https://www.google.com/search?q=agora", "file:///etc/passwd",
            "javascript:alert(1)", "ftp://127.0.0.1/", "http://127.0.0.1:1/", "//evil.example/", "data:text/html,hi",
            "products", "about:blank")
_MALFORMED = ("click 3", "click [abc]", "click []", "type [3] hello", 'type "hello"', "select [2]", "goto",
              "scroll left", "scroll", "clik [3]", "open /products", "press Enter", "submit", "back 2",
              'click [2] "Products"', "go to /forum", "CLICK[1]", "stop now", "refresh", "hover [1]")
_PHRASES = ("hello", "test", "great product", "How much is shipping?", "I like it", "asdf", "42", "blue")


class _WebVocabulary:
    """The current page's elements plus the site's names (the web domain's DomainActions)."""

    done_action = "stop"

    def __init__(self, task: Task) -> None:
        self.solution = list(task.solution)
        self.products = list(task.setup.get("products", [])) or ["Mug"]
        self.threads = list(task.setup.get("threads", [])) or ["Tips"]
        self.users = list(task.setup.get("users", [])) or ["alice"]
        self.elements: list[tuple[int, str, str, str]] = []  # (id, role, name, rest of the line)

    def observe(self, observation: str) -> None:
        if observation.startswith("Error:") or observation == ENDED:
            return  # the page did not change
        found = []
        for line in observation.split("\n"):
            m = _ELEMENT_RE.match(line)
            if m:
                found.append((int(m.group(1)), m.group(2), m.group(3), m.group(4) or ""))
        if found or "URL: " in observation:
            self.elements = found

    def inspect(self, rng: random.Random) -> str:
        return rng.choice(("scroll down", "scroll up"))

    def _of(self, *roles: str) -> list[tuple[int, str, str, str]]:
        return [e for e in self.elements if e[1] in roles]

    def _text_for(self, name: str, rng: random.Random) -> str:
        lowered = name.lower()
        if "search products" in lowered:
            name = rng.choice(self.products)
            return rng.choice((name, name.split()[-1], name.split()[0]))
        if "search threads" in lowered or lowered == "title":
            return rng.choice(self.threads).split("?")[0].split()[-1] if rng.random() < 0.5 else rng.choice(self.threads)
        if "username" in lowered:
            return rng.choice(self.users)
        if "quantity" in lowered:
            return str(rng.randint(1, 3))
        if "email" in lowered:
            return f"{rng.choice(self.users)}@example.com"
        return rng.choice(_PHRASES)

    def explore(self, rng: random.Random) -> str:
        clickable, boxes, combos = self._of("link", "button"), self._of("textbox"), self._of("combobox")
        roll = rng.random()
        if roll < 0.45 and clickable:
            return f"click [{rng.choice(clickable)[0]}]"
        if roll < 0.62 and boxes:
            element = rng.choice(boxes)
            return f'type [{element[0]}] "{self._text_for(element[2], rng)}"'
        if roll < 0.70 and combos:
            element = rng.choice(combos)
            m = _OPTIONS_RE.search(element[3])
            options = re.findall(r'"(.*?)"', m.group(1)) if m else []
            if options:
                return f'select [{element[0]}] "{rng.choice(options)}"'
        if roll < 0.88:
            return f"goto {rng.choice(_PATHS + (f'/products/{rng.randint(1, 24)}', f'/forum/{rng.randint(1, 12)}'))}"
        if roll < 0.94:
            return "back"
        return rng.choice(("scroll down", "scroll up"))

    def mistake(self, rng: random.Random) -> str:
        kind = rng.randrange(5)
        top = max((e[0] for e in self.elements), default=8)
        if kind == 0:
            return rng.choice((f"click [{top + rng.randint(1, 40)}]", f'type [{top + rng.randint(1, 40)}] "hello"',
                               "click [0]", f'select [{top + 7}] "1 star"'))
        if kind == 1:
            return rng.choice(_MALFORMED)
        if kind == 2:  # the wrong kind of element for the action: the browser itself refuses
            links, boxes, combos = self._of("link", "button"), self._of("textbox"), self._of("combobox")
            choices = []
            if links:
                choices += [f'type [{rng.choice(links)[0]}] "hello"', f'select [{rng.choice(links)[0]}] "1"']
            if boxes:
                choices.append(f'select [{rng.choice(boxes)[0]}] "5 stars"')
                number = [e for e in boxes if "quantity" in e[2].lower()]
                if number:
                    choices.append(f'type [{number[0][0]}] "{rng.choice(("two", "abc", "1e"))}"')
            if combos:
                choices.append(f'select [{rng.choice(combos)[0]}] "{rng.choice(("10 stars", "Toys", "none"))}"')
            if choices:
                return rng.choice(choices)
            return rng.choice(_MALFORMED)
        if kind == 3:
            return f"goto {rng.choice(_BAD_PATHS + _FOREIGN)}"
        # plausible form input the app will reject once submitted
        boxes = self._of("textbox")
        if boxes:
            element = rng.choice(boxes)
            bad = rng.choice(("", " ", "x" * 3, "not-an-email", "0", "-2", "wrongpass", "nobody"))
            return f'type [{element[0]}] "{bad}"'
        return rng.choice(_MALFORMED)

    def reply(self, observation: str, rng: random.Random, policy: str) -> str | None:
        return None  # the site never waits for an answer


def web_policy(name: str, task: Task) -> Policy:
    """A fresh behaviour policy for one episode of `task` (scripted, exploratory or erroneous)."""
    return behaviour_policy(name, task, _WebVocabulary)


def factory(sandbox_params: Any = None) -> TextEnv:
    return WebEnv(sandbox_params)
