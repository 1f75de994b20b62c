"""Mean and 95% confidence interval over seeds (Student's t: few seeds, unknown variance)."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
