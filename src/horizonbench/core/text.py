"""Make any provider string safe to store, table and score.

JSON may carry lone UTF-16 surrogates (``"\\ud800"``) that Python decodes into a str no
UTF-8 encoder accepts: SQLite, Arrow and file writes all raise on them. They are the
only code points that cannot be kept, so each becomes U+FFFD; everything else (NUL,
control characters, megabytes of text) passes through unchanged.
"""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: object) -> str:
    """``text`` as a str that encodes to UTF-8; non-strings become their str()."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", s)
    return s
