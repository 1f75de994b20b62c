"""Copy operations: the world model may answer "the same as that observation" in a few tokens.

Many observations repeat one the model can already see: the previous turn's (an unchanged
page), the answer to the same action earlier in the episode (a repeated `ls`, `look` or
search), or a retrieved real transition's (the same tool error, the same help text).
Writing them out token by token is where a small model fails: it runs out of generation budget, or drifts after a few lines. A pointer-generator (See et al., 2017) copies
from its input instead of generating; this is its coarsest form, which every backend can serve
unchanged: the model writes one op string such as `[[copy memory 1]]`, and the backend
replaces it by that source's full text before anything reads the prediction.

Training targets use an op where a source is already close to the real observation (token
F1 at least `build.copy_min_f1`; 1.0 keeps only exact copies, so the target stays lossless);
every other target stays literal. The prediction that is scored is always the expanded text,
against the real observation, so an op earns exactly what copying that source earns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agentworld.scoring.metrics import exact_match, token_f1

COPY_PREVIOUS = "[[copy previous]]"
#: The observation of the latest earlier turn of the episode whose action is the current one.
COPY_EARLIER = "[[copy earlier]]"
#: Any op string, including ones that name a source the example does not have.
COPY_OP = re.compile(r"\[\[copy (?:previous|earlier|memory \d+)\]\]")


def copy_memory(rank: int) -> str:
    """The op copying the `rank`-th retrieved transition's observation (1 = the most similar)."""
    return f"[[copy memory {rank}]]"


def copy_sources(previous: str | None, retrieved: Sequence[str] | None, earlier: str | None = None
                 ) -> dict[str, str]:
    """Op -> text for one turn, in the order ties are broken: the same action earlier in this
    episode first (the episode's own state beats another episode's), then retrieved, then previous."""
    sources = {COPY_EARLIER: earlier} if earlier is not None else {}
    sources |= {copy_memory(rank): text for rank, text in enumerate(retrieved or (), start=1)}
    if previous is not None:
        sources[COPY_PREVIOUS] = previous
    return sources


def best_copy(observation: str, sources: dict[str, str], min_f1: float) -> str | None:
    """The op whose source is closest to `observation` (exact matches first, then token F1),
    or None when no source reaches `min_f1`. An empty observation is a copy too when a source is
    empty: then the model's choice is always which source to trust, never "that source or
    nothing" (a small model trained on literal empty answers printed nothing where the shown
    neighbour had the answer)."""
    if not observation.strip():
        return next((op for op, text in sources.items() if not text.strip()), None)
    scored = [(exact_match(text, observation), token_f1(text, observation), -rank, op)
              for rank, (op, text) in enumerate(sources.items())]
    if not scored:
        return None
    exact, f1, _, op = max(scored)
    return op if exact or f1 >= min_f1 else None


def expand_copies(generation: str, sources: dict[str, str]) -> str:
    """The generation with every op replaced by its source's text; an op naming a source this
    turn does not have becomes empty (the model pointed at nothing)."""
    if "[[copy " not in generation:
        return generation
    return COPY_OP.sub(lambda m: sources.get(m.group(0), ""), generation)
