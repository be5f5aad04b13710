"""Generate stage: oversample candidates on Dask, keep them in index order, stream the
kept rows into the staged instance table part by part; candidate ranges a previous run
finished come from the shard cache (``tasks.generate.shard_cache``) instead of the cluster."""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from horizonbench.core.registry import get_family
from horizonbench.datasets.puzzles.steps import split_overlap
from horizonbench.datasets.sampling import Selector
from horizonbench.datasets.shards import NOT_NEEDED, ShardBatch, generate_shard_batch
from horizonbench.schemas.config import Config, FamilySpec
from horizonbench.tasks.cluster import progress as prog
from horizonbench.tasks.cluster.client import dask_client
from horizonbench.tasks.generate.shard_cache import (
    CACHE_REL,
    CachedShard,
    FamilyShards,
    ShardCache,
    cache_settings,
    run_bound,
)
from horizonbench.tasks.run_folder.layout import instances_rel
from horizonbench.tasks.run_folder.storage import staged
from horizonbench.tasks.run_folder.table_parts import PartWriter, read_parts

#: shards a family's sampler may hold per slot of its window: results that arrived
#: before their turn wait in the queue without taking a slot (bounded, since each is a
#: table of rows on its worker)
HELD_PER_SLOT = 4
#: the sizer's estimate is the median of this many recent shards' cost per candidate
RECENT_SHARDS = 5


@dataclass
class GenerationStats:
    family: str
    kept: int
    considered: int
    certified: int
    rejections: dict[str, int] = field(default_factory=dict)
    unfilled_bins: dict[int, int] = field(default_factory=dict)
    path: str = ""
    #: candidates generated on the workers this run, and read from the shard cache
    generated: int = 0
    from_cache: int = 0
    #: quota slots taken by solved candidates dropped after the cut (Algorithm 6's
    #: trivial and repeated ones, Blocks World ``dedup: after``): bins hold "up to" M
    slots_dropped: int = 0
    #: puzzles: validation / OOD steps that repeat a training step under the export's
    #: split (``export.split``, the run seed), as ``horizonbench export`` reports it
    step_overlap: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "kept": self.kept,
            "candidates_considered": self.considered,
            "candidates_certified": self.certified,
            "rejections": dict(sorted(self.rejections.items())),
            "unfilled_bins": {str(k): v for k, v in sorted(self.unfilled_bins.items())},
            "candidates_generated": self.generated,
            "candidates_from_cache": self.from_cache,
            "quota_slots_dropped": self.slots_dropped,
            "step_overlap": self.step_overlap,
            "path": self.path,
        }


class ShardSizer:
    """How many candidates the next shard gets: about ``target_seconds`` of worker CPU,
    and never so many that the candidates still needed pile onto one worker.

    A fixed ``shard_size`` from the config is used as given. Either way the kept set is
    the same: shard boundaries change only which rows travel, never which are kept.
    """

    MIN, MAX = 8, 20_000

    def __init__(self, fixed: int | None, goal: int, workers: int, target_seconds: float = 1.0) -> None:
        self.fixed = fixed
        self.goal = goal
        self.workers = max(1, workers)
        self.target = target_seconds
        self.per_candidate: float | None = None
        self._recent: deque[float] = deque(maxlen=RECENT_SHARDS)

    def observe(self, candidates: int, cpu_seconds: float) -> None:
        """Learn from a finished shard. The median of the last few shards, not a running
        mean: a worker's first shard can cost ten times the others (pyarrow imports
        pandas the first time it converts rows; measured 6.4 ms a candidate against 0.7),
        and a mean would shrink the next several shards for it."""
        if candidates:
            self._recent.append(max(cpu_seconds, 1e-6) / candidates)
            self.per_candidate = statistics.median(self._recent)

    def _need(self, kept: int, considered: int, in_flight: int) -> float:
        """Candidates still needed at the keep rate seen so far, beyond those in flight."""
        rate = max(kept / considered, 0.05) if considered else 1.0
        return max(self.goal - kept, 1) / rate - in_flight

    def covered(self, kept: int, considered: int, in_flight: int) -> bool:
        """Do the candidates in flight already cover what is needed? (then wait for them:
        a 10-instance run should not generate a window of shards)."""
        return self.fixed is None and in_flight > 0 and self._need(kept, considered, in_flight) <= 0

    def next(self, kept: int, considered: int, in_flight: int) -> int:
        if self.fixed is not None:
            return self.fixed
        need = self._need(kept, considered, in_flight)
        spread = math.ceil(max(need, self.MIN) / self.workers)
        if self.per_candidate is None:  # first wave: small shards to learn the cost
            return max(self.MIN, min(64, spread))
        by_time = int(self.target / self.per_candidate)
        return max(self.MIN, min(self.MAX, by_time, spread))


