"""The search env against the real SQLite FTS5 index of CPython's documentation.

The shared index is built once per machine (default cache dir, ~10 s); one test builds a second
copy in a temp dir with two racing processes to check the atomic build and that the content is
the same on every build.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentworld.domains.search.corpus import ensure_index, index_name
from agentworld.domains.search.env import (
    MAX_OBS_CHARS,
    SYSTEM_PROMPT,
    TASK_KINDS,
    VALID_ACTIONS,
    SearchEnv,
    factory,
    normalise_answer,
    paginate,
    probe,
    search_policy,
)
from agentworld.envs.base import Task
from agentworld.envs.behaviour import POLICY_NAMES

AVAILABLE, REASON = probe()
pytestmark = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"search env unavailable: {REASON}")
PROJECT = Path(__file__).resolve().parents[1]


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def content_hash(path: Path) -> str:
    """Hash of the documents and facts (what every machine must agree on), not of the file bytes."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        h = hashlib.sha256()
        for table in ("SELECT doc_id, kind, title, body FROM documents ORDER BY rowid",
                      "SELECT kind, key, value, doc_id FROM facts ORDER BY kind, key, value, doc_id"):
            for row in conn.execute(table):
                h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def env():
    env = factory(None)
    env.reset(seed=0)
    yield env
    env.close()


@pytest.fixture(scope="module")
def index_hash(env):
    return file_hash(env.index_path)


def play(env: SearchEnv, actions: list[str], seed: int):
    observation, info = env.reset(seed=seed)
    out = [(observation, 0.0, False, info)]
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        assert truncated is False
        out.append((observation, reward, terminated, info))
        if terminated:
            break
    return out


# ----------------------------------------------------------------------------- protocol
def test_probe_and_prompt():
    assert AVAILABLE, REASON
    assert "FTS5" in REASON
    assert "exactly what" in SYSTEM_PROMPT and 2 <= SYSTEM_PROMPT.count(". ") + 1 <= 4


def test_reset_step_protocol_and_info_serialisable(env):
    observation, info = env.reset(seed=3)
    assert isinstance(env.task, Task) and env.task.domain == "search"
    assert observation.startswith(env.task.instruction) and VALID_ACTIONS in observation
    json.dumps(info)
    observation, reward, terminated, truncated, info = env.step("search(json)")
    assert observation.startswith('Results 1-8 of ') and "[module:json]" in observation
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["action_type"] == "search" and info["error"] is False
    json.dumps(info)
    observation, *_ , info = env.step("open(module:json)")
    assert observation.startswith("[module:json] json - ") and "\n[page 1/" in observation
    observation, *_ = env.step("find_in_page(dumps)")
    assert " in module:json:" in observation and "L" in observation
    json.dumps(info)
    observation, reward, terminated, truncated, info = env.step("answer(nothing)")
    assert observation == "Answer submitted: nothing" and terminated and reward == 0.0
    with pytest.raises(RuntimeError):
        env.step("search(json)")


def test_options_task_and_kinds(env):
    kinds = set()
    for seed in range(len(TASK_KINDS)):
        env.reset(seed=seed)
        kinds.add(env.task.setup["kind"])
    assert kinds == set(TASK_KINDS)
    task = env.task
    env.reset(seed=999, options={"task": task})
    assert env.task == task
    with pytest.raises(ValueError):
        env.reset(options={"task": Task("x", "terminal", "y")})


def test_pagination_and_next_page(env):
    env.reset(seed=1)
    observation, *_ = env.step("open(module:os)")
    total = int(observation.split("[page 1/", 1)[1].split("]", 1)[0])
    assert total > 1
    observation, *_ = env.step("next_page()")
    assert observation.startswith(f"[module:os]\n[page 2/{total}]\n")
    for _ in range(total - 2):
        env.step("next_page()")
    observation, _, _, _, info = env.step("next_page()")
    assert observation == f"Error: already at the last page ({total}/{total}) of module:os." and info["error"]
    assert paginate("a\n" * 10, 6) == ["a\na\na", "a\na\na", "a\na\na", "a\n"]


