"""Saved sequence-model checkpoints as one more provider of the evaluation engine.

A ``local`` model entry names a checkpoint folder (or a hub name) per family; the model
writes each next state of a rollout, exactly where an API model would answer the step
prompt, so rollouts, scoring, failure modes, the attempts table, resume and the report
are the ones every provider goes through. Only the text the model sees differs: the
trained source text (``training.texts.source_text``), not the chat prompt.

Why the details:

* **Micro-batching.** The engine runs up to ``max_concurrency`` episodes at once, each
  calling :meth:`LocalModel.complete` from its own thread. Decoding one step at a time
  would leave a CPU (or GPU) mostly idle, so the calls waiting at the same moment are
  gathered (leader/follower: the first caller waits until no new call arrived for a few
  ms, then decodes up to ``decode_batch`` of them in one ``generate``; the others wait
  for their answer, and one of them leads the next batch). No thread of our own is
  started, so nothing outlives the evaluation.
* **Identity.** The attempt key holds a digest of each checkpoint's files, taken once
  when the model is built (no load needed): a retrained checkpoint never reuses stored
  answers, the same one always does (a rerun resumes without decoding again). The files
  are checked again (size and mtime) when loaded, so answers are never stored under the
  digest of files that changed in between.
* torch and transformers are imported at the first step decoded, never by the import of
  this module (a dry run asks only for the identity).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from horizonbench.core.registry import SETTING_SEPARATOR, get_family
from horizonbench.core.types import Completion
from horizonbench.models import failures as f
from horizonbench.models.base import AttemptRequest
from horizonbench.schemas.config import ModelSpec

#: a gathering batch is decoded once no new step arrived for this long ...
QUIET_S = 0.01
#: ... or once its first step has waited this long, whichever comes first
MAX_GATHER_S = 0.1
#: a next state is about as long as the goal; STOP is short: tokens beyond the goal's
NEW_TOKEN_SLACK = 8


def checkpoint_for(checkpoints: Mapping[str, str], family: str) -> tuple[str, str] | None:
    """(key, reference) of the checkpoint that answers ``family`` (a family label): the
    label's own entry, its base family's, or ``"*"``; None when there is none."""
    base = family.split(SETTING_SEPARATOR, 1)[0]
    for key in (family, base, "*"):
        if key in checkpoints:
            return key, checkpoints[key]
    return None


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _stamp(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """What must not change between the digest and the load: names, sizes, mtimes."""
    out = []
    for p in _files(folder):
        st = p.stat()
        out.append((p.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns))
    return tuple(out)


def checkpoint_digest(reference: str) -> str:
    """sha256 over every file of a checkpoint folder (relative name and bytes: weights,
    config, tokenizer), or over the name of a hub checkpoint (not a folder)."""
    folder = Path(reference)
    h = hashlib.sha256()
    if not folder.is_dir():
        h.update(b"hub:" + reference.encode())
        return h.hexdigest()
    for p in _files(folder):
        h.update(p.relative_to(folder).as_posix().encode() + b"\0")
        with p.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


@dataclass(eq=False)
class _Job:
    """One step waiting for its batch."""

    source: str
    limit: int
    done: bool = False
    text: str = ""
    eos: bool = False
    output_tokens: int = 0
    error: f.CallFailure | None = None


@dataclass(eq=False)
class _Decoder:
    """One checkpoint: loaded once, its concurrent steps decoded in batches."""

    reference: str
    batch: int
    stamp: tuple[tuple[str, int, int], ...] | None
    quiet_s: float = QUIET_S
    max_gather_s: float = MAX_GATHER_S
    #: generate calls made, and the batch size of each (what the tests and logs read)
    batch_sizes: list[int] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _pending: deque[_Job] = field(default_factory=deque)
    _leading: bool = False
    _last_arrival: float = 0.0
    _load_lock: threading.Lock = field(default_factory=threading.Lock)
    _loaded: Any = None
    _load_error: f.CallFailure | None = None

    def model(self) -> Any:
        """The loaded checkpoint (loaded by the first caller; the others wait for it)."""
        if self._loaded is not None:
            return self._loaded
        with self._load_lock:
            if self._load_error is not None:
                raise self._load_error
            if self._loaded is None:
                try:
                    self._loaded = self._load()
                except f.CallFailure as err:
                    self._load_error = err
                    raise
        return self._loaded

    def _load(self) -> Any:
        folder = Path(self.reference)
        if self.stamp is not None and (not folder.is_dir() or _stamp(folder) != self.stamp):
            raise f.CallFailure(
                f.NOT_FOUND,
                f"checkpoint {self.reference} changed after its digest was taken (retrained during "
                "the run?): rerun to evaluate the new weights under their own identity",
            )
        try:
            from horizonbench.training.decoding import LoadedModel

            return LoadedModel.load(self.reference, device=_device())
        except Exception as err:  # a missing folder, a hub name offline, a broken file
            raise f.CallFailure(
                f.NOT_FOUND, f"cannot load checkpoint {self.reference}: {type(err).__name__}: {err}"
            ) from None

    def run(self, job: _Job) -> _Job:
        """Queue ``job``; lead batches while no one else does, until it is answered."""
        with self._cond:
            self._pending.append(job)
            self._last_arrival = time.monotonic()
            self._cond.notify_all()
            while not job.done:
                if not self._leading:
                    self._leading = True
                    break
                self._cond.wait()
            else:
                return job
        try:
            while not job.done:
                self._decode(self._gather())
        finally:
            with self._cond:
                self._leading = False
                self._cond.notify_all()
        return job

    def _gather(self) -> list[_Job]:
        """Wait for the steps on their way (until none arrived for ``quiet_s``, at most
        ``max_gather_s``, or a full batch), then take up to ``batch`` of them."""
        with self._cond:
            start = time.monotonic()
            while len(self._pending) < self.batch:
                now = time.monotonic()
                deadline = min(start + self.max_gather_s, max(self._last_arrival, start) + self.quiet_s)
                if now >= deadline:
                    break
                self._cond.wait(deadline - now)
            return [self._pending.popleft() for _ in range(min(self.batch, len(self._pending)))]

    def _decode(self, jobs: list[_Job]) -> None:
        """One batched greedy generate at the longest limit; each answer is then cut at
        its own limit (greedy decoding of a prefix does not depend on the limit)."""
        if not jobs:
            return
        try:
            loaded = self.model()
            outs = loaded.generate([j.source for j in jobs], max(j.limit for j in jobs))
            for job, (text, eos) in zip(jobs, outs, strict=True):
                _finish(loaded, job, text, eos)
        except f.CallFailure as err:
            for job in jobs:
                job.error = err
        except Exception as err:  # noqa: BLE001 - recorded on every step of the batch
            failure = f.CallFailure(f.OTHER, f"generate failed: {type(err).__name__}: {err}")
            for job in jobs:
                job.error = failure
        with self._cond:
            self.batch_sizes.append(len(jobs))
            for job in jobs:
                job.done = True
            self._cond.notify_all()


def _finish(loaded: Any, job: _Job, text: str, eos: bool) -> None:
    """Fill in a job's answer, cut at its own limit (the eos counts as a new token)."""
    tokens = loaded.count_tokens(text)
    if eos and tokens + 1 <= job.limit:
        job.text, job.eos, job.output_tokens = text, True, tokens + 1
        return
    if tokens > job.limit:
        tok = loaded.tokenizer
        ids = tok(text, add_special_tokens=False)["input_ids"][: job.limit]
        text = tok.decode(ids, skip_special_tokens=True)
        tokens = job.limit
    job.text, job.eos, job.output_tokens = text, False, tokens


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class LocalModel:
    """Answers rollout steps with a saved sequence model per family (greedy decoding)."""

    def __init__(
        self, spec: ModelSpec, *, quiet_s: float = QUIET_S, max_gather_s: float = MAX_GATHER_S
    ) -> None:
        if spec.provider != "local" or not spec.checkpoints:
            raise ValueError(f"model {spec.name!r} is not a local model with checkpoints")
        self.name = spec.name
        self.spec = spec
        self.checkpoints = {key: _resolved(ref) for key, ref in spec.checkpoints.items()}
        self._quiet_s = quiet_s
        self._max_gather_s = max_gather_s
        self._lock = threading.Lock()
        self._decoders: dict[str, _Decoder] = {}
        #: decoders dropped by close(), still counted by generate_calls and batch_sizes
        self._closed: list[_Decoder] = []
        self._stamps: dict[str, tuple[tuple[str, int, int], ...] | None] = {}
        self._identity: dict[str, Any] | None = None

    def identity(self) -> dict[str, Any]:
        """Provider and the digest of each configured checkpoint, by config key: what
        makes a stored answer reusable (a path alone would reuse a retrained model's)."""
        with self._lock:
            if self._identity is None:
                digests = {}
                for key, ref in sorted(self.checkpoints.items()):
                    folder = Path(ref)
                    self._stamps[ref] = _stamp(folder) if folder.is_dir() else None
                    digests[key] = checkpoint_digest(ref)
                self._identity = {"provider": "local", "checkpoints": digests}
            return self._identity

    @property
    def generate_calls(self) -> int:
        """Batched generate calls made so far, over every checkpoint."""
        return len(self.batch_sizes)

    @property
    def batch_sizes(self) -> list[int]:
        """The size of every batch decoded so far (per checkpoint, in order)."""
        with self._lock:
            decoders = [*self._closed, *self._decoders.values()]
        return [n for d in decoders for n in d.batch_sizes]

    def _decoder(self, family: str) -> _Decoder:
        found = checkpoint_for(self.checkpoints, family)
        if found is None:
            raise f.CallFailure(f.BAD_REQUEST, f"model {self.name!r} has no checkpoint for family {family!r}")
        ref = found[1]
        self.identity()  # the stamps the load is checked against
        with self._lock:
            decoder = self._decoders.get(ref)
            if decoder is None:
                decoder = _Decoder(
                    ref, self.spec.decode_batch, self._stamps.get(ref), self._quiet_s, self._max_gather_s
                )
                self._decoders[ref] = decoder
            return decoder

    def complete(self, request: AttemptRequest) -> Completion:
        start = time.perf_counter()
        if request.mode != "rollout":
            raise f.CallFailure(
                f.BAD_REQUEST, f"model {self.name!r} is a sequence model: it answers rollout steps, not plans"
            )
        state = request.context.get("state")
        goal = request.row.get("goal_state")
        if not isinstance(state, str) or not isinstance(goal, str):
            raise f.CallFailure(f.BAD_REQUEST, "a rollout step needs the current state and the goal")
        from horizonbench.training import texts

        family = get_family(request.family)
        rules = texts.rules_of(request.row, [fld.name for fld in family.rule_fields])  # type: ignore[attr-defined]
        source = texts.source_text(state, goal, rules)
        decoder = self._decoder(request.family)
        loaded = decoder.model()
        limit = max(1, min(request.max_tokens, 2 * loaded.count_tokens(goal) + NEW_TOKEN_SLACK))
        job = decoder.run(_Job(source, limit))
        if job.error is not None:
            raise job.error
        return Completion(
            text=job.text,
            finish_reason="stop" if job.eos else "length",
            input_tokens=loaded.count_tokens(source),
            output_tokens=job.output_tokens,
            latency_s=time.perf_counter() - start,
            cost_usd=0.0,
        )

    def close(self) -> None:
        """Drop the loaded checkpoints (a batch in flight keeps its own reference)."""
        with self._lock:
            self._closed.extend(self._decoders.values())
            self._decoders.clear()

    def __repr__(self) -> str:
        return f"LocalModel(name={self.name!r}, checkpoints={sorted(self.checkpoints)})"


def _resolved(reference: str) -> str:
    """A folder as an absolute path (the run may change directory); a hub name as given."""
    path = Path(os.path.expanduser(reference))
    return str(path.resolve()) if path.exists() else reference
