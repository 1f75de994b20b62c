"""Judges on hand-checked transitions of several domains: the rule-based LocalJudge, the
OpenAI-compatible judge against a stub HTTP server, and rank agreement."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentworld.data.prompts import assistant_turn
from agentworld.scoring.judge import (
    DIMENSIONS,
    JudgeInput,
    JudgeParseError,
    JudgeScores,
    LocalJudge,
    OpenAIJudge,
    deterministic_facts,
    judge_messages,
    parse_judge_response,
    rank_agreement,
    shape_problems,
)
from tests.helpers import send_json

# ---------------------------------------------------------------------------------------------
# Hand-checked cases: (name, context, reference, faithful generation, wrong generation).
# The wrong generations are typical bad world-model outputs: a layout/shape flaw, wrong
# deterministic content, a contradiction with the history, off length or degenerate repetition.
# ---------------------------------------------------------------------------------------------

TERMINAL_REF = "total 0\n-rw-r--r-- 1 root root 0 Jan  5 10:22 notes.txt"
MCP_REF = '{"isError":false,"result":{"created_at":"2024-05-01T10:00:00Z","id":31,"key":"API-31","status":"open","title":"Fix login timeout"}}'
SEARCH_REF = ('Results 1-2 of 2 for "json dumps":\n'
              "1. [func:json.dumps] json.dumps - Serialize obj to a JSON formatted str.\n"
              "   dumps(obj, *, skipkeys=False, ensure_ascii=True) Serialize **obj** to a JSON formatted str...\n"
              "2. [module:json] json - JSON encoder and decoder\n"
              "   ...**json** exposes an API familiar to users of the standard library marshal and pickle...")
WEB_LOGIN = ('URL: /login\n[1] link "Agora"\n[2] link "Products"\n[3] link "Forum"\n[4] link "My orders"\n'
             '[5] link "Account"\n[6] link "Log in"\n[7] textbox "Search products"\n[8] button "Search"\n'
             'heading "Log in"\n[9] textbox "Username"\n[10] textbox "Password"\n[11] button "Log in"')
WEB_REF = ('URL: /\n[1] link "Agora"\n[2] link "Products"\n[3] link "Forum"\n[4] link "My orders"\n'
           '[5] link "Account"\n[6] button "Log out"\n[7] textbox "Search products"\n[8] button "Search"\n'
           'text "Signed in as Alice Okafor (alice)"\ntext "Welcome back, Alice Okafor!"\n'
           'heading "Welcome to Agora"\n[9] link "Garden"\ntext "(6 products)"\n[10] link "Kitchen"\n'
           'text "(6 products)"')
SWE_EDIT = '{"path": "toolz/itertoolz.py", "old": "    if callable(key):\\n", "new": "    if not callable(key):\\n"}'
SWE_REF = ('    94\t        countby\n    95\t    """\n    96\t    if not callable(key):\n'
           "    97\t        key = getter(key)\n    98\t    d = collections.defaultdict(lambda: [].append)")

