"""The search domain, declared for the shared layers (see `agentworld.domains.base.Domain`).

SQLite FTS5 (BM25) search engine over CPython's documentation (pydoc topics and ~150 stdlib
modules): search/open/find_in_page/next_page/answer, questions verified in the corpus.
"""

from agentworld.domains import lazy
from agentworld.domains.base import Domain, ShapeRule
from agentworld.domains.search.rationale import describe_search

WORLD_MODEL_PROMPT = (
    "You are a world model of a full-text search engine (SQLite FTS5 with BM25 ranking) over the "
    "Python standard library's documentation: reference topics, module pages and function/class "
    "pages, each with an id such as module:json. Given the agent's action (search, open, "
    "find_in_page, next_page or answer), answer with exactly what the engine returns: ranked results "
    "with snippets, a page of a document, matching lines, or the engine's error message."
)

DOMAIN = Domain(
    name="search",
    description=(
        "SQLite FTS5 (BM25) search engine over CPython's documentation (pydoc topics and ~150 stdlib "
        "modules): search/open/find_in_page/next_page/answer, questions verified in the corpus"
    ),
    entry_point="agentworld.domains.search.env:factory",
    probe=lazy("agentworld.domains.search.env", "probe"),
    policies=lazy("agentworld.domains.search.env", "search_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    shape_rules=(
        ShapeRule(
            "a search answers with a ranked result list, 'No results' or the engine's error",
            "regex",
            '^(?:Results \\d+-\\d+ of \\d+ for \\"|No results for \\"|Error: )',
            verbs=("search",),
        ),
        ShapeRule(
            "an opened page starts with its id and a page marker",
            "regex",
            "^(?:\\[[a-z]+:[^\\]]+\\] .*\\n\\[page \\d+/\\d+\\]|Error: )",
            verbs=("open",),
        ),
    ),
    describer=describe_search,
    judge_title="a full-text search engine over Python docs",
    judge_format=(
        'A search answers "Results i-j of N for "q":" with numbered [doc:id] entries and snippets, '
        '"No results for ..." or "Error: ..."; open answers "[doc:id] Title" then "[page i/n]".'
    ),
    judge_notes=(
        "The result count, the order and ids of the ranked documents and the page numbers must match;"
        " snippet and page prose is pre-existing content and need only be plausible."
    ),
    corpus_sources={"python_docs": lazy("agentworld.domains.search.cpt_corpus", "python_docs")},
)
