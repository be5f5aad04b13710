"""Seeds derived from coordinates, never from worker identity or ``hash()``.

Every random choice in horizonbench comes from a seed computed as a sha256 of the
root seed and the coordinates of the thing being made (family, candidate index,
model, sample...). So the same config gives the same bytes on 1 or 40 workers, and
Python's per-process hash randomisation cannot leak in.
"""

from __future__ import annotations

import hashlib

import numpy as np

_MASK63 = (1 << 63) - 1


def derive_seed(root: int, *parts: object) -> int:
    """A non-negative 63-bit seed, a pure function of ``root`` and ``parts``."""
    h = hashlib.sha256()
    h.update(str(int(root)).encode())
    for part in parts:
        h.update(b"\x1f")
        h.update(str(part).encode())
    return int.from_bytes(h.digest()[:8], "big") & _MASK63


def rng_for(root: int, *parts: object) -> np.random.Generator:
    """A numpy Generator seeded from :func:`derive_seed`."""
    return np.random.default_rng(derive_seed(root, *parts))