CASES = [
    pytest.param(
        JudgeInput(domain="terminal", generation="", reference=TERMINAL_REF, action="ls -l /workspace/proj",
                   instruction="Set up the project notes.",
                   history=(("mkdir -p /workspace/proj && touch /workspace/proj/notes.txt", ""),
                            ("cat todo.md", "cat: todo.md: No such file or directory"))),
        assistant_turn(TERMINAL_REF, reasoning="notes.txt was created empty; todo.md never existed."),
        "Sure! Here is the listing:\n**Environment Observation:**\n"
        + "todo.md  todo.md  todo.md  todo.md  todo.md  todo.md  todo.md\n" * 6,
        id="terminal"),
    pytest.param(
        JudgeInput(domain="mcp", generation="", reference=MCP_REF,
                   action='{"tool": "get_issue", "arguments": {"key": "API-31"}}', instruction="Triage API-31.",
                   history=(('{"tool": "create_issue", "arguments": {"project_key": "API", "title": "Fix login timeout"}}',
                             '{"isError":false,"result":{"id":31,"key":"API-31","status":"open","title":"Fix login timeout"}}'),)),
        assistant_turn(MCP_REF),
        "**Environment Observation:**\nThe issue could not be found. Error: not found (it may have been deleted).",
        id="mcp"),
    pytest.param(
        JudgeInput(domain="search", generation="", reference=SEARCH_REF, action="search(json dumps)",
                   instruction="Find how to serialise to JSON.",
                   history=(("search(json)", 'Results 1-1 of 1 for "json":\n1. [module:json] json - JSON encoder and decoder\n'
                                             "   ...**json** exposes an API familiar to users..."),)),
        assistant_turn(SEARCH_REF),
        "<think>I think the user wants dumps\n**Environment Observation:**\nYou can use json.dumps to serialize "
        "objects. It is very useful and very popular and very useful and very popular and very useful.",
        id="search"),
    pytest.param(
        JudgeInput(domain="web", generation="", reference=WEB_REF, action="click [11]", instruction="Log in as alice.",
                   history=(("goto /login", WEB_LOGIN), ('type [9] "alice"', WEB_LOGIN.replace(
                       '[9] textbox "Username"', '[9] textbox "Username" value="alice"')))),
        assistant_turn(WEB_REF),
        "Clicked the login button. The page now shows a welcome message for the user.",
        id="web"),
    pytest.param(
        JudgeInput(domain="swe", generation="", reference=SWE_REF, action="view toolz/itertoolz.py 94-98",
                   instruction="Fix groupby.", history=(("edit " + SWE_EDIT,
                                                         "Edited toolz/itertoolz.py: replaced 1 line(s) at line 96."),)),
        assistant_turn(SWE_REF),
        "<think>Viewing the file again.\n**Environment Observation:**\n" + "    96\t    if callable(key):\n" * 12,
        id="swe"),
]


def _with(inp: JudgeInput, generation: str) -> JudgeInput:
    return JudgeInput(domain=inp.domain, generation=generation, reference=inp.reference, action=inp.action,
                      history=inp.history, instruction=inp.instruction)


@pytest.mark.parametrize(("base", "faithful", "wrong"), CASES)
def test_faithful_beats_wrong_on_every_dimension(base, faithful, wrong):
    good, bad = LocalJudge().score([_with(base, faithful), _with(base, wrong)])
    assert good.as_dict() == {dim: 5 for dim in DIMENSIONS}, good.reason
    for dim in DIMENSIONS:
        assert getattr(good, dim) > getattr(bad, dim), (dim, bad.reason)
    assert good.overall == 100.0 and bad.overall < 50.0


@pytest.mark.parametrize(("base", "faithful", "wrong"), CASES)
def test_local_judge_is_deterministic(base, faithful, wrong):
    batch = [_with(base, faithful), _with(base, wrong)]
    assert LocalJudge().score(batch) == LocalJudge().score(list(reversed(batch)))[::-1] == LocalJudge().score(batch)


def test_missing_marker_gets_low_format():
    inp = JudgeInput(domain="terminal", generation="hello", reference="hello", action="echo hello")
    scores = LocalJudge().score([inp])[0]
    assert scores.format <= 2 and scores.factuality is None and scores.quality == 5
    unclosed = LocalJudge().score([_with(inp, "<think>hmm\n" + assistant_turn("hello"))])[0]
    assert unclosed.format == 3
    # marker missing and the domain's shape broken: the lowest format
    mcp = JudgeInput(domain="mcp", generation="result: ok", reference='{"isError":false,"result":"ok"}', action="{}")
    assert LocalJudge().score([mcp])[0].format == 1


