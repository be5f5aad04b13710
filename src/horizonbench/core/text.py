"""Text helpers: any provider string made safe to store, table and score (:func:`clean_text`),
and the plain aligned tables the dry runs print (:func:`aligned_lines`).

JSON may carry lone UTF-16 surrogates (``"\\ud800"``) that Python decodes into a str no
UTF-8 encoder accepts: SQLite, Arrow and file writes all raise on them. They are the
only code points that cannot be kept, so each becomes U+FFFD; everything else (NUL,
control characters, megabytes of text) passes through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: object) -> str:
    """``text`` as a str that encodes to UTF-8; non-strings become their str()."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", s)
    return s


def aligned_lines(head: Sequence[str], body: Iterable[Sequence[str]]) -> list[str]:
    """``head`` and each row of ``body`` as one line each, every column left-aligned to
    its widest cell and two spaces from the next: a table for the terminal."""
    rows = [tuple(head), *(tuple(row) for row in body)]
    widths = [max(len(x) for x in col) for col in zip(*rows, strict=True)]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
