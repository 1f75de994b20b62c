"""Confidence intervals: over seeds (Student's t: few seeds, unknown variance) and over
records (percentile bootstrap: many records, any distribution, e.g. exact match's 0/1)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """(mean, half-width of the `confidence` interval); the half-width is nan for one value."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci: no values")
    mean = sum(values) / n
    if n == 1:
        return mean, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """(low, high) percentile-bootstrap interval of the mean over records."""
    if not len(values):
        raise ValueError("bootstrap_ci: no values")
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
