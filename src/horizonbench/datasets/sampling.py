"""Choosing which certified candidates to keep: a plain count, or L-binned quotas.

Candidates are considered strictly in candidate-index order and each bin keeps the
first ``per_bin`` candidates that fall in it (``quotas[lo]`` for a bin given its own).
A rejected candidate that still carries a length (``Candidate.quota_difficulty``: the
paper's Algorithm 6 counts trivial and repeated solutions among its first M, then drops
them) takes a slot without a row, so such a bin holds "up to" its quota.
The result therefore depends only on the seeds, never on how many workers generated
them or in what order they finished.

The selector holds counts only, never rows: the caller streams each kept row on to
its table, so selecting a million instances costs the same memory as selecting ten.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from horizonbench.schemas.config import SamplingSpec


@dataclass
class Selector:
    spec: SamplingSpec
    kept: int = 0
    considered: int = 0
    certified: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    bin_counts: dict[int, int] = field(default_factory=dict)
    #: quota slots taken by candidates dropped after the cut (no row): bins that count
    #: them hold "up to" their quota, as the paper's Algorithm 6 says
    slots_dropped: int = 0

    def __post_init__(self) -> None:
        if self.spec.bins is not None:
            self.bin_counts = {lo: 0 for lo in self.spec.bins.edges()}

    def bin_of(self, length: int) -> int | None:
        b = self.spec.bins
        if b is None or not b.min <= length < b.max:
            return None
        return b.min + (length - b.min) // b.width * b.width

    def wants(self, length: int) -> bool:
        """Would a candidate of this length be kept now? Workers use it to drop rows early."""
        if self.spec.bins is None:
            return True
        lo = self.bin_of(length)
        return lo is not None and self.bin_counts[lo] < self.spec.bins.quota(lo)

    def open_lengths(self) -> frozenset[int] | None:
        """Lengths that could still be kept (None: any length, in count mode)."""
        b = self.spec.bins
        if b is None:
            return None
        if self.spec.adaptive is not None:
            # an adaptive study's later waves raise the quotas of bins this wave closed:
            # shards keep every row of the range, so those waves read them from the cache
            return frozenset(range(b.min, b.max))
        return frozenset(
            length
            for lo, c in self.bin_counts.items()
            if c < b.quota(lo)
            for length in range(lo, min(lo + b.width, b.max))
        )

    @property
    def done(self) -> bool:
        if self.spec.count is not None:
            return self.kept >= self.spec.count
        if self.spec.bins is None:  # ``all``: every candidate is considered
            return False
        return all(c >= self.spec.bins.quota(lo) for lo, c in self.bin_counts.items())

    def feed(self, index: int, length: int | None, has_row: bool, rejection: str | None) -> bool:
        """Offer candidate ``index`` (call in increasing index order); True: keep its row."""
        if self.done or index >= self.spec.max_candidates or rejection == "not_needed":
            return False
        self.considered += 1
        if rejection is not None:
            self.rejections[rejection] += 1
            if length is not None and self.spec.bins is not None:
                # solved but dropped after the cut (Algorithm 6: the first M solved per
                # n are taken, then trivial and repeated ones removed): a slot, no row
                lo = self.bin_of(length)
                if lo is not None and self.bin_counts[lo] < self.spec.bins.quota(lo):
                    self.bin_counts[lo] += 1
                    self.slots_dropped += 1
            return False
        self.certified += 1
        assert length is not None
        if self.spec.bins is None:
            self.kept += has_row
            return has_row
        lo = self.bin_of(length)
        if lo is None or self.bin_counts[lo] >= self.spec.bins.quota(lo):
            return False
        if not has_row:
            raise RuntimeError(f"candidate {index} was wanted but its row was dropped")
        self.bin_counts[lo] += 1
        self.kept += 1
        return True

    def unfilled(self) -> dict[int, int]:
        """Bins short of their quota: lower edge -> how many instances they got."""
        if self.spec.bins is None:
            return {}
        return {lo: c for lo, c in self.bin_counts.items() if c < self.spec.bins.quota(lo)}