@pytest.mark.parametrize(
    ("domain", "action", "observation", "ok"),
    [("mcp", "{}", '{"isError": false, "result": []}', True),  # pretty JSON is still a tool result
     ("mcp", "{}", '{"result": []}', False),
     ("search", "search(x)", 'No results for "x".', True),
     ("search", "search(x)", "x is a thing", False),
     ("search", "open(module:json)", "[module:json] json\n[page 1/3]\ntext", True),
     ("swe", "run_tests tests/test_a.py", ".. [100%]\n2 passed in 0.01s", True),
     ("swe", "run_tests tests/test_a.py", "Traceback (most recent call last):\n  AssertionError", False),
     ("web", "click [3]", 'URL: /forum\n[1] link "Agora"', True),
     ("web", "click [3]", "The forum page opens.", False),
     ("web", "stop", "Episode ended.", True),
     ("os", "submit", "", True),
     ("os", "submit", "Submitted.", False),
     ("terminal", "ls", "anything", True)],
)
def test_domain_shapes(domain, action, observation, ok):
    assert (not shape_problems(domain, action, observation)) is ok


def test_contradicting_history_lowers_consistency():
    judge = LocalJudge()
    created = JudgeInput(domain="terminal", generation="", reference="", action="cat notes.txt",
                         history=(("touch notes.txt", ""),))
    good, bad = judge.score([_with(created, assistant_turn("")),
                             _with(created, assistant_turn("cat: notes.txt: No such file or directory"))])
    assert good.consistency == 5 and bad.consistency <= 3, bad.reason

    missing = JudgeInput(domain="terminal", generation="", reference="notes.txt", action="ls",
                         history=(("cat todo.md", "cat: todo.md: No such file or directory"),))
    good, bad = judge.score([_with(missing, assistant_turn("notes.txt")),
                             _with(missing, assistant_turn("notes.txt  todo.md"))])
    assert good.consistency == 5 and bad.consistency <= 3, bad.reason
    # ... unless the file was created since
    recreated = JudgeInput(domain="terminal", generation="", reference="notes.txt  todo.md", action="ls",
                           history=missing.history + (("touch todo.md", ""),))
    assert judge.score([_with(recreated, assistant_turn("notes.txt  todo.md"))])[0].consistency == 5

    cwd = JudgeInput(domain="terminal", generation="", reference="/workspace/src", action="pwd",
                     history=(("mkdir src", ""), ("cd src", "")))
    good, bad = judge.score([_with(cwd, assistant_turn("/workspace/src")), _with(cwd, assistant_turn("/workspace"))])
    assert good.consistency == 5 and bad.consistency <= 3


def test_runtime_metadata_and_preexisting_prose_need_only_be_plausible():
    judge = LocalJudge()
    swe = JudgeInput(domain="swe", generation="", action="run_tests tests/test_a.py",
                     reference=".. [100%]\n2 passed in 0.03s")
    assert judge.score([_with(swe, assistant_turn(".. [100%]\n2 passed in 0.41s"))])[0].factuality == 5
    assert judge.score([_with(swe, assistant_turn(".F [100%]\n1 failed, 1 passed in 0.03s"))])[0].factuality <= 2

    paraphrased = SEARCH_REF.replace("Serialize **obj** to a JSON formatted str", "Turn **obj** into JSON text")
    search = CASES[2].values[0]
    scores = judge.score([_with(search, assistant_turn(paraphrased))])[0]
    assert scores.factuality == 5 and scores.format == 5 and scores.quality >= 4

    mcp = CASES[1].values[0]
    pretty = json.dumps({**json.loads(MCP_REF), "result": {**json.loads(MCP_REF)["result"],
                                                           "created_at": "2025-01-01T00:00:00Z"}}, indent=2)
    assert judge.score([_with(mcp, assistant_turn(pretty))])[0].factuality == 5


def test_error_type_must_match():
    inp = JudgeInput(domain="terminal", generation="", action="foo",
                     reference="bash: foo: command not found")
    scores = LocalJudge().score([_with(inp, assistant_turn("bash: foo: No such file or directory"))])[0]
    assert scores.factuality <= 2
    assert "err:command not found" in deterministic_facts(inp.reference)


