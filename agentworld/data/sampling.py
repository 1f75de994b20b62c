"""Fixed samples balanced over domains: every model is scored on the same turns, and a domain
with many turns (terminal is over a third of the held-out split) does not decide alone."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def domain_quotas(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """Records per domain for a sample of `limit`: equal shares, a small domain's unused share
    going to the others, so every domain gets as many records as it can up to its fair share."""
    quota, left = dict.fromkeys(sizes, 0), limit
    while left > 0:
        open_ = [d for d in sorted(sizes) if quota[d] < sizes[d]]
        if not open_:
            break
        share = max(1, left // len(open_))
        for domain in open_:
            add = min(share, sizes[domain] - quota[domain], left)
            quota[domain], left = quota[domain] + add, left - add
    return quota


def balanced_sample(items: Sequence[T], limit: int | None, seed: int, domain: Callable[[T], str],
                    key: Callable[[T], str]) -> list[T]:
    """A seeded subset of at most `limit` items in `key` order, split over domains by `domain_quotas`."""
    if limit is None or len(items) <= limit:
        return sorted(items, key=key)
    by_domain: dict[str, list[T]] = {}
    for item in sorted(items, key=key):
        by_domain.setdefault(domain(item), []).append(item)
    rng = random.Random(seed)
    quota = domain_quotas({d: len(rs) for d, rs in by_domain.items()}, limit)
    return sorted((r for d in sorted(by_domain) for r in rng.sample(by_domain[d], quota[d])), key=key)
