"""The search domain's CPT corpus source `python_docs`: the CPython documentation the search
engine indexes (pydoc topics, stdlib modules, functions and classes)."""

from __future__ import annotations

import sqlite3

from agentworld.data.corpora import Document


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
