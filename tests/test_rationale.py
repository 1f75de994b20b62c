"""Grounded rationales: facts from the adapters' info dicts, never the observation text."""

from __future__ import annotations

import pytest

from agentworld.data.schema import Transition
from agentworld.domains import all_domains
from agentworld.envs.rationale import episode_rationales, rationale

DOMAINS = ("terminal", "os", "mcp", "search", "swe", "web", "textworld", "scienceworld")


def test_every_domain_has_a_describer():
    assert {name for name, domain in all_domains().items() if domain.describer is not None} >= set(DOMAINS)


# ----------------------------------------------------------------------------- per domain
def test_terminal_cwd_change_and_exit_status():
    prev = {"cwd": "/workspace", "exit_code": 0}
    info = {"cwd": "/workspace/logs", "exit_code": 1, "timed_out": False, "truncated": False}
    text = rationale("terminal", "cd logs && false", "", info, prev)
    assert "/workspace" in text and "/workspace/logs" in text and "changes" in text
    assert "status 1" in text


def test_terminal_timeout_truncation_and_known_codes():
    assert "times out" in rationale("terminal", "sleep 99", "", {"cwd": "/w", "exit_code": 124, "timed_out": True},
                                    {"cwd": "/w"})
    assert "truncated" in rationale("os", "cat big", "", {"cwd": "/root", "exit_code": 0, "truncated": True}, None)
    assert "not found" in rationale("terminal", "cta x", "", {"cwd": "/w", "exit_code": 127}, {"cwd": "/w"})
    assert "no matching line" in rationale("terminal", "grep -c foo a.txt", "", {"cwd": "/w", "exit_code": 1}, None)


def test_os_answer_step_without_exit_code():
    info = {"cwd": "/root", "ended_by_agent": True, "answer": "redis", "solved": True, "terminated": True}
    text = rationale("os", "answer redis", "", info, {"cwd": "/root", "exit_code": 0})
    assert "answer" in text and "solved" in text and "not solved" not in text


def test_mcp_tool_and_error():
    action = '{"arguments": {"status": "complete"}, "tool": "list_orders"}'
    text = rationale("mcp", action, '{"isError":true}', {"app": "shop", "tool": "list_orders", "is_error": True}, None)
    assert "`list_orders`" in text and "shop" in text and "error" in text
    ok = rationale("mcp", action, "", {"app": "shop", "tool": "list_orders", "is_error": False}, None)
    assert "returns a result" in ok and "error" not in ok
    # tool name falls back to the action's JSON
    assert "`get_issue`" in rationale("mcp", '{"arguments": {}, "tool": "get_issue"}', "", {}, None)


def test_search_kinds():
    assert "3 results" in rationale("search", "search(json dumps)", "", {"action_type": "search", "error": False,
                                                                           "results": 3}, None)
    opened = rationale("search", "open(func:json.dumps)", "", {"action_type": "open", "error": False,
                                                              "open_doc": "func:json.dumps", "page": 1}, None)
    assert "func:json.dumps" in opened and "page 1" in opened
    bad = rationale("search", "open[x]", "", {"action_type": "invalid", "error": True}, None)
    assert "error" in bad


def test_swe_tests_and_actions():
    info = {"project": "toolz", "action_type": "run_tests", "exit_code": 1, "timed_out": False}
    text = rationale("swe", "run_tests toolz/tests/test_dicttoolz.py", "", info, None)
    assert "toolz" in text and "status 1" in text and "fail" in text
    assert "Views" in rationale("swe", "view a.py 1-10", "", {"action_type": "view", "exit_code": 0}, None)
    edit = rationale("swe", 'edit {"path": "pkg/m.py", "old": "a", "new": "b"}', "",
                     {"action_type": "edit", "exit_code": 1}, None)
    assert "pkg/m.py" in edit and "rejected" in edit
    sub = rationale("swe", "submit", "", {"project": "toolz", "action_type": "submit", "exit_code": 0,
                                          "solved": True}, None)
    assert "solved" in sub and "not solved" not in sub


def test_web_url_change_and_error():
    prev = {"url": "/login", "status": 200, "title": "Log in - Agora", "elements": 11}
    info = {"action_type": "click", "error": False, "url": "/account", "status": 200,
            "title": "Account - Agora", "elements": 14}
    text = rationale("web", "click [9]", "URL: /account\n...", info, prev)
    assert "element 9" in text and "/login" in text and "/account" in text
    assert "status 200" in text and "Account - Agora" in text and "14 interactive elements" in text
    err = rationale("web", "click [99]", "", {"action_type": "click", "error": True, "url": "/cart"}, prev)
    assert "error" in err and "/cart" in err