def test_scores_validate_and_normalise():
    s = JudgeScores(format=5, factuality=1, consistency=3, realism=4, quality=2)
    assert s.normalised() == {"format": 100.0, "factuality": 0.0, "consistency": 50.0, "realism": 75.0, "quality": 25.0}
    assert s.overall == 50.0
    with pytest.raises(ValueError, match="realism"):
        JudgeScores(format=5, factuality=1, consistency=3, realism=6, quality=2)


# ---------------------------------------------------------------------------------------------
# OpenAIJudge: parsing, prompts, and a real HTTP round trip against a stub server
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [('{"format": 5, "factuality": 4, "consistency": 3, "realism": 2, "quality": 1, "reason": "ok"}', (5, 4, 3, 2, 1)),
     ('<think>{"format": 1}</think>Sure:\n```json\n{"Format": "4/5", "factuality": 4.6, "consistency": 9, '
      '"realism": 0, "quality": "3"}\n```', (4, 5, 5, 1, 3)),
     ('Scores: {"scores": {"format": 2, "factuality": 2, "consistency": 2, "realism": 2, "quality": 2}, "reason": "x"} done',
      (2, 2, 2, 2, 2))],
)
def test_parse_judge_response(text, expected):
    scores = parse_judge_response(text)
    assert tuple(scores.as_dict().values()) == expected


def test_parse_judge_response_leaves_out_what_does_not_parse():
    """As the official scorer: a dimension missing, "n/a" or not a number is not applicable and
    left out of the mean; an answer where no dimension parses is an error."""
    partial = parse_judge_response('{"format": 5, "factuality": "n/a", "realism": 2, "quality": "great"}')
    assert partial.as_dict() == {"format": 5, "factuality": None, "consistency": None, "realism": 2, "quality": None}
    assert partial.overall == 62.5 and partial.applicable() == {"format": 100.0, "realism": 25.0}
    with pytest.raises(JudgeParseError, match="no score field that parses"):
        parse_judge_response('{"format": "n/a", "verdict": "fine"}')
    with pytest.raises(JudgeParseError, match="no JSON object"):
        parse_judge_response("I would give it a five.")


def test_judge_messages_hold_rubric_domain_notes_and_truncate():
    base = CASES[1].values[0]
    long_history = tuple((f"a{i}", "x" * 10_000) for i in range(10))
    messages = judge_messages(JudgeInput(domain="mcp", generation="g", reference=MCP_REF, action="act",
                                         history=long_history, instruction="do it"), history_turns=3, max_chars=1000)
    system, user = messages[0]["content"], messages[1]["content"]
    assert "factuality" in system and "created_at/updated_at" in system and '"reason"' in system
    assert "(7 earlier turns omitted)" in user and "a9" in user and "a6" not in user
    assert "[truncated" in user and MCP_REF in user and "do it" in user
    assert base.domain == "mcp"