def rows_at(table: pa.Table, positions: list[int]) -> pa.Table:
    """The rows at sorted ``positions``, as zero-copy slices of runs: ``take`` copies
    every nested value (a maze's facts), and most shards keep all their rows."""
    if len(positions) == table.num_rows:
        return table
    runs: list[pa.Table] = []
    start = prev = positions[0]
    for p in positions[1:]:
        if p != prev + 1:
            runs.append(table.slice(start, prev + 1 - start))
            start = p
        prev = p
    runs.append(table.slice(start, prev + 1 - start))
    return pa.concat_tables(runs) if len(runs) > 1 else runs[0]


@dataclass
class SourceCounts:
    """Where the candidates a family's selector saw came from: generated on the workers
    this run, or read back from the shard cache (the generation stats report both)."""

    generated: int = 0
    from_cache: int = 0
    shards_generated: int = 0
    shards_reused: int = 0


@dataclass
class _Fresh:
    """A shard sent to the cluster: candidates ``start..stop-1`` and the lengths it was
    asked to return rows for (the bins open when it was sent)."""

    start: int
    stop: int
    fut: Any
    wanted: frozenset[int] | None
    batch: ShardBatch | None = None


@dataclass
class _Cached:
    """Candidates ``start..stop-1`` read from a cached shard (which may start earlier)."""

    start: int
    stop: int
    shard: CachedShard


class _Cover:
    """The cached ranges as the cursor moves forward: which one holds candidate ``c``
    (the one reaching furthest, when several overlap) and where the next one starts.

    Ranges are whatever earlier runs happened to generate; any of them can be entered
    in the middle, so reuse never depends on shard boundaries matching.
    """

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        self._ranges = sorted(ranges)
        self._next = 0
        self._active: list[tuple[int, int]] = []

    def _advance(self, c: int) -> None:
        while self._next < len(self._ranges) and self._ranges[self._next][0] <= c:
            self._active.append(self._ranges[self._next])
            self._next += 1
        self._active = [r for r in self._active if r[1] > c]

    def at(self, c: int) -> tuple[int, int] | None:
        self._advance(c)
        return max(self._active, key=lambda r: r[1], default=None)

    def next_start(self, c: int) -> int | None:
        self._advance(c)
        return self._ranges[self._next][0] if self._next < len(self._ranges) else None

    def discard(self, r: tuple[int, int]) -> None:
        self._active.remove(r)


def _feed(
    selector: Selector,
    outcomes: list[tuple[int, int | None, str | None, bool]],
    rows: Callable[[], pa.Table],
    first_row: int,
    sink: Callable[[pa.Table], None] | None,
    shard: CachedShard | None = None,
) -> int | None:
    """Offer ``outcomes`` to the selector in order and pass the kept rows to ``sink``.

    A fresh shard always holds every row the selector can keep (its bins were open
    when it was sent, and bins only close). A cached one was sent in another run, maybe
    under another sampling spec: as long as the open bins are not all among the lengths
    it kept rows for, each candidate without a row is checked, and feeding stops at the
    first one the selector might keep. Returns that index (to regenerate from), or None.
    """
    certain = shard is None or shard.covers(selector.open_lengths())
    take: list[int] = []
    position = first_row
    stopped = None
    for index, length, rejection, has_row in outcomes:
        if not certain and not has_row and not selector.done:
            assert shard is not None
            if rejection is None and length is not None and selector.wants(length):
                stopped = index
                break
            if rejection == NOT_NEEDED:
                if not shard.covers(selector.open_lengths()):
                    stopped = index
                    break
                certain = True  # enough bins closed meanwhile: the rest is covered
        if selector.feed(index, length, has_row, rejection):
            take.append(position)
        position += has_row
    if take and sink is not None:
        sink(rows_at(rows(), take))
    return stopped