def test_textworld_score_change_and_inadmissible():
    prev = {"score": 0, "max_score": 3, "description": "-= Bedroom =-\n..."}
    info = {"admissible": True, "score": 1, "max_score": 3, "description": "-= Kitchen =-\n..."}
    text = rationale("textworld", "take old key", "", info, prev)
    assert "admissible" in text and "from 0 to 1 of 3" in text and "Kitchen" in text
    refused = rationale("textworld", "eat toilet", "", {"admissible": False, "score": 0, "max_score": 3}, prev)
    assert "not admissible" in refused
    assert "won" in rationale("textworld", "put x", "", {"admissible": True, "won": True, "score": 3}, prev)


def test_scienceworld_valid_and_refused():
    text = rationale("scienceworld", "go to outside", "", {"valid": True, "score": 25}, {"score": 17})
    assert "valid" in text and "17 to 25" in text
    assert "No known action" in rationale("scienceworld", "fly", "", {"valid": False, "score": 17}, {"score": 17})
    assert "completed" in rationale("scienceworld", "focus on x", "", {"valid": True, "completed": True}, None)


# ----------------------------------------------------------------------------- robustness
def test_unknown_domain_is_generic_or_empty():
    assert rationale("chess", "e4", "ok", {}, None) == ""
    assert "error" in rationale("chess", "e9", "bad", {"error": True}, None)
    assert "status 2" in rationale("chess", "x", "", {"exit_code": 2}, None)
    assert "solved" in rationale("chess", "x", "", {"solved": True}, None)


@pytest.mark.parametrize("domain", DOMAINS + ("unknown",))
@pytest.mark.parametrize("info", [{}, None, {"score": "x", "exit_code": "?", "url": 5, "tool": None,
                                             "description": 3, "blocked_urls": "no", "page": True}])
def test_missing_or_odd_keys_never_raise(domain, info):
    out = rationale(domain, "act", "obs", info, info)
    assert isinstance(out, str) and len(out) < 400


def test_deterministic():
    args = ("web", "click [2]", "", {"url": "/b", "status": 200, "elements": 3}, {"url": "/a"})
    assert rationale(*args) == rationale(*args)


def test_long_observation_is_never_copied():
    obs = "this is a long output line for the test"
    out = rationale("terminal", f"echo {obs}", obs, {"cwd": "/w", "exit_code": 0}, None)
    assert obs not in out


# ----------------------------------------------------------------------------- real-shaped rows
def _row(domain: str, turn: int, action: str, observation: str, info: dict) -> dict:
    return {"id": f"{domain}-t:{turn:03d}", "trajectory_id": f"{domain}-t", "turn": turn, "domain": domain,
            "env_id": f"{domain}-v1", "task_id": "t", "instruction": "do it", "action": action,
            "observation": observation, "reward": 0.0, "done": False, "source": "real", "policy": "p",
            "env_version": "1", "seed": 0, "timestamp": "2024-01-01T00:00:00Z", "info": info}


