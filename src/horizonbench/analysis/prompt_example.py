"""One example prompt per family label and mode, as the model received it (seqBench
Figures 6 and 7 show the prompt's structure on an example instance).

The text comes from the run's prompts table (``<run>/prompts/prompts.parquet``), which
the evaluate stage writes from the families' own prompt code with exactly the messages
each instance's attempts were sent, so the example is never a re-rendering that could
drift from what was sent. Pure: no files.
"""

from __future__ import annotations

import pandas as pd

#: one row per message of the example prompt of each (family label, mode)
EXAMPLE_PROMPT_COLUMNS = [
    "family",
    "mode",
    "instance_id",
    "solution_length",
    "prompt_sha256",
    "message",
    "role",
    "content",
]
_INTS = ("solution_length", "message")


def example_prompts(prompts: pd.DataFrame, lengths: pd.DataFrame) -> pd.DataFrame:
    """Per (family label, mode) of ``prompts`` (the prompts table), the prompt of its
    shortest instance (least ``solution_length``, then instance id): the shortest prompt
    shows every component while staying readable. ``lengths`` gives ``family``,
    ``instance_id`` and ``solution_length`` (the scores table has them); an instance
    without a length is not chosen. One row per message, numbered from 0 in the order
    sent. Rows: family labels by name, then mode, then message.
    """
    chosen = choose_examples(prompts, lengths)
    if chosen.empty:
        return _empty()
    rows = []
    for r in chosen.itertuples(index=False):
        for i, m in enumerate(r.messages):
            rows.append(
                {
                    "family": r.family,
                    "mode": r.mode,
                    "instance_id": r.instance_id,
                    "solution_length": int(r.solution_length),
                    "prompt_sha256": r.prompt_sha256,
                    "message": i,
                    "role": str(m["role"]),
                    "content": str(m["content"]),
                }
            )
    if not rows:
        return _empty()
    out = pd.DataFrame(rows)
    for c in EXAMPLE_PROMPT_COLUMNS:
        out[c] = out[c].astype("int64") if c in _INTS else out[c].astype(str).astype(object)
    return out[EXAMPLE_PROMPT_COLUMNS].reset_index(drop=True)


def choose_examples(prompts: pd.DataFrame, lengths: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``prompts`` that :func:`example_prompts` shows (one per family label
    and mode), with their ``solution_length``. Reads only ``family``, ``mode`` and
    ``instance_id`` (and whatever else the rows carry along), so a caller can choose on
    the prompts table's small columns and read the messages of the chosen few."""
    if prompts.empty or lengths.empty:
        return prompts.head(0).assign(solution_length=pd.Series([], dtype="int64"))
    known = (
        lengths[["family", "instance_id", "solution_length"]]
        .dropna()
        .astype({"family": str, "instance_id": str})
        .drop_duplicates(["family", "instance_id"])
    )
    df = prompts.astype({"family": str, "instance_id": str, "mode": str}).merge(
        known, on=["family", "instance_id"], how="inner"
    )
    df = df.sort_values(["family", "mode", "solution_length", "instance_id"], kind="mergesort")
    return df.drop_duplicates(["family", "mode"], keep="first").reset_index(drop=True)


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series([], dtype="int64" if c in _INTS else object) for c in EXAMPLE_PROMPT_COLUMNS}
    )
