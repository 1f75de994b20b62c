"""The web env against the real backend: the Agora Flask app over SQLite, in headless Chromium.

One env (one server, one browser) is shared by the module; each test resets it to a seed.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import time

import pytest

from agentworld.domains.web.env import (
    BROWSER_VERBS,
    ENDED,
    ENDED_RE,
    ERROR_RE,
    MAX_OBS_CHARS,
    PAGE_RE,
    SYSTEM_PROMPT,
    ActionError,
    WebEnv,
    parse_action,
    probe,
    web_policy,
)
from agentworld.domains.web.tasks import TEMPLATES, generate_task
from agentworld.envs.base import Task
from agentworld.envs.behaviour import POLICY_NAMES

AVAILABLE, REASON = probe()
# Outside CI a machine without Playwright/Chromium skips; in CI it must run, so it fails there instead.
needs_browser = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"web env unavailable: {REASON}")

XSS_SCRIPT = "<script>window.__pwned=1</script>"
XSS_IMG = '<img src=x onerror="window.__pwned=1">'
LINE_RE = re.compile(r'^(\[\d+\] (link|button|textbox|combobox|checkbox|radio) ".*"( .*)?|heading ".*"|text ".*"'
                     r"|\.\.\. \d+ lines (above|below) \(scroll (up|down)\)|\.\.\. \(observation truncated\))$")


def seed_for(template: str, start: int = 0) -> int:
    """The first seed >= start whose task uses `template` (templates cycle with the seed)."""
    names = sorted(TEMPLATES)
    return start + (names.index(template) - start) % len(names)


def assert_page(observation: str) -> None:
    lines = observation.split("\n")
    assert re.match(r"^URL: /\S*( \(HTTP \d{3} [A-Za-z ]+\))?$", lines[0]), lines[0]
    bad = [line for line in lines[1:] if not LINE_RE.match(line)]
    assert not bad, bad
    assert len(observation) <= MAX_OBS_CHARS
    assert re.match(PAGE_RE, observation)
    assert "127.0.0.1" not in observation  # the port changes between instances: never shown


@pytest.fixture(scope="module")
def env():
    env = WebEnv()
    yield env
    env.close()


# ----------------------------------------------------------------------------- no browser needed
def test_parse_action_is_strict():
    assert parse_action("click [3]") == ("click", ("3",))
    assert parse_action('type [9] "a "quoted" text"') == ("type", ("9", 'a "quoted" text'))
    assert parse_action('select [11] "4 stars"') == ("select", ("11", "4 stars"))
    assert parse_action("goto /products?page=2") == ("goto", ("/products?page=2",))
    assert parse_action("stop") == ("stop", ())
    assert parse_action('stop "$9.99"') == ("stop", ("$9.99",))
    for bad in ("click 3", "click [x]", "type [3] hi", "scroll left", "goto", "back 2"):
        with pytest.raises(ActionError, match=r"^Error: invalid \w+ action; usage: "):
            parse_action(bad)
    with pytest.raises(ActionError, match=r'^Error: unknown action "clik \[3\]". Valid actions: click \[id\]'):
        parse_action("clik [3]")


def test_tasks_are_deterministic_and_cover_templates():
    assert generate_task(5) == generate_task(5)
    tasks = [generate_task(seed) for seed in range(len(TEMPLATES))]
    assert {t.setup["template"] for t in tasks} == set(TEMPLATES)
    for task in tasks:
        assert task.domain == "web" and task.solution and task.instruction
        json.dumps(task.setup)
    assert "world model" in SYSTEM_PROMPT and "exactly" in SYSTEM_PROMPT and len(SYSTEM_PROMPT) < 800


def test_render_windows_long_pages():
    from agentworld.domains.web.browser import Snapshot

    env = WebEnv()  # nothing starts before reset()
    env._snapshot = Snapshot(path="/long", status=404, title="", lines=[f'text "line {i}"' for i in range(100)])
    first = env.render()
    assert first.startswith("URL: /long (HTTP 404 Not Found)\ntext \"line 0\"")
    assert first.endswith("... 60 lines below (scroll down)")
    env._offset = 80
    last = env.render()
    assert last.split("\n")[1] == "... 80 lines above (scroll up)" and last.endswith('text "line 99"')
    env._snapshot.lines = ['text "' + "x" * 390 + '"'] * 40
    env._offset = 0
    capped = env.render()
    assert len(capped) <= MAX_OBS_CHARS and capped.endswith("... (observation truncated)")
    assert_page(capped)
    with pytest.raises(ActionError, match=r'unknown action "hello\\nworld"'):
        parse_action("hello\nworld")


# ----------------------------------------------------------------------------- real backend
@needs_browser
def test_reset_and_step_protocol(env):
    observation, info = env.reset(seed=3)
    assert isinstance(env.task, Task) and env.task.domain == "web"
    instruction, page = observation.split("\n\n", 1)
    assert instruction == env.task.instruction
    assert_page(page)
    assert page.split("\n")[1:9] == ['[1] link "Agora"', '[2] link "Products"', '[3] link "Forum"',
                                     '[4] link "My orders"', '[5] link "Account"', '[6] link "Log in"',
                                     '[7] textbox "Search products"', '[8] button "Search"']
    json.dumps(info)
    observation, reward, terminated, truncated, info = env.step("click [2]")
    assert_page(observation)
    assert observation.startswith("URL: /products\n") and 'heading "Products"' in observation
    assert (reward, terminated, truncated) == (0.0, False, False)
    json.dumps(info)
    assert info["url"] == "/products" and info["action_type"] == "click" and not info["error"]
    observation, *_ = env.step("click [12]")  # the second product of the list
    observation, reward, terminated, truncated, info = env.step("stop")
    assert (observation, reward, terminated) == (ENDED, 0.0, True)
    json.dumps(info)
    with pytest.raises(RuntimeError):
        env.step("back")


@needs_browser
@pytest.mark.parametrize("template", ["place_order", "post_reply", "cancel_order", "change_email", "info_price"])
def test_scripted_solution_solves(env, template):
    seed = seed_for(template, 40)
    env.reset(seed=seed)
    assert env.task.setup["template"] == template
    rewards = []
    for action in env.task.solution:
        observation, reward, terminated, truncated, info = env.step(action)
        assert not info["error"], (action, observation)
        rewards.append(reward)
        if terminated:
            break
    assert rewards[-1] == 1.0 and sum(rewards) == 1.0 and terminated and info["solved"]
    assert len(rewards) == len(env.task.solution)


@needs_browser
@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_policies_play_real_episodes(env, policy_name):
    observation, _ = env.reset(seed=7)
    policy = web_policy(policy_name, env.task)
    rng, history, errors = random.Random(1), [], 0
    for _ in range(8):
        action = policy.act(observation, history, rng)
        assert isinstance(action, str) and action.strip()
        observation, reward, terminated, truncated, info = env.step(action)
        assert observation.startswith(("URL: /", "Error: ")) or observation == ENDED, observation
        verb = action.split()[0]
        expected = [ERROR_RE] + ([PAGE_RE] if verb in BROWSER_VERBS else [ENDED_RE] if verb == "stop" else [])
        assert any(re.match(regex, observation) for regex in expected), (action, observation)
        if observation.startswith("URL: "):
            assert_page(observation)
        json.dumps(info)
        errors += observation.startswith("Error: ")
        history.append((action, observation))
        if terminated:
            break
    if policy_name == "erroneous":
        assert errors >= 2
    if policy_name == "scripted":
        assert errors == 0


@needs_browser
def test_errors_are_the_backends_own(env):
    env.reset(seed=seed_for("change_email"))
    user = env.task.instruction.split()[3]
    password = re.search(r'password "([^"]+)"', env.task.instruction).group(1)
    observation, *_ = env.step('type [1] "hello"')  # Playwright refuses to fill a link
    assert observation.startswith("Error: Element is not an <input>, <textarea>, <select>")
    observation, *_ = env.step("goto /no/such/page")  # Flask's own 404 page
    assert observation.startswith("URL: /no/such/page (HTTP 404 Not Found)\nheading \"Not Found\"")
    env.step("goto /login")
    env.step(f'type [9] "{user}"')
    env.step('type [10] "wrong-password"')
    observation, *_ = env.step("click [11]")
    assert 'text "Error: invalid username or password."' in observation
    env.step(f'type [9] "{user}"')
    env.step(f'type [10] "{password}"')
    env.step("click [11]")
    observation, *_ = env.step("click [5]")
    assert observation.startswith("URL: /account\n")
    env.step('type [10] "not-an-email"')
    observation, *_ = env.step("click [11]")
    assert 'text "Error: "not-an-email" is not a valid email address."' in observation
    observation, *_ = env.step("click [99]")
    assert observation.startswith("Error: no element [99] on this page")
    assert env.query("SELECT email FROM users WHERE username=?", user) == [(f"{user}@example.org",)]


@needs_browser
def test_reset_wipes_the_previous_episode(env):
    _login(env, "change_name")
    observation, _ = env.reset(seed=seed_for("change_name"))
    assert '[6] link "Log in"' in observation and "Signed in as" not in observation  # cookies are gone
    observation, *_ = env.step("back")
    assert observation == "Error: there is no previous page in this tab's history"
    observation, *_ = env.step("click [5]")  # the account page asks for a login again
    assert observation.startswith("URL: /login?next=%2Faccount\n")


@needs_browser
def test_same_seed_same_observations(env):
    actions = ["click [3]", "click [12]", "goto /products?page=2", 'type [7] "Mug"', "click [8]", "back",
               "scroll down", "click [99]", "goto /login", 'type [9] "nobody"', "click [11]"]

    def run() -> list[str]:
        observation, _ = env.reset(seed=11)
        return [observation] + [env.step(action)[0] for action in actions]

    first, second = run(), run()
    assert first == second
    assert len(set(first)) > 5


def _login(env: WebEnv, template: str) -> None:
    env.reset(seed=seed_for(template))
    for action in env.task.solution[:4]:  # every write task starts with goto /login, user, password, click
        env.step(action)
    assert env.browser.snapshot().path == "/"


def _pwned(env: WebEnv):
    return env.browser.evaluate("() => window.__pwned === undefined ? null : window.__pwned")


@needs_browser
def test_script_injection_is_stored_verbatim_and_shown_as_text(env):
    _login(env, "post_reply")
    env.step(env.task.solution[4])  # open the forum
    env.step("click [12]")  # the first thread
    env.step(f'type [9] "{XSS_SCRIPT}"')
    observation, *_ = env.step("click [10]")
    assert f'text "{XSS_SCRIPT}"' in observation
    assert _pwned(env) is None
    assert env.query("SELECT COUNT(*) FROM posts WHERE body=?", XSS_SCRIPT) == [(1,)]

    env.step("goto /products/3")
    env.step('select [11] "2 stars"')
    env.step(f'type [12] "{XSS_IMG}"')
    observation, *_ = env.step("click [13]")
    assert XSS_IMG in observation and "text " in observation
    assert _pwned(env) is None
    assert env.query("SELECT rating, body FROM reviews WHERE body=?", XSS_IMG) == [(2, XSS_IMG)]

    env.step("click [5]")
    env.step(f'type [9] "{XSS_IMG}"')
    observation, *_ = env.step("click [11]")
    assert f'[9] textbox "Display name" value="{XSS_IMG}"' in observation
    assert f'text "Signed in as {XSS_IMG} (' in observation
    assert _pwned(env) is None
    assert env.query("SELECT COUNT(*) FROM users WHERE display_name=?", XSS_IMG) == [(1,)]
    observation, *_ = env.step("goto /products/3")  # the review now shows the new display name too
    assert _pwned(env) is None and XSS_IMG in observation


@needs_browser
def test_only_the_apps_origin_is_reachable(env):
    env.reset(seed=2)
    for target in ("http://example.com", "https://example.com/x", "file:///etc/passwd", "javascript:alert(1)",
                   "//example.com/", "http://127.0.0.1:1/", "about:blank", "products"):
        observation, reward, terminated, _, info = env.step(f"goto {target}")
        assert observation.startswith("Error: navigation to ") and "is blocked" in observation, target
        assert not terminated
    assert info["url"] == "/"
    # the browser's own route guard (second line of defence) aborts foreign requests too
    with pytest.raises(Exception, match="ERR_BLOCKED_BY_CLIENT"):
        env.browser.page.goto("http://example.com/")
    assert "http://example.com/" in env.browser.blocked


def _descendants() -> set[int]:
    import psutil
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE}


@needs_browser
def test_close_leaves_nothing_behind_and_instances_agree(env):
    actions = ["click [2]", "click [11]", "goto /forum?page=2"]
    env.reset(seed=21)
    expected = [env.step(action)[0] for action in actions]

    before = _descendants()
    other = WebEnv()
    try:
        other.reset(seed=21)
        assert [other.step(action)[0] for action in actions] == expected  # another port, same pages
        port, tmpdir = other.server.port, other.tmpdir
        spawned = _descendants() - before
        assert spawned  # the Playwright driver and Chromium
    finally:
        other.close()
    deadline = time.time() + 10
    while _descendants() & spawned and time.time() < deadline:
        time.sleep(0.2)
    assert not (_descendants() & spawned)
    assert not os.path.exists(tmpdir)
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    other.close()  # idempotent