EPISODES = {
    "terminal": [
        ("cd cache", "", {"cwd": "/workspace/cache", "exit_code": 0, "timed_out": False, "truncated": False}),
        ("sort journal_6.txt | uniq -c | sort -rn | head -n 3", "     11 umbrella\n      8 river\n      6 indigo\n",
         {"cwd": "/workspace/cache", "exit_code": 0, "timed_out": False, "truncated": False, "solved": False}),
    ],
    "os": [
        ("ls /etc/systemd/system", "api.service\nbackup-agent.service\nmetrics-exporter.service\n",
         {"template": "restart_on_failure", "cwd": "/root", "exit_code": 0, "timed_out": False, "truncated": False}),
        ("answer redis,metrics-exporter", "", {"cwd": "/root", "ended_by_agent": True,
                                              "answer": "redis,metrics-exporter", "solved": True, "terminated": True}),
    ],
    "mcp": [
        ('{"arguments": {"limit": 50, "project_key": "API", "status": "closed"}, "tool": "list_issues"}',
         '{"isError":false,"result":{"issues":[{"assignee":"priya.rossi","id":8}]}}',
         {"app": "tracker", "kind": "lookup_count", "tool": "list_issues", "is_error": False, "solved": False}),
        ('{"arguments": {"answer": "4"}, "tool": "submit_answer"}',
         '{"isError":false,"result":{"answer_id":1,"recorded":true}}',
         {"app": "tracker", "tool": "submit_answer", "is_error": False, "solved": True, "terminated": True}),
    ],
    "search": [
        ("search(title:multimode)", 'Results 1-1 of 1 for "title:multimode":\n1. [func:statistics.multimode]',
         {"action_type": "search", "error": False, "solved": False, "open_doc": None, "page": None, "results": 1}),
        ("open(func:statistics.multimode)", "[func:statistics.multimode] statistics.multimode - Return a list",
         {"action_type": "open", "error": False, "open_doc": "func:statistics.multimode", "page": 1}),
        ("answer(statistics)", "Answer submitted: statistics",
         {"action_type": "answer", "error": False, "solved": True, "open_doc": "func:statistics.multimode",
          "page": 1}),
    ],
    "swe": [
        ('edit {"path": "toolz/itertoolz.py", "old": "    if callable(key):\\n", '
         '"new": "    if not callable(key):\\n"}',
         "Edited toolz/itertoolz.py: replaced 1 line(s) at line 96.",
         {"project": "toolz", "action_type": "edit", "exit_code": 0, "timed_out": False}),
        ("run_tests toolz/tests/test_itertoolz.py::test_groupby", "F" + " " * 40 + "[100%]\n1 failed",
         {"project": "toolz", "action_type": "run_tests", "exit_code": 1, "timed_out": False}),
        ("python -m pytest", "error: unknown action 'python'. Valid actions: ls [path] | view <path>",
         {"project": "toolz", "action_type": "invalid", "solved": False}),
    ],
    "web": [
        ("goto /login", 'URL: /login\n[1] link "Agora"\n[2] link "Products"',
         {"action_type": "goto", "error": False, "url": "/login", "status": 200, "title": "Log in - Agora",
          "elements": 11, "lines": 12, "scroll_offset": 0, "blocked_urls": []}),
        ('type [9] "alice"', 'URL: /login\n[1] link "Agora"\n[2] link "Products"\n[9] textbox "alice"',
         {"action_type": "type", "error": False, "url": "/login", "status": 200, "title": "Log in - Agora",
          "elements": 11, "lines": 12, "scroll_offset": 0, "blocked_urls": []}),
        ("click [11]", 'URL: /\n[1] link "Agora"\n[6] button "Log out"',
         {"action_type": "click", "error": False, "url": "/", "status": 200, "title": "Home - Agora",
          "elements": 15, "lines": 20, "scroll_offset": 0, "blocked_urls": []}),
    ],
    "textworld": [
        ("open chest drawer", "You open the chest drawer, revealing an old key.",
         {"admissible": True, "score": 0, "max_score": 3, "won": False, "lost": False, "moves": 1,
          "admissible_commands": ["close chest drawer", "take old key from chest drawer"],
          "description": "-= Bedroom =-\nA bedroom.", "inventory": "You are carrying nothing."}),
        ("take old key from chest drawer", "You take the old key from the chest drawer.",
         {"admissible": True, "score": 1, "max_score": 3, "won": False, "lost": False, "moves": 2,
          "admissible_commands": ["drop old key"], "description": "-= Bedroom =-\nA bedroom.",
          "inventory": "You are carrying: an old key."}),
        ("eat toilet", "You can't see any such thing here at all.",
         {"admissible": False, "score": 1, "max_score": 3, "won": False, "lost": False, "moves": 2,
          "admissible_commands": ["drop old key"], "description": "-= Bedroom =-\nA bedroom.",
          "inventory": "You are carrying: an old key."}),
    ],
    "scienceworld": [
        ("open door to outside", "The door is now open.",
         {"score": 8, "moves": 1, "completed": False, "failed": False, "valid": True, "ambiguous": False,
          "valid_action_count": 231}),
        ("go to outside", "You move to the outside.",
         {"score": 17, "moves": 2, "completed": False, "failed": False, "valid": True, "ambiguous": False}),
        ("open door to hallway", "No known action matches that input.",
         {"score": 17, "moves": 2, "completed": False, "failed": False, "valid": False, "ambiguous": False}),
    ],
}


@pytest.mark.parametrize("domain", sorted(EPISODES))
def test_real_shaped_episodes(domain):
    rows = [_row(domain, turn, *step) for turn, step in enumerate(EPISODES[domain])]
    texts = episode_rationales(rows)
    assert len(texts) == len(rows)
    for row, text in zip(rows, texts):
        assert isinstance(text, str) and text, (domain, row["action"])
        assert len(text) < 400
        if len(row["observation"]) > 20:
            assert row["observation"] not in text
    # pydantic Transitions give the same result as dicts
    assert episode_rationales([Transition(**row) for row in rows]) == texts


def test_episode_passes_previous_info():
    rows = [_row("terminal", 0, "cd cache", "", {"cwd": "/workspace/cache", "exit_code": 0}),
            _row("terminal", 1, "cd ..", "", {"cwd": "/workspace", "exit_code": 0})]
    first, second = episode_rationales(rows)
    assert "changes" not in first
    assert "from /workspace/cache to /workspace" in second
    assert episode_rationales([]) == []