# ----------------------------------------------------------------------------- tasks
@pytest.mark.parametrize("seed", range(12))
def test_scripted_solution_solves(env, seed):
    env.reset(seed=seed)
    steps = play(env, env.task.solution, seed)
    *middle, (last_obs, reward, terminated, info) = steps
    assert reward == 1.0 and terminated and info["solved"]
    assert all(r == 0.0 and not t for _, r, t, _ in middle)
    assert all(not i.get("error") for *_, i in steps[1:])


def test_wrong_answer_and_normalisation(env):
    env.reset(seed=0)
    answer = env.task.setup["answer"]
    *_, (obs, reward, terminated, _) = play(env, [f"answer(  `{answer}`. )"], 0)
    assert reward == 1.0 and terminated
    *_, (obs, reward, terminated, _) = play(env, ["answer(definitely_wrong)"], 0)
    assert reward == 0.0 and terminated
    assert normalise_answer("'abc'", True) == "abc" and normalise_answer("[module:json]") == "module:json"


# ----------------------------------------------------------------------------- policies
@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_policies_play_real_episodes(env, policy_name):
    errors = valid = 0
    for seed in range(3):
        observation, _ = env.reset(seed=40 + seed)
        policy = search_policy(policy_name, env.task)
        rng, history = random.Random(seed), []
        for _ in range(10):
            action = policy.act(observation, history, rng)
            observation, reward, terminated, _, info = env.step(action)
            json.dumps(info)
            assert isinstance(observation, str) and observation and len(observation) <= MAX_OBS_CHARS
            errors += info["error"]
            valid += not info["error"]
            history.append((action, observation))
            if terminated:
                if policy_name == "scripted":
                    assert reward == 1.0
                break
    if policy_name == "erroneous":
        assert errors >= 5
    else:
        assert valid > errors


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("action, expected", [
    ("search(json AND)", 'Error: fts5: syntax error near ""'),
    ("search(foo:bar)", "Error: no such column: foo"),
    ('search("unbalanced)', "Error: unterminated string"),
    ("search((json OR xml)", 'Error: fts5: syntax error near ""'),
    ("search(json.dumps)", 'Error: fts5: syntax error near "."'),
    ("lookup(json)", 'Error: unknown action "lookup(...)". Valid actions: ' + VALID_ACTIONS),
    ("search json", 'Error: malformed action "search json": arguments go in parentheses'),
    ("open()", "Error: open() needs a doc_id, e.g. open(...)."),
    ("open(module:jsonx)", 'Error: no document with id "module:jsonx".'),
    ("open([module:json])", 'Error: no document with id "[module:json]". Did you mean [module:json]?'),
    ("next_page(2)", "Error: next_page() takes no argument."),
    ("find_in_page(json)", "Error: no document is open; use open(<doc_id>) first."),
])
def test_errors_are_engine_errors(env, action, expected):
    env.reset(seed=2)
    observation, reward, terminated, _, info = env.step(action)
    assert observation.startswith(expected), observation
    assert info["error"] and reward == 0.0 and not terminated


def test_fts5_error_is_sqlites_own_message(env):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(a)")
    with pytest.raises(sqlite3.OperationalError) as exc:
        conn.execute("SELECT * FROM t WHERE t MATCH ?", ("json AND",)).fetchall()
    env.reset(seed=2)
    assert env.step("search(json AND)")[0] == f"Error: {exc.value}"


def test_no_results_and_no_matches(env):
    env.reset(seed=2)
    assert env.step("search(zzqxwv)")[0] == 'No results for "zzqxwv".'
    env.step("open(topic:assert)")
    assert env.step("find_in_page(zzqxwv)")[0] == 'No matches for "zzqxwv" in topic:assert.'


