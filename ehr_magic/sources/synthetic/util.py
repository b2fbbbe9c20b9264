"""Vectorised helpers of the synthetic generator: ragged-array tricks, weighted
sampling, id allocation and Arrow column builders. Times are int64 seconds since
1970-01-01 throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

MINUTE = 60
HOUR = 3600
DAY = 86400
YEAR = 365.25 * DAY

Rng = np.random.Generator


def owners(counts: np.ndarray) -> np.ndarray:
    """Index of the owning group for each element of a ragged layout: [0,0,1,2,2,2,...]."""
    return np.repeat(np.arange(len(counts)), counts)


def ranks(counts: np.ndarray) -> np.ndarray:
    """Position of each element within its group: [0,1,0,0,1,2,...]."""
    counts = np.asarray(counts, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)


def group_cumsum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at each group of a ragged layout."""
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    total = np.cumsum(values)
    starts = np.cumsum(counts) - counts
    before = np.zeros(len(counts))
    nz = counts > 0
    before[nz] = total[starts[nz]] - values[starts[nz]]
    return total - np.repeat(before, counts)


def pick(rng: Rng, n: int, weights: Sequence[float]) -> np.ndarray:
    """n draws of indices 0..k-1 with the given (unnormalised) weights."""
    p = np.asarray(weights, dtype=float)
    return rng.choice(len(p), size=n, p=p / p.sum())


def pick_rows(rng: Rng, weights: np.ndarray) -> np.ndarray:
    """One draw per row of a (n, k) weight matrix; rows of zeros give index 0."""
    cdf = np.cumsum(weights, axis=1)
    u = rng.random(len(weights)) * cdf[:, -1]
    return np.minimum((cdf <= u[:, None]).sum(axis=1), weights.shape[1] - 1)


def lognormal(rng: Rng, median: float | np.ndarray, sigma: float, n: int) -> np.ndarray:
    return np.asarray(median) * np.exp(rng.normal(0.0, sigma, n))


def floor_to(seconds: np.ndarray, step: int) -> np.ndarray:
    return (seconds // step) * step


class IdSpace:
    """Unique, random-looking ids: ``base + (a*k + b) mod m`` for the k-th id handed out."""

    def __init__(self, base: int, modulus: int, multiplier: int, offset: int) -> None:
        if math.gcd(multiplier, modulus) != 1:
            raise ValueError("multiplier must be coprime with the modulus")
        self.base, self.m, self.a, self.b = base, modulus, multiplier, offset % modulus
        self.next = 0

    def take(self, n: int) -> np.ndarray:
        if self.next + n > self.m:
            raise OverflowError("id space exhausted")
        k = np.arange(self.next, self.next + n, dtype=np.int64)
        self.next += n
        return self.base + (self.a * k + self.b) % self.m


class Sequential:
    """Consecutive ids starting at ``start``."""

    def __init__(self, start: int = 1) -> None:
        self.next = start

    def take(self, n: int) -> np.ndarray:
        out = np.arange(self.next, self.next + n, dtype=np.int64)
        self.next += n
        return out


# --- Arrow column builders ------------------------------------------------------------


def ts(seconds: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """TIMESTAMP column from epoch seconds; ``valid`` False rows become NULL."""
    arr = np.asarray(seconds, dtype=np.int64).astype("datetime64[s]")
    return pa.array(arr, mask=None if valid is None else ~np.asarray(valid, dtype=bool))


def dates(seconds: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """DATE column from epoch seconds (the calendar day of each instant)."""
    days = (np.asarray(seconds, dtype=np.int64) // DAY).astype("datetime64[D]")
    return pa.array(days, mask=None if valid is None else ~np.asarray(valid, dtype=bool))


def num(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    return pa.array(np.asarray(values), mask=None if valid is None else ~np.asarray(valid, dtype=bool))


def cat(indices: np.ndarray, labels: Sequence[str | None]) -> pa.Array:
    """Dictionary-encoded text column; None labels become NULL."""
    codes = pa.array(np.asarray(indices, dtype=np.int32))
    return pa.DictionaryArray.from_arrays(codes, pa.array(list(labels), pa.string()))


def const(value: str | None, n: int) -> pa.Array:
    return cat(np.zeros(n, dtype=np.int32), [value])
