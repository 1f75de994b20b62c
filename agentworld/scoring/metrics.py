"""Single-step fidelity metrics (Word2World): exact match and token F1."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


def normalise(text: str) -> str:
    """Trailing whitespace per line and surrounding blank lines carry no information."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def exact_match(prediction: str, reference: str) -> float:
    return float(normalise(prediction) == normalise(reference))


def token_bag(text: str) -> Counter[str]:
    """The tokens `token_f1` compares, counted (compute once when a text is compared often)."""
    return Counter(normalise(text).split())


def bag_f1(pred: Counter[str], ref: Counter[str]) -> float:
    """`token_f1` of two token bags."""
    pred_n, ref_n = sum(pred.values()), sum(ref.values())
    if not pred_n and not ref_n:
        return 1.0
    if not pred_n or not ref_n:
        return 0.0
    common = sum((pred & ref).values())
    if common == 0:
        return 0.0
    precision, recall = common / pred_n, common / ref_n
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, reference: str) -> float:
    """Multiset token overlap (SQuAD-style); two empty observations agree perfectly."""
    return bag_f1(token_bag(prediction), token_bag(reference))


def score(predictions: Sequence[str], references: Sequence[str], domains: Sequence[str]) -> dict[str, dict[str, float]]:
    """Mean exact match and token F1 per domain and over all examples ('all')."""
    if not (len(predictions) == len(references) == len(domains)):
        raise ValueError("predictions, references and domains must have the same length")
    buckets: dict[str, list[tuple[float, float]]] = {}
    for pred, ref, domain in zip(predictions, references, domains):
        pair = (exact_match(pred, ref), token_f1(pred, ref))
        buckets.setdefault(domain, []).append(pair)
        buckets.setdefault("all", []).append(pair)
    return {
        domain: {
            "exact_match": sum(p[0] for p in pairs) / len(pairs),
            "token_f1": sum(p[1] for p in pairs) / len(pairs),
            "n": float(len(pairs)),
        }
        for domain, pairs in buckets.items()
    }