# ----------------------------------------------------------------------------- hostile actions
HOSTILE = [
    "search(' OR 1=1 --)", "search(\"; DROP TABLE documents; --)", "search(x'); DELETE FROM documents; --)",
    "search(json) ; DROP TABLE docs", "search(\"\"\"\"\")", "search(((((((json)", "search(json)))))",
    "search(NEAR(a b, -1))", "search(title:* OR body:*)", "search(a* OR b* OR c* OR d* OR e* OR s* OR t*)",
    "search(" + "json OR " * 60 + "xml)", "search(" + "a" * 5000 + ")", "search(\x00json)",
    "search(\ud800)", "open(module:json' OR '1'='1)", "open(%)", "find_in_page(%' --)",
    "search(docs MATCH 'x')", "search(rank:1)", "search(-json)", "search(^json)", "search(json NOT)",
    "answer(" + "x" * 3000 + ")", "search(" + "(" * 300 + ")", "search(" + "b " * 400 + ")",
    "find_in_page(\ud800)",
]


def test_hostile_actions_never_crash_or_modify(env, index_hash):
    for seed, action in enumerate(HOSTILE):
        env.reset(seed=seed)
        observation, reward, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str) and observation and len(observation) <= MAX_OBS_CHARS
        json.dumps(info)
        assert reward == 0.0
        if not terminated:  # the engine still answers normally afterwards
            assert env.step("search(json)")[0].startswith("Results 1-")
    assert file_hash(env.index_path) == index_hash
    with pytest.raises(sqlite3.OperationalError):  # the connection itself cannot write
        env.engine.conn.execute("DELETE FROM documents")


# ----------------------------------------------------------------------------- determinism, lifecycle
def test_determinism_same_seed_same_observations(env):
    env.reset(seed=7)
    actions = ["search(thread lock)", "open(class:threading.Lock)", "find_in_page(acquire)", "next_page()",
               "search(json AND)", *env.task.solution]
    first = play(env, actions, 7)
    other = SearchEnv()
    try:
        second = play(other, actions, 7)
    finally:
        other.close()
    assert [(o, r, t, json.dumps(i, sort_keys=True)) for o, r, t, i in first] == \
           [(o, r, t, json.dumps(i, sort_keys=True)) for o, r, t, i in second]


def test_close_leaves_nothing_behind():
    ours = lambda: {n for n in os.listdir(tempfile.gettempdir()) if "agentworld-search" in n}  # noqa: E731
    before_tmp = ours()
    fresh = SearchEnv()
    fresh.reset(seed=5)
    path = fresh.index_path
    fresh.step("search(json)")
    def open_handles() -> int:  # file descriptors of this process on the index (other envs may hold some)
        return [os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")].count(str(path.resolve()))
    held = open_handles()
    assert held >= 1
    fresh.close()
    assert open_handles() == held - 1
    assert ours() == before_tmp
    import psutil
    assert psutil.Process().children() == []
    fresh.close()  # idempotent


def test_atomic_build_is_deterministic(env, tmp_path):
    """Two processes race to build into an empty cache: one builds, the other waits; same content."""
    code = "import sys; from agentworld.domains.search.corpus import ensure_index; print(ensure_index(sys.argv[1]))"
    envvars = {**os.environ, "PYTHONPATH": str(PROJECT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], env=envvars, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1] == str(tmp_path / index_name())
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == [index_name()]
    assert content_hash(tmp_path / index_name()) == content_hash(env.index_path)
    assert ensure_index(tmp_path) == tmp_path / index_name()


def test_expensive_query_is_interrupted(env, monkeypatch):
    import agentworld.domains.search.env as search_env

    env.reset(seed=2)
    monkeypatch.setattr(search_env, "QUERY_BUDGET", 1)
    observation, _, _, _, info = env.step("search(a* OR b* OR c*)")
    assert observation == "Error: interrupted: the query exceeded its cost budget" and info["error"]
    monkeypatch.undo()
    assert env.step("search(a* OR b* OR c*)")[0].startswith("Results 1-8 of ")
    assert env.step("search(" + "b " * 400 + ")")[0] == "Error: query too long (799 characters; at most 500)."
