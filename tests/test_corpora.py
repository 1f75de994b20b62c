"""The offline CPT corpora: each source built for real from this machine, written and read back;
the sources are the ones the domains declare."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import pytest

from agentworld.data import corpora
from agentworld.data.corpora import Document, build_corpora, load_corpora, prepare_documents
from agentworld.domains import all_domains
from agentworld.domains.mcp import cpt_corpus as mcp_corpus
from agentworld.domains.scienceworld.cpt_corpus import scienceworld_rules
from agentworld.domains.terminal import cpt_corpus as man_corpus
from agentworld.domains.textworld.cpt_corpus import textworld_rules


def _by_id(docs: list[Document]) -> dict[str, Document]:
    """Documents by id, the parts of a split document (`<id>#<n>`) joined back under `<id>`."""
    out: dict[str, Document] = {}
    for d in docs:
        base = d.id.split("#", 1)[0]
        out[base] = Document(d.source, base, d.title, out[base].text + "\n" + d.text) if base in out else d
    return out


def _textworld_and_task_list() -> list[Document]:
    """game_rules without the ScienceWorld simulator (no JVM: fast)."""
    return textworld_rules() + scienceworld_rules(with_simulator=False)


@pytest.fixture()
def quick_sources(monkeypatch):
    """Real sources, cut down where the full one takes long: a few commands, no JVM."""
    monkeypatch.setitem(corpora.SOURCES, "manpages",
                        partial(man_corpus.manpages, commands=("grep", "sort", "no-such-command-xyz"),
                                builtins=("cd", "export", "no_such_builtin")))
    monkeypatch.setitem(corpora.SOURCES, "game_rules", _textworld_and_task_list)


# ----------------------------------------------------------------------------- sources
def test_sources_are_the_ones_the_domains_declare() -> None:
    declared = {name: sorted(d.name for d in all_domains().values() if name in d.corpus_sources)
                for name in corpora.SOURCES}
    assert declared == {"manpages": ["terminal"], "python_docs": ["search"], "mcp_schemas": ["mcp"],
                        "game_rules": ["scienceworld", "textworld"]}


def test_manpages_document_grep_options_and_builtins(tmp_path: Path, quick_sources) -> None:
    counts = build_corpora(tmp_path, ["manpages"])
    loaded = load_corpora(tmp_path, ["manpages"])
    assert counts["manpages"]["documents"] == len(loaded) > 0
    docs = _by_id(loaded)
    grep = docs.get("man:grep") or docs["help:grep"]  # man page, or --help where there is none
    assert "-i" in grep.text and "--ignore-case" in grep.text and "case" in grep.text.lower()
    assert "sort" in {d.id.split(":", 1)[1] for d in docs.values()}
    assert "Change the shell working directory" in docs["builtin:cd"].text
    assert not any("no-such" in i or "no_such" in i for i in docs)  # missing commands are skipped
    for doc in docs.values():
        assert "\b" not in doc.text and "\r" not in doc.text and "\x1b" not in doc.text
        assert "\t" not in doc.text or not doc.id.startswith("man:")  # man pages: tabs expanded
        assert all(line == line.rstrip() for line in doc.text.split("\n"))


def test_manpages_fall_back_to_help_output_without_man_pages(monkeypatch) -> None:
    monkeypatch.setattr(man_corpus, "_man_page", lambda cmd: None)  # as on a bare machine: /usr/share/man empty
    docs = _by_id(man_corpus.manpages(commands=("grep", "no-such-command-xyz"), builtins=()))
    assert list(docs) == ["help:grep"]
    assert "--ignore-case" in docs["help:grep"].text


@pytest.mark.slow
def test_manpages_full_list(tmp_path: Path) -> None:
    counts = build_corpora(tmp_path, ["manpages"])
    ids = {i.split(":", 1)[1] for i in _by_id(load_corpora(tmp_path, ["manpages"]))}
    assert counts["manpages"]["documents"] > 40
    assert {"ls", "grep", "sed", "find", "tar", "cd", "export"} <= ids


def test_python_docs_have_the_json_module(tmp_path: Path) -> None:
    counts = build_corpora(tmp_path, ["python_docs"])
    loaded = load_corpora(tmp_path, ["python_docs"])
    assert counts["python_docs"]["documents"] == len(loaded) > 500
    docs = _by_id(loaded)
    assert "dumps" in docs["module:json"].text
    assert any(i.startswith("topic:") for i in docs)


def test_mcp_schemas_list_every_apps_tools_with_json_schemas(tmp_path: Path) -> None:
    from agentworld.domains.mcp.apps import APP_NAMES

    build_corpora(tmp_path, ["mcp_schemas"])
    docs = _by_id(load_corpora(tmp_path, ["mcp_schemas"]))
    real_tool = {"tracker": "get_issue", "crm": "get_contact", "shop": "place_order"}
    for app in APP_NAMES:
        tool = real_tool[app]
        assert f"- {tool}(" in docs[f"mcp:{app}:tools"].text
        text = docs[f"mcp:{app}:tool:{tool}"].text
        schema = json.loads(text.split(mcp_corpus.SCHEMA_MARKER + "\n", 1)[1])
        assert schema["type"] == "object" and schema["properties"] and schema["required"]
        examples = [d for i, d in docs.items() if i.startswith(f"mcp:{app}:example:") and not i.endswith("errors")]
        assert examples and all('"isError":false' in d.text for d in examples)
        assert '"isError":true' in docs[f"mcp:{app}:example:errors"].text
    assert "Not found:" in "\n".join(d.text for d in docs.values())


def test_game_rules_textworld_verbs_and_scienceworld_task_list(tmp_path: Path, quick_sources) -> None:
    build_corpora(tmp_path, ["game_rules"])
    docs = _by_id(load_corpora(tmp_path, ["game_rules"]))
    help_text = docs["textworld:help"].text
    for verb in ("take", "open", "unlock", "examine", "inventory"):
        assert f"  {verb}" in help_text
    assert 'open/c :: "open {c}"' in docs["textworld:logic/container.twl"].text
    assert "slice {f} with {o}" in docs["textworld:tw_cooking/logic/food.twl"].text
    if "scienceworld:tasks" in docs:
        assert "boil" in docs["scienceworld:tasks"].text


@pytest.mark.slow
def test_game_rules_with_the_scienceworld_simulator(tmp_path: Path) -> None:
    from agentworld.domains.scienceworld.env import probe

    ok, reason = probe()
    if not ok and not os.environ.get("CI"):
        pytest.skip(reason)
    build_corpora(tmp_path, ["game_rules"])
    docs = _by_id(load_corpora(tmp_path, ["game_rules"]))
    assert "focus on OBJ" in docs["scienceworld:actions"].text
    tasks = [d for i, d in docs.items() if i.startswith("scienceworld:task:")]
    assert len(tasks) >= 30
    assert "Your task is to boil" in docs["scienceworld:task:boil"].text
    assert "textworld:help" in docs


# ----------------------------------------------------------------------------- build / load
def test_round_trip_split_and_byte_identical_rerun(tmp_path: Path, quick_sources) -> None:
    sources = ["mcp_schemas", "game_rules"]
    counts = build_corpora(tmp_path / "a", sources, max_chars_per_doc=800)
    loaded = load_corpora(tmp_path / "a", sources)
    expected = (prepare_documents(mcp_corpus.mcp_schemas(), 800) + prepare_documents(_textworld_and_task_list(), 800))
    assert loaded == expected
    assert [counts[s]["documents"] for s in sources] == [sum(d.source == s for d in loaded) for s in sources]
    assert counts["game_rules"]["chars"] == sum(len(d.text) for d in loaded if d.source == "game_rules")
    parts = [d for d in loaded if "#" in d.id]
    assert parts and all(len(d.text) <= 800 for d in loaded)
    assert any(d.id.endswith("#1") for d in parts) and any(d.id.endswith("#2") for d in parts)

    build_corpora(tmp_path / "b", sources, max_chars_per_doc=800)
    for source in sources:
        assert (tmp_path / "a" / f"{source}.jsonl").read_bytes() == (tmp_path / "b" / f"{source}.jsonl").read_bytes()
    assert not list((tmp_path / "a").glob("*.tmp"))


def test_prepare_documents_normalises_sorts_and_drops_empty() -> None:
    docs = [Document("s", "b", "B  title", "line one  \r\nline two\t\r\n\r\n"),
            Document("s", "a", "A", "  \n \n"),
            Document("s", "c", "C", "x" * 25 + "\n" + "y" * 5)]
    out = prepare_documents(docs, max_chars_per_doc=20)
    assert [d.id for d in out] == ["b", "c#1", "c#2"]
    assert out[0].text == "line one\nline two" and out[0].title == "B title"
    assert [d.text for d in out[1:]] == ["x" * 20, "x" * 5 + "\n" + "y" * 5]  # a hard cut, then at a line end
    assert out[1].title == "C (part 1/2)"
    with pytest.raises(ValueError, match="duplicate document id 'b'"):
        prepare_documents(docs + [Document("s", "b", "again", "text")], 100)


def test_unknown_source_is_rejected(tmp_path: Path) -> None:
    for call in (lambda: build_corpora(tmp_path, ["manpages", "wikipedia"]),
                 lambda: load_corpora(tmp_path, ["wikipedia"])):
        with pytest.raises(ValueError, match="'wikipedia'") as err:
            call()
        assert all(name in str(err.value) for name in corpora.SOURCES)
    assert not list(tmp_path.iterdir())  # nothing built before the names were checked


def test_missing_file_says_to_run_the_corpora_stage(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        load_corpora(tmp_path, ["python_docs"])
    assert str(tmp_path / "python_docs.jsonl") in str(err.value)
    assert "`corpora` stage" in str(err.value)


@pytest.mark.parametrize(("bad_line", "message"), [
    ("{not json", "line 2: not valid JSON"),
    ('["a list"]', "line 2: expected a JSON object"),
    ('{"source": "manpages", "id": "x", "text": "t"}', "line 2: field 'title' is missing"),
    ('{"source": "manpages", "id": "x", "title": "t", "text": 3}', "line 2: field 'text' is missing or not a string"),
    ('{"source": "other", "id": "x", "title": "t", "text": "t"}', "line 2: field 'source' is 'other'"),
    ('{"source": "manpages", "id": "x", "title": "t", "text": "  "}', "line 2: field 'text' is empty"),
])
def test_malformed_line_names_file_line_and_field(tmp_path: Path, bad_line: str, message: str) -> None:
    good = json.dumps({"source": "manpages", "id": "man:ls", "title": "ls", "text": "list directory contents"})
    path = tmp_path / "manpages.jsonl"
    path.write_text(good + "\n" + bad_line + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as err:
        load_corpora(tmp_path, ["manpages"])
    assert str(path) in str(err.value) and message in str(err.value)
