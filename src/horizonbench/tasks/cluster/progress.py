"""Progress bars for long stages, shown only when someone is watching a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Progress(Protocol):
    def advance(self, n: int = 1) -> None: ...


class _Silent:
    def advance(self, n: int = 1) -> None:
        pass


class _Rich:
    def __init__(self, bar: object, task_id: object) -> None:
        self._bar, self._id = bar, task_id

    def advance(self, n: int = 1) -> None:
        self._bar.update(self._id, advance=n)  # type: ignore[attr-defined]


ENABLED = {"value": None}


def enabled() -> bool:
    flag = ENABLED["value"]
    return sys.stderr.isatty() if flag is None else bool(flag)


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Progress]:
    with progress_group([(description, total)]) as bars:
        yield bars[0]


@contextmanager
def progress_group(items: list[tuple[str, int | None]]) -> Iterator[list[Progress]]:
    """One bar per item in one live display (models evaluated side by side)."""
    if not enabled():
        yield [_Silent() for _ in items]
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    with RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        yield [_Rich(bar, bar.add_task(description, total=total)) for description, total in items]
