"""Professional corpora available offline, for the continual pre-training (CPT) stage.

CPT trains the world model as a plain causal LM before it learns to predict observations. Its
data is (1) serialized agent trajectories, which inject the environments' state-transition
dynamics, and (2) the corpora built here, which inject the professional knowledge an environment
assumes: what `grep -i` does, what `json.dumps` accepts, which tools the CRM server exposes and
how it answers, which verbs a TextWorld parser understands. Qwen-AgentWorld mixes exactly these
two kinds of data (state-transition data plus professional corpora); `cpt.mix` sets the shares.

Nothing is downloaded. Each domain declares the sources it contributes
(`Domain.corpus_sources`, built in `agentworld/domains/<name>/cpt_corpus.py`); a source several
domains contribute to is their documents together:

- `manpages` (terminal; also covers os): `man` pages, `--help` texts and bash builtins' `help`.
- `python_docs` (search): the CPython documentation the search domain indexes.
- `mcp_schemas` (mcp): our MCP applications' tools, JSON input schemas and example calls.
- `game_rules` (textworld, scienceworld): TextWorld's commands, logic rules and game types;
  ScienceWorld's task list, action templates and task descriptions.

`build_corpora` writes one JSONL file per source (`<out_dir>/<source>.jsonl`: source, id, title,
text per line), sorted by id, long documents split into `<id>#<n>` parts, written atomically, so a
rerun on the same machine gives byte-identical files. `load_corpora` reads them back, validated.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentworld.data.io import write_jsonl
from agentworld.domains import all_domains

__all__ = ["SOURCES", "Document", "build_corpora", "load_corpora", "normalise_text", "prepare_documents"]

log = logging.getLogger(__name__)

FIELDS = ("source", "id", "title", "text")


@dataclass(frozen=True)
class Document:
    """One corpus document: `source` is the corpus name, `id` is unique within the source."""

    source: str
    id: str
    title: str
    text: str


# ----------------------------------------------------------------------------- text helpers
def normalise_text(text: str) -> str:
    """`\\n` line endings, no trailing whitespace on any line, no leading/trailing blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _split_text(text: str, max_chars: int) -> list[str]:
    """Cut `text` into pieces of at most `max_chars`, at line boundaries where possible."""
    pieces = []
    while len(text) > max_chars:
        cut = text.rfind("\n", 0, max_chars + 1)
        if cut <= 0:
            cut = max_chars  # one very long line: hard cut
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    pieces.append(text)
    return [p.strip("\n") for p in pieces if p.strip()]


def prepare_documents(documents: Iterable[Document], max_chars_per_doc: int) -> list[Document]:
    """What `build_corpora` writes: normalised, empty ones dropped, sorted by id, long ones split."""
    if max_chars_per_doc < 1:
        raise ValueError(f"max_chars_per_doc must be >= 1, got {max_chars_per_doc}")
    by_id: dict[str, Document] = {}
    for doc in documents:
        text = normalise_text(doc.text)
        if not text.strip():
            continue
        if doc.id in by_id:
            raise ValueError(f"duplicate document id {doc.id!r} in source {doc.source!r}")
        by_id[doc.id] = Document(doc.source, doc.id, " ".join(doc.title.split()), text)
    out: list[Document] = []
    for doc_id in sorted(by_id):
        doc = by_id[doc_id]
        parts = _split_text(doc.text, max_chars_per_doc)
        if len(parts) == 1:
            out.append(doc)
            continue
        for n, part in enumerate(parts, start=1):
            out.append(Document(doc.source, f"{doc.id}#{n}", f"{doc.title} (part {n}/{len(parts)})", part))
    return out




# ----------------------------------------------------------------------------- build / load
def _declared_sources() -> dict[str, Callable[[], list[Document]]]:
    """Every source the domains declare; a source of several domains builds all their parts."""
    parts: dict[str, list[Callable[[], list[Document]]]] = {}
    for domain in all_domains().values():
        for name, builder in domain.corpus_sources.items():
            parts.setdefault(name, []).append(builder)

    def joined(builders: list[Callable[[], list[Document]]]) -> Callable[[], list[Document]]:
        return lambda: [doc for build in builders for doc in build()]

    return {name: builders[0] if len(builders) == 1 else joined(builders) for name, builders in parts.items()}


SOURCES: dict[str, Callable[[], list[Document]]] = _declared_sources()


def _check_sources(sources: Sequence[str]) -> None:
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise ValueError(f"unknown corpus source(s) {', '.join(map(repr, unknown))}; "
                         f"known sources: {', '.join(SOURCES)}")


def build_corpora(out_dir: Path, sources: Sequence[str], max_chars_per_doc: int = 20000) -> dict[str, dict[str, int]]:
    """Build each source into `out_dir/<source>.jsonl`; returns {source: {"documents": n, "chars": c}}."""
    _check_sources(sources)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict[str, int]] = {}
    for source in dict.fromkeys(sources):
        docs = prepare_documents(SOURCES[source](), max_chars_per_doc)
        write_jsonl(out_dir / f"{source}.jsonl", ({f: getattr(d, f) for f in FIELDS} for d in docs))
        counts[source] = {"documents": len(docs), "chars": sum(len(d.text) for d in docs)}
        log.info("corpora: %s: %d documents, %d chars", source, len(docs), counts[source]["chars"])
    return counts


def load_corpora(in_dir: Path, sources: Sequence[str]) -> list[Document]:
    """The documents of `sources`, read from `in_dir/<source>.jsonl` (in file order, source by source)."""
    _check_sources(sources)
    docs: list[Document] = []
    for source in dict.fromkeys(sources):
        path = Path(in_dir) / f"{source}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"corpus file {path} does not exist; run the `corpora` stage first "
                                    f"(agentworld.data.corpora.build_corpora)")
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                docs.append(_parse_line(path, lineno, line, source))
    return docs


def _parse_line(path: Path, lineno: int, line: str, source: str) -> Document:
    where = f"{path}, line {lineno}"
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object with fields {', '.join(FIELDS)}")
    for field in FIELDS:
        if not isinstance(record.get(field), str):
            raise ValueError(f"{where}: field {field!r} is missing or not a string")
    if record["source"] != source:
        raise ValueError(f"{where}: field 'source' is {record['source']!r}, expected {source!r}")
    for field in ("id", "text"):
        if not record[field].strip():
            raise ValueError(f"{where}: field {field!r} is empty")
    return Document(*(record[f] for f in FIELDS))