def _finished(fut: Any) -> bool:
    """Is a shard's future done, with a result or an error? (in-process stand-ins of
    a client, as tests use, are done when made)"""
    done = getattr(fut, "done", None)
    return True if done is None else bool(done())


def _status(fut: Any) -> str:
    """A Dask future's status ("pending", "finished", "error", "cancelled", ...)."""
    return str(getattr(fut, "status", "finished"))


def sample_family(
    client: Any,
    family_name: str,
    spec: FamilySpec,
    root_seed: int,
    window: int,
    sink: Callable[[pa.Table], None] | None = None,
    workers: int | None = None,
    shards: FamilyShards | None = None,
    counts: SourceCounts | None = None,
) -> Selector:
    """Run shards on the cluster, feeding results to the selector strictly in order.

    Up to ``window`` shards are in flight; results that finish early wait their turn,
    so the kept set is the same for any number of workers and any shard size. Kept
    rows go to ``sink`` as Arrow tables in candidate order, shard by shard: the client
    holds at most the shards in flight, whatever the count.

    With ``shards`` (this family's key in a ``ShardCache``), candidate ranges already on
    disk are read instead of generated and only the gaps go to the cluster; every shard
    is stored the moment its result arrives (not when its turn comes), so a Ctrl-C or
    a crash keeps all finished work. The bytes of the table are the same either way:
    cached and fresh outcomes are the same pure function of the candidate index.
    ``counts`` receives how many candidates came from where.
    """
    sampling = spec.sampling
    selector = Selector(sampling)
    counts = counts if counts is not None else SourceCounts()
    family = get_family(family_name)
    limit = sampling.max_candidates
    counter = getattr(family, "candidate_count", None)
    if counter is not None:  # enumerated families: never ask beyond the candidate space
        limit = min(limit, counter(family.params_model.model_validate(spec.params)))
    if sampling.bins is not None:
        goal = min(limit, sampling.bins.total())
    else:
        goal = min(limit, sampling.count or limit)
    sizer = ShardSizer(sampling.shard_size, goal, workers or max(1, window // 3))
    cover = _Cover(shards.ranges() if shards is not None else [])
    # after a cached shard turned out to lack a row this sampler needs (another spec made
    # it), reuse only shards that certainly cover the open bins when planned
    strict = False
    queue: deque[_Fresh | _Cached] = deque()
    cursor = 0
    pending = 0  # candidates planned, not yet fed

    def submit(start: int, stop: int) -> _Fresh:
        wanted = selector.open_lengths()
        fut = client.submit(
            generate_shard_batch, family_name, spec.params, root_seed, start, stop, wanted, pure=False
        )
        return _Fresh(start, stop, fut, wanted)

    def plan(c: int) -> _Fresh | _Cached:
        while shards is not None and (r := cover.at(c)) is not None:
            shard = shards.load(*r)
            if shard is not None and (not strict or shard.covers(selector.open_lengths())):
                return _Cached(c, min(r[1], limit), shard)
            if shard is not None:  # regenerated below: drop the overlap, keep the head
                shards.truncate(shard, c)
            cover.discard(r)
        size = min(sizer.next(selector.kept, selector.considered, pending), limit - c)
        nxt = cover.next_start(c)
        return submit(c, c + (size if nxt is None else min(size, nxt - c)))

    def receive(item: _Fresh, timeout: float | None = None) -> None:
        item.batch = item.fut.result() if timeout is None else item.fut.result(timeout=timeout)
        counts.generated += item.stop - item.start
        counts.shards_generated += 1
        if shards is not None:
            shards.store(item.start, item.stop, item.wanted, item.batch)

    def await_head(head: _Fresh) -> ShardBatch:
        """The head's result; with a cache, store every other result as it arrives (a
        failed shard raises only when its turn comes, as without a cache)."""
        while head.batch is None:
            if shards is None:
                receive(head)
                break
            for it in [it for it in queue if isinstance(it, _Fresh) and it.batch is None]:
                if (it is head and _finished(it.fut)) or _status(it.fut) == "finished":
                    receive(it)
            if head.batch is None:
                from distributed import wait

                wait(running(), return_when="FIRST_COMPLETED")
        assert head.batch is not None
        return head.batch

    def running() -> list[Any]:
        """The futures of the shards still being generated."""
        return [
            it.fut for it in queue if isinstance(it, _Fresh) and it.batch is None and not _finished(it.fut)
        ]

    def holding() -> int:
        """The queue's items that hold a slot of the window: all of them, except while
        the head is a shard still running, when those whose result has arrived give
        theirs up (so a worker that finished is not left idle behind the head). The
        planner otherwise looks no further ahead than the window, through cached ranges
        as through fresh shards (ahead of a sampler that is done by then, extra shards
        are work thrown away)."""
        head = queue[0] if queue else None
        if not (isinstance(head, _Fresh) and head.batch is None and not _finished(head.fut)):
            return len(queue)
        return sum(
            1 for it in queue if not (isinstance(it, _Fresh) and (it.batch is not None or _finished(it.fut)))
        )

    def store_arrived() -> None:
        """Store every result that has arrived (the cache keeps finished work at once)."""
        for it in queue:
            if isinstance(it, _Fresh) and it.batch is None and _status(it.fut) == "finished":
                receive(it)

    def salvage(budget_s: float = 2.0) -> None:
        """On the way out (done, Ctrl-C, crash): store results that arrived but were
        not fetched yet, within a short budget so an interrupt still exits at once."""
        deadline = time.monotonic() + budget_s
        for it in list(queue):
            if not isinstance(it, _Fresh) or it.batch is not None:
                continue
            if _status(it.fut) != "finished":
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                receive(it, timeout=left)
            except Exception:  # the cluster is going down with us: keep what is stored
                break

    with prog.progress(f"generate {family_name}", goal) as bar:
        try:
            while not selector.done and (queue or cursor < limit):
                while (
                    len(queue) < window * HELD_PER_SLOT
                    and holding() < window
                    and cursor < limit
                    and not sizer.covered(selector.kept, selector.considered, pending)
                ):
                    item = plan(cursor)
                    queue.append(item)
                    pending += item.stop - item.start
                    cursor = item.stop
                head = queue[0]
                if isinstance(head, _Fresh) and head.batch is None and not _finished(head.fut):
                    # the head is still running: wait for any shard, then send the next one
                    # before the head's turn, so a worker that finished is never left idle
                    # behind a slower one (results that came early wait here, not a slot)
                    from distributed import wait

                    wait(running(), return_when="FIRST_COMPLETED")
                    if shards is not None:
                        store_arrived()
                    continue
                before = selector.kept
                if isinstance(head, _Fresh):
                    batch = await_head(head)
                    queue.popleft()
                    pending -= head.stop - head.start
                    sizer.observe(len(batch.outcomes), batch.cpu_seconds)
                    _feed(selector, batch.outcomes, batch.table, 0, sink)
                else:
                    queue.popleft()
                    pending -= head.stop - head.start
                    shard = head.shard
                    lo, hi = head.start - shard.start, head.stop - shard.start
                    first_row = sum(o[3] for o in shard.outcomes[:lo])
                    stopped = _feed(selector, shard.outcomes[lo:hi], shard.table, first_row, sink, shard)
                    counts.from_cache += (head.stop if stopped is None else stopped) - head.start
                    counts.shards_reused += 1
                    if stopped is not None:
                        strict = True
                        if shards is not None:
                            shards.truncate(shard, stopped)
                        redo: list[_Fresh] = []
                        c = stopped
                        while c < head.stop:
                            size = min(sizer.next(selector.kept, selector.considered, pending), head.stop - c)
                            redo.append(submit(c, c + size))
                            pending += size
                            c += size
                        queue.extendleft(reversed(redo))
                bar.advance(selector.kept - before)
        finally:
            if shards is not None:
                salvage()
            for it in queue:
                if isinstance(it, _Fresh):
                    it.fut.cancel()
    return selector


def generate_all(
    cfg: Config,
    run_dir: Path,
    log: Callable[[str], None] | None = None,
    run_family: Callable[[str, Callable[[], dict[str, Any]]], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Every family's instances into staging, reusing cached shards; per-family stats.

    The plain function behind the ``generate`` task (tests call it without Prefect).
    The shard cache is ``generation.cache_dir`` when the config names one (a series of
    nightly runs shares it), else ``<run>/cache/shards``; it is pruned to its bound
    after a finished generation, the run's own cache to no more bytes than the
    instance tables (``tasks.generate.shard_cache``).
    """
    root, bound = cache_settings(cfg, run_dir)
    cache = ShardCache(root, bound)
    stats = []
    current = {"name": "", "counts": SourceCounts()}
    try:
        with dask_client(cfg.dask) as client:
            stats = _generate_families(cfg, run_dir, client, cache, current, log, run_family)
    except KeyboardInterrupt as err:
        if isinstance(err, GenerationInterrupted):
            raise
        raise GenerationInterrupted(current["name"], current["counts"], root) from None
    adaptive = any(spec.sampling.adaptive is not None for spec in cfg.families.values())
    if root == run_dir / CACHE_REL and not adaptive:
        # the run's own cache: no more bytes than the instance tables it saves (an
        # adaptive study keeps it whole under its bound: every wave reads it again)
        cache.max_bytes = run_bound(bound, staged(run_dir, "instances"))
    removed = cache.prune()
    if removed and log is not None and cache.max_bytes == bound:
        log(f"shard cache {root}: removed {removed / 2**20:.1f} MiB to stay under {bound / 2**30:.1f} GiB")
    return stats


class GenerationInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped generation; every finished shard is in the cache."""

    def __init__(self, family: str, counts: SourceCounts, root: Path) -> None:
        where = f" of {family}" if family else ""
        super().__init__(
            f"during generation{where}: {counts.shards_generated} shards finished this run "
            f"({counts.generated} candidates) are kept in the shard cache {root}; rerun the same "
            "command to resume from them"
        )


def _generate_families(
    cfg: Config,
    run_dir: Path,
    client: Any,
    cache: ShardCache,
    current: dict[str, Any],
    log: Callable[[str], None] | None,
    run_family: Callable[[str, Callable[[], dict[str, Any]]], dict[str, Any]] | None,
) -> list[dict[str, Any]]:
    stats = []
    workers = len(client.scheduler_info().get("workers", {})) or cfg.dask.n_workers  # type: ignore[attr-defined]
    window = max(2, 3 * workers * cfg.dask.threads_per_worker)
    for name, spec in cfg.families.items():

        def one(name: str = name, spec: FamilySpec = spec) -> dict[str, Any]:
            family = get_family(name)
            rel = instances_rel(name)
            counts = current["counts"] = SourceCounts()
            current["name"] = name
            with PartWriter(staged(run_dir, rel), family.instance_schema, rel) as writer:
                selector = sample_family(
                    client,
                    name,
                    spec,
                    cfg.run.seed,
                    window,
                    writer.write,
                    workers * cfg.dask.threads_per_worker,
                    shards=cache.family(name, spec.params, cfg.run.seed),
                    counts=counts,
                )
            st = GenerationStats(
                family=name,
                kept=selector.kept,
                considered=selector.considered,
                certified=selector.certified,
                rejections=dict(selector.rejections),
                unfilled_bins=selector.unfilled(),
                path=rel,
                generated=counts.generated,
                from_cache=counts.from_cache,
                slots_dropped=selector.slots_dropped,
            )
            rule_fields = getattr(family, "rule_fields", None)
            if rule_fields is not None and st.kept:
                rows = read_parts(staged(run_dir, rel)).to_pylist()
                rules = [f.name for f in rule_fields]
                st.step_overlap = split_overlap(
                    rows, cfg.run.seed, cfg.export.split, rules, cfg.export.in_distribution_max
                )
            if log is not None:
                log(
                    f"{name}: kept {st.kept} of {st.considered} candidates ({st.certified} certified, "
                    f"rejected {st.rejections or 'none'}); {st.from_cache} from the shard cache, "
                    f"{st.generated} generated"
                    + (f"; {len(st.unfilled_bins)} bins short of quota" if st.unfilled_bins else "")
                    + (
                        f"; {st.slots_dropped} quota slots went to trivial or repeated candidates "
                        "dropped after the cut (bins hold up to their quota)"
                        if st.slots_dropped
                        else ""
                    )
                )
            return st.as_dict()

        stats.append(run_family(name, one) if run_family is not None else one())
    return stats