class _StubChatServer:
    """A real local HTTP server speaking /v1/chat/completions with canned answers (no model behind it)."""

    def __init__(self, answers: list[tuple[int, str]]):
        self.answers, self.requests = list(answers), []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                status, content = stub.answers.pop(0) if len(stub.answers) > 1 else stub.answers[0]
                if status != 200:
                    payload = {"error": {"message": content, "type": "server_error"}}
                else:
                    payload = {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": content}}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                send_json(self, payload, status)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


GOOD_ANSWER = '{"format": 5, "factuality": 4, "consistency": 5, "realism": 4, "quality": 3, "reason": "close"}'


def test_openai_judge_stub_server():
    pytest.importorskip("openai", reason="OpenAIJudge needs the openai package")
    base = CASES[1].values[0]
    inputs = [_with(base, assistant_turn(MCP_REF)), _with(base, "garbage")]
    with _StubChatServer([(500, "overloaded"), (200, "no json here"), (200, GOOD_ANSWER)]) as stub:
        judge = OpenAIJudge(model="judge-model", base_url=stub.base_url, api_key="sk-test", timeout=10,
                            max_retries=1, parse_retries=1, max_workers=1)
        scores = judge.score(inputs)
    assert not stub.thread.is_alive()
    # 500 retried by the client, unparseable answer asked again, then the canned scores for both inputs
    assert [s.as_dict() for s in scores] == [{"format": 5, "factuality": 4, "consistency": 5, "realism": 4,
                                              "quality": 3}] * 2
    assert scores[0].reason == "close"
    assert len(stub.requests) == 4
    first = stub.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    body = first["body"]
    assert body["model"] == "judge-model" and body["temperature"] == 0.0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "MCP tool servers" in body["messages"][0]["content"]
    assert MCP_REF in body["messages"][1]["content"] and "Triage API-31." in body["messages"][1]["content"]


def test_openai_judge_stub_server_reports_unparseable_answers():
    pytest.importorskip("openai", reason="OpenAIJudge needs the openai package")
    with _StubChatServer([(200, '{"verdict": "looks right"}')]) as stub:
        judge = OpenAIJudge(model="m", base_url=stub.base_url, max_retries=0, parse_retries=1)
        with pytest.raises(JudgeParseError, match="no score field that parses"):
            judge.score([CASES[0].values[0]])
    assert len(stub.requests) == 2


# ---------------------------------------------------------------------------------------------
# Rank agreement
# ---------------------------------------------------------------------------------------------


def _s(*values: int) -> JudgeScores:
    return JudgeScores(*values)


def test_rank_agreement():
    a = [_s(5, 5, 5, 5, 5), _s(3, 3, 3, 3, 3), _s(1, 2, 1, 1, 1)]
    assert rank_agreement(a, a) == pytest.approx(1.0)
    assert rank_agreement(a, a[::-1]) == pytest.approx(-1.0)
    assert rank_agreement([90.0, 10.0, 50.0], [80.0, 20.0, 60.0]) == pytest.approx(1.0)
    assert rank_agreement(a, [_s(2, 5, 5, 5, 5), _s(3, 3, 3, 3, 3), _s(4, 2, 1, 1, 1)], dimension="format") == \
        pytest.approx(-1.0)
    assert math.isnan(rank_agreement(a, [_s(3, 3, 3, 3, 3)] * 3))
    with pytest.raises(ValueError):
        rank_agreement(a, a[:2])


def test_local_judge_ranks_cases_like_a_perfect_oracle():
    """Over all cases, LocalJudge ranks every faithful generation above every wrong one."""
    inputs, oracle = [], []
    for case in CASES:
        base, faithful, wrong = case.values
        inputs += [_with(base, faithful), _with(base, wrong)]
        oracle += [100.0, 0.0]
    assert rank_agreement(LocalJudge().score(inputs), oracle) > 0.8


def test_score_table_writes_not_applicable_as_null_not_nan():
    """A dimension no record can measure is null in summary.json (strict JSON, what Airflow's
    XCom and MLflow accept), not NaN, and the others are still averaged."""
    from agentworld.data.awbench import BenchRecord
    from agentworld.evaluation.report import system_scores

    record = BenchRecord.from_episode("textworld", "ep-1", "system", ["look"], ["You see a room."], 1)
    scores = LocalJudge().score([JudgeInput(domain="textworld", generation=assistant_turn("You see a room."),
                                            reference="You see a room.", action="look")])[0]
    assert scores.factuality is None and scores.consistency is None
    judged = {**scores.as_dict(), "overall": scores.overall}
    table = system_scores([record], [{"prediction": "You see a room.", "well_formed": True}], [judged])
    assert table["all"]["factuality"] is None and table["all"]["consistency"] is None
    assert table["all"]["quality"] == 100.0 and table["all"]["judge_overall"] == 100.0
    json.dumps(table, allow_nan=False)
