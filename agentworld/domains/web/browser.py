"""Headless Chromium through Playwright's sync API: one browser per env, one tab per episode.

Between episodes the context is reused but wiped (cookies, storage, cache, tab history), and
replaced by a fresh one every RECYCLE_EVERY episodes: a new context costs ~0.5 s here, a wipe ~20 ms.

The page is read with a JavaScript walk of the DOM in document order (`SNAPSHOT_JS`): headings,
text runs, and the interactive elements (links, buttons, text boxes, comboboxes, checkboxes),
which get ids 1, 2, 3, ... stored in a `data-awid` attribute so that actions can address them.
The same page therefore always reads the same, element ids included.

Only the app's origin is reachable, twice over. Chromium runs confined (`confine.py`): an
unprivileged user in bubblewrap, with its own Chromium sandbox, in a network namespace where
127.0.0.1:<app port> is the app and nothing else exists (WebSockets and every other protocol
included); no host file but /usr and a few /etc entries is visible to it. Inside that, a context
route (matched inside the driver) aborts every request that leaves the origin (other hosts,
other ports, file:, data:, ...), so the agent reads a clear "blocked" instead of a network error;
the env also refuses such `goto` targets before they reach the browser.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-dev-shm-usage", "--disable-extensions", "--disable-component-update",
                 "--disable-default-apps", "--no-first-run", "--mute-audio"]
ACTION_TIMEOUT_MS = 3000
NAVIGATION_TIMEOUT_MS = 10000
RECYCLE_EVERY = 50  # episodes per browser context before a fresh one
WAIT_UNTIL = "domcontentloaded"  # pages have no subresources: the DOM is complete then
MAX_NAME = 200   # characters of one element's name/text before it is cut with "..."

SNAPSHOT_JS = r"""
(maxName) => {
  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const cut = (s) => s.length > maxName ? s.slice(0, maxName) + '...' : s;
  const q = (s) => '"' + cut(norm(s)) + '"';
  for (const el of document.querySelectorAll('[data-awid]')) el.removeAttribute('data-awid');
  const lines = [], elements = {};
  let n = 0, buf = [];
  const flush = () => { const t = norm(buf.join('')); buf = []; if (t) lines.push('text ' + q(t)); };
  const BLOCK = new Set(['P','DIV','LI','UL','OL','TR','TD','TH','TABLE','TBODY','THEAD','SECTION','ARTICLE',
    'HEADER','FOOTER','NAV','MAIN','ASIDE','FORM','BR','DT','DD','DL','BLOCKQUOTE','PRE','FIELDSET','HR','BODY']);
  const label = (el) => {
    const aria = el.getAttribute('aria-label');
    if (aria) return aria;
    if (el.id) {
      const l = document.querySelector('label[for="' + CSS.escape(el.id) + '"]');
      if (l) return l.textContent;
    }
    const wrap = el.closest('label');
    if (wrap) return wrap.textContent;
    return el.getAttribute('placeholder') || el.getAttribute('name') || '';
  };
  const emit = (el, role, name, extra, info) => {
    flush();
    n += 1;
    el.setAttribute('data-awid', String(n));
    lines.push('[' + n + '] ' + role + ' ' + q(name) + (extra ? ' ' + extra : ''));
    elements[n] = Object.assign({role: role, name: cut(norm(name))}, info || {});
  };
  const walk = (node) => {
    if (node.nodeType === 3) { buf.push(node.nodeValue); return; }
    if (node.nodeType !== 1) return;
    const tag = node.tagName;
    if (['SCRIPT','STYLE','NOSCRIPT','TEMPLATE','HEAD','LABEL','TITLE'].includes(tag)) return;
    if (node.hidden || node.getAttribute('aria-hidden') === 'true') return;
    if (/^H[1-6]$/.test(tag)) { flush(); lines.push('heading ' + q(node.textContent)); return; }
    if (tag === 'A' && node.hasAttribute('href')) { emit(node, 'link', node.textContent || node.getAttribute('aria-label')); return; }
    if (tag === 'BUTTON') { emit(node, 'button', node.textContent || node.getAttribute('aria-label')); return; }
    if (tag === 'INPUT') {
      const type = (node.getAttribute('type') || 'text').toLowerCase();
      if (type === 'hidden') return;
      if (type === 'submit' || type === 'button' || type === 'reset') { emit(node, 'button', node.value || type); return; }
      if (type === 'checkbox' || type === 'radio') {
        emit(node, type, label(node), node.checked ? 'checked' : 'unchecked', {tag: 'input', type: type}); return;
      }
      const shown = type === 'password' ? '*'.repeat(node.value.length) : node.value;
      emit(node, 'textbox', label(node), shown ? 'value=' + q(shown) : '', {tag: 'input', type: type}); return;
    }
    if (tag === 'TEXTAREA') {
      emit(node, 'textbox', label(node), node.value ? 'value=' + q(node.value) : '', {tag: 'textarea', type: 'textarea'}); return;
    }
    if (tag === 'SELECT') {
      const options = Array.from(node.options).map((o) => norm(o.label || o.textContent));
      const chosen = node.selectedIndex >= 0 ? options[node.selectedIndex] : '';
      emit(node, 'combobox', label(node), 'value=' + q(chosen) + ' options=[' + options.map(q).join(', ') + ']',
           {tag: 'select', type: 'select', options: options}); return;
    }
    const block = BLOCK.has(tag);
    if (block) flush();
    for (const child of node.childNodes) walk(child);
    if (block) flush();
  };
  if (document.body) walk(document.body);
  flush();
  const nav = performance.getEntriesByType('navigation')[0];
  return {lines: lines, elements: elements, path: location.pathname + location.search,
          status: nav && nav.responseStatus ? nav.responseStatus : 0, title: document.title};
}
"""


@dataclass
class Snapshot:
    """What the page shows now: lines of text, the interactive elements by id, where it is."""

    path: str
    status: int
    title: str
    lines: list[str]
    elements: dict[int, dict[str, Any]] = field(default_factory=dict)


class BrowserError(RuntimeError):
    """An action the browser refused or that failed; the message is the browser's own (first line)."""


def playwright_error_text(exc: BaseException) -> str:
    """Playwright's message without the call log (which names timings) and without the API prefix."""
    text = str(exc).strip().split("\n", 1)[0].strip()
    text = re.sub(r"^(Locator|Page|Frame|ElementHandle)\.\w+:\s*", "", text)
    text = re.sub(r"^Error:\s*", "", text)
    return text


_DRIVERS: dict[int, list[Any]] = {}  # thread id -> [Playwright, number of browsers using it]


def _acquire_playwright() -> Any:
    """This thread's Playwright driver, started on first use.

    Playwright's sync API allows one driver per thread (a second `sync_playwright().start()`
    in the same thread fails), so the browsers of several envs in one thread share it.
    """
    key = threading.get_ident()
    entry = _DRIVERS.get(key)
    if entry is None:
        from playwright.sync_api import sync_playwright

        entry = _DRIVERS[key] = [sync_playwright().start(), 0]
    entry[1] += 1
    return entry[0]


def _release_playwright() -> None:
    key = threading.get_ident()
    entry = _DRIVERS.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _DRIVERS[key]
        entry[0].stop()


class Browser:
    """Chromium + one context/page per episode, confined to `origin` (see module docstring)."""

    def __init__(self, app_port: int, executable: str = CHROMIUM) -> None:
        """`app_port`: the 127.0.0.1 port of the app, the only address the browser can reach."""
        self.app_port = app_port
        self.executable = executable
        self._confined: Any = None
        self._pw: Any = None
        self._browser: Any = None
        self._context: Any = None
        self.page: Any = None
        self._cdp: Any = None
        self._episodes = 0
        self.origin = ""
        self.blocked: list[str] = []  # URLs the route refused during this episode

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._browser is not None:
            return
        from agentworld.domains.web.confine import ConfinedChromium

        self._confined = ConfinedChromium(self.app_port)
        self._pw = _acquire_playwright()
        try:
            launcher = self._confined.start()
            self._browser = self._pw.chromium.launch(executable_path=launcher, args=CHROMIUM_ARGS,
                                                     headless=True, chromium_sandbox=True)
        except Exception:
            self._pw = None
            _release_playwright()
            self._confined.close()
            self._confined = None
            raise

    @property
    def started(self) -> bool:
        return self._browser is not None

    def new_episode(self, origin: str, path: str = "/") -> None:
        """Start an episode at `origin + path` with no cookies, storage, cache or history.

        The context and page are reused between episodes (a new context costs ~0.5 s): the
        origin's data is cleared (cookies, storage, cache) and the tab's history is reset after
        the first page loads, so `back` cannot reach an earlier episode. Every RECYCLE_EVERY
        episodes (or when the page is gone) a fresh context replaces it.
        """
        origin = origin.rstrip("/")
        fresh = (self._context is None or self.page is None or self.page.is_closed() or origin != self.origin
                 or self._episodes >= RECYCLE_EVERY or bool(self.blocked)  # a blocked load may leave an error page
                 or not self.allowed(self.page.url))
        if fresh:
            self.close_episode()
            self._context = self._browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US",
                                                      timezone_id="UTC", service_workers="block",
                                                      accept_downloads=False)
            self._context.set_default_timeout(ACTION_TIMEOUT_MS)
            self._context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
            # Requests are matched in the browser driver; only those leaving the origin reach _guard.
            self._context.route(re.compile(rf"^(?!{re.escape(origin)}(?:[/?#]|$))"), self._guard)
            self.page = self._context.new_page()
            self._cdp = self._context.new_cdp_session(self.page)
            self._episodes = 0
        self.origin, self.blocked = origin, []
        self._cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
        self._context.clear_cookies()
        self.goto(origin + path)
        self._cdp.send("Page.resetNavigationHistory")
        self._episodes += 1

    def _guard(self, route: Any) -> None:
        url = route.request.url
        if self.allowed(url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("blockedbyclient")

    def allowed(self, url: str) -> bool:
        return bool(self.origin) and (url == self.origin or url.startswith(self.origin + "/")
                                      or url.startswith(self.origin + "?"))

    def close_episode(self) -> None:
        if self._context is not None:
            try:
                self._context.close()
            finally:
                self._context, self.page, self._cdp = None, None, None

    def close(self) -> None:
        try:
            self.close_episode()
        except Exception:
            pass
        if self._browser is not None:
            try:
                self._browser.close()
            except Exception:
                pass
            self._browser = None
        if self._confined is not None:
            self._confined.close()
            self._confined = None
        if self._pw is not None:
            self._pw = None
            try:
                _release_playwright()
            except Exception:
                pass

    # ------------------------------------------------------------------ reading
    def snapshot(self) -> Snapshot:
        for attempt in range(3):
            try:
                data = self.page.evaluate(SNAPSHOT_JS, MAX_NAME)
                break
            except Exception:  # noqa: BLE001 - a navigation replaced the document mid-read
                if attempt == 2:
                    raise
                self.page.wait_for_load_state(WAIT_UNTIL)
        elements = {int(k): v for k, v in data["elements"].items()}
        return Snapshot(path=data["path"], status=int(data["status"]), title=data["title"], lines=list(data["lines"]),
                        elements=elements)

    def evaluate(self, expression: str) -> Any:
        return self.page.evaluate(expression)

    # ------------------------------------------------------------------ acting
    def _locator(self, element_id: int) -> Any:
        return self.page.locator(f'[data-awid="{element_id}"]')

    def goto(self, url: str) -> None:
        for attempt in range(3):
            try:
                self.page.goto(url, wait_until=WAIT_UNTIL)
                return
            except Exception as exc:  # noqa: BLE001 - Playwright raises its own Error type
                if attempt < 2 and "interrupted by another navigation" in str(exc):
                    # a pending navigation (e.g. to an error page) won the race: let it settle, go again
                    self.page.wait_for_load_state(WAIT_UNTIL)
                    if self.page.url == url:
                        return
                    continue
                raise BrowserError(playwright_error_text(exc)) from None

    def click(self, element_id: int) -> None:
        try:
            self._locator(element_id).click()
            self.page.wait_for_load_state(WAIT_UNTIL)
        except Exception as exc:  # noqa: BLE001
            raise BrowserError(playwright_error_text(exc)) from None

    def fill(self, element_id: int, text: str) -> None:
        try:
            self._locator(element_id).fill(text)
        except Exception as exc:  # noqa: BLE001
            raise BrowserError(playwright_error_text(exc)) from None

    def select(self, element_id: int, label: str) -> None:
        try:
            self._locator(element_id).select_option(label=label)
        except Exception as exc:  # noqa: BLE001
            raise BrowserError(playwright_error_text(exc)) from None

    def back(self) -> bool:
        """Go back one page; False when there is no earlier page in this episode's history."""
        try:
            response = self.page.go_back(wait_until=WAIT_UNTIL)
        except Exception as exc:  # noqa: BLE001
            raise BrowserError(playwright_error_text(exc)) from None
        return response is not None

    def scroll(self, direction: str) -> None:
        self.page.evaluate("(d) => window.scrollBy(0, d * window.innerHeight)", 1 if direction == "down" else -1)
