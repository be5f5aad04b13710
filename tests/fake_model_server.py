"""A real HTTP server on 127.0.0.1 that speaks just enough OpenAI and Anthropic.

Tests drive the official SDKs over real sockets against it, so retries, headers and
response parsing are exercised as in production, with no network and no real key.

Beyond plain answers it can misbehave like a real provider, each feature off by default:

* ``latency_s``: delay every successful answer;
* ``rpm`` / ``tpm`` over a sliding ``window_s``: 429 with ``retry-after-ms`` / ``retry-after``;
* ``chaos``: random 500 / 503 / timeout / dropped connection / malformed JSON / empty choices;
* ``fail_next`` / ``drop_next``: deterministic failures of the next requests;
* ``fail_after``: 400 for every request once that many answers were given;
* ``valid_keys``: 401 for any other key;
* ``served_model`` / ``system_fingerprint``: what the reply says it is;
* the OpenAI Files + Batches API and the Anthropic Message Batches API.

Counters (``answered``, ``status_counts``, ``answer_times``, ``answers_per_prompt()``,
``in_flight_max``, ``batches_created``, ``batch_lines_answered``...) let a test prove that a
client respected a rate limit or never paid for the same prompt twice.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import math
import random
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

#: a responder returns the reply text, or (text, "stop" | "length"), or a dict
#: {"text": ..., "stop": ..., "output_tokens": int, "input_tokens": int} (only "text" required)
Reply = str | tuple[str, str] | dict[str, Any]
Responder = Callable[[dict[str, Any]], Reply]

#: the kinds ``chaos`` understands, in the order a draw is matched against them
CHAOS_KINDS = ("500", "503", "timeout", "drop", "malformed", "empty_choices")

_DROP = "drop"  # marker in the forced-failure queue
_DAY_S = 24 * 3600

_OPENAI_ERROR_TYPES = {429: "requests"}
_OPENAI_ERROR_CODES = {401: "invalid_api_key", 404: "not_found", 429: "rate_limit_exceeded"}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]  # parsed JSON; multipart: field -> value ({"filename", "bytes"} for files)
    method: str = "POST"
    query: str = ""


@dataclass(frozen=True)
class BatchSubmission:
    """One accepted batch creation (a resumed client should not add another)."""

    provider: Literal["openai", "anthropic"]
    batch_id: str
    custom_ids: tuple[str, ...]
    created: float  # time.monotonic()


@dataclass(frozen=True)
class _Answer:
    text: str
    stop: str
    input_tokens: int
    output_tokens: int


@dataclass
class _Batch:
    provider: Literal["openai", "anthropic"]
    id: str
    created_wall: float
    due: float  # monotonic time at which processing ends
    lines: list[tuple[str, dict[str, Any]]]  # (custom_id, request body)
    endpoint: str = ""
    input_file_id: str = ""
    completion_window: str = ""
    metadata: dict[str, Any] | None = None
    validation_errors: list[dict[str, Any]] = field(default_factory=list)
    polled: bool = False
    cancel_wall: float | None = None
    ended_wall: float | None = None
    succeeded: int = 0
    failed: int = 0
    canceled: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)  # Anthropic result lines


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(body: dict[str, Any]) -> int:
    total = 0
    system = body.get("system")
    if isinstance(system, str):
        total += _words(system)
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            total += _words(content)
    return total


def _max_tokens(body: dict[str, Any]) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int):
            return value
    return 0


def request_fingerprint(body: dict[str, Any], headers: dict[str, str] | None = None) -> str:
    """What ``answers_per_prompt()`` counts by: sha256 of the canonical JSON of the prompt.

    Uses the body's ``model``, ``system``, ``messages`` and, when present, ``seed`` (which
    tells the samples of one prompt apart), ``metadata`` and ``user``, plus the
    ``x-hb-attempt`` header when sent (batch lines have no headers).
    """
    fields = ("model", "system", "messages", "seed", "metadata", "user")
    key = {k: body[k] for k in fields if k in body}
    attempt = (headers or {}).get("x-hb-attempt")
    if attempt is not None:
        key["x-hb-attempt"] = attempt
    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _dumps(payload: Any) -> bytes:
    # ensure_ascii: lone surrogates and NUL go out as \ud800 / \u0000 escapes, like a provider's
    return json.dumps(payload, ensure_ascii=True).encode("ascii")


def _rfc3339(wall: float | None) -> str | None:
    if wall is None:
        return None
    return datetime.fromtimestamp(wall, UTC).isoformat().replace("+00:00", "Z")


def _parse_multipart(content_type: str, raw: bytes) -> dict[str, Any]:
    """Form fields -> str; file fields -> {"filename": ..., "content": bytes}."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is not None:
            fields[str(name)] = {"filename": filename, "content": payload}
        else:
            fields[str(name)] = payload.decode("utf-8", "replace")
    return fields


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops SYNs under concurrency

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client hung up (timeout, drop): normal in these tests
        super().handle_error(request, client_address)


class FakeModelServer:
    """State shared by the handler threads: the responder, recorded requests, failures."""

    def __init__(
        self,
        responder: Responder,
        *,
        echo_auth_in_errors: bool = False,
        latency_s: float = 0.0,
        rpm: float | None = None,
        tpm: float | None = None,
        window_s: float = 1.0,
        tpm_counts: Literal["requested", "used"] = "used",
        retry_after_header: bool = True,
        chaos: dict[str, float] | None = None,
        chaos_seed: int = 0,
        chaos_timeout_s: float = 30.0,
        valid_keys: set[str] | None = None,
        served_model: str | None = None,
        system_fingerprint: str | None = "fp_fake",
        batch_complete_after_s: float = 0.2,
        batch_fail_ids: set[str] | None = None,
        batch_fail_shape: Literal["status_code", "error"] = "status_code",
    ) -> None:
        if tpm_counts not in ("requested", "used"):
            raise ValueError(f"tpm_counts must be 'requested' or 'used', not {tpm_counts!r}")
        chaos = dict(chaos or {})
        unknown = set(chaos) - set(CHAOS_KINDS)
        if unknown:
            raise ValueError(f"unknown chaos kinds {sorted(unknown)}; known: {CHAOS_KINDS}")
        if sum(chaos.values()) > 1.0 + 1e-9 or any(p < 0 for p in chaos.values()):
            raise ValueError("chaos probabilities must be >= 0 and sum to at most 1")
        self.responder = responder
        #: put the request's auth headers into error bodies, like a careless proxy might,
        #: to prove clients scrub keys from error messages
        self.echo_auth_in_errors = echo_auth_in_errors
        self.latency_s = latency_s
        self.rpm = rpm
        self.tpm = tpm
        self.window_s = window_s
        self.tpm_counts = tpm_counts
        self.retry_after_header = retry_after_header
        self.chaos = chaos
        self.chaos_timeout_s = chaos_timeout_s
        self.valid_keys = set(valid_keys) if valid_keys is not None else None
        self.served_model = served_model
        self.system_fingerprint = system_fingerprint
        self.batch_complete_after_s = batch_complete_after_s
        self.batch_fail_ids = set(batch_fail_ids or ())
        self.batch_fail_shape = batch_fail_shape

        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._batch_lock = threading.RLock()
        self._stopping = threading.Event()
        self._fail_next: list[int | str] = []
        #: once this many answers were given, every request fails with 400 (None: never)
        self.fail_after: int | None = None
        self._rng = random.Random(chaos_seed)
        self._window: deque[tuple[float, int]] = deque()  # admitted (monotonic time, tokens)
        self._answered = 0
        self._status_counts: dict[int, int] = {}
        self._chaos_counts: dict[str, int] = {}
        self._answer_times: list[tuple[float, int]] = []
        self._billed: list[tuple[str, int, int]] = []
        self._answers_per_prompt: dict[str, int] = {}
        self._in_flight = 0
        self._in_flight_max = 0
        self._seq = 0
        self._files: dict[str, dict[str, Any]] = {}  # id -> file object + "_content"
        self._batches: dict[str, _Batch] = {}
        self._submissions: list[BatchSubmission] = []
        self._batch_polls: dict[str, int] = {}
        self._batch_lines_answered = 0

        self._httpd = _HTTPServer(("127.0.0.1", 0), self._handler_class())
        # a short poll interval keeps shutdown (and so each test) fast
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # --- addresses ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        """Base URL for the Anthropic SDK (it appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """Base URL for the OpenAI SDK (it appends ``/chat/completions``)."""
        return f"{self.root_url}/v1"

    # --- test controls -----------------------------------------------------------------

    def fail_next(self, n: int, status: int = 429) -> None:
        """Answer the next ``n`` requests (to known routes) with ``status`` (1 ms retry-after)."""
        with self._lock:
            self._fail_next.extend([status] * n)

    def drop_next(self, n: int) -> None:
        """Close the connection of the next ``n`` requests (to known routes) without answering."""
        with self._lock:
            self._fail_next.extend([_DROP] * n)

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in latency or a chaos timeout
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- counters ----------------------------------------------------------------------

    @property
    def answered(self) -> int:
        """Well-formed 200 answers to chat completions / messages (not batch lines)."""
        with self._lock:
            return self._answered

    @property
    def status_counts(self) -> dict[int, int]:
        """HTTP status -> responses sent, over every route (dropped connections send none)."""
        with self._lock:
            return dict(self._status_counts)

    @property
    def chaos_counts(self) -> dict[str, int]:
        """Chaos kind -> times injected (forced ``drop_next`` drops count as "drop" too)."""
        with self._lock:
            return dict(self._chaos_counts)

    @property
    def answer_times(self) -> list[tuple[float, int]]:
        """(monotonic admission time, tokens counted as by ``tpm_counts``) per answer."""
        with self._lock:
            return list(self._answer_times)

    @property
    def billed(self) -> list[tuple[str, int, int]]:
        """(model asked for, input tokens, output tokens) of every 200 chat reply that
        reported usage, answers and ``empty_choices`` replies alike: what a provider bills."""
        with self._lock:
            return list(self._billed)

    def billed_usd(self, input_per_mtok: float, output_per_mtok: float, model: str | None = None) -> float:
        """What :attr:`billed` costs at these prices (one ``model``'s calls, or all)."""
        return (
            sum(i * input_per_mtok + o * output_per_mtok for m, i, o in self.billed if model in (None, m))
            / 1e6
        )

    def answers_per_prompt(self) -> dict[str, int]:
        """``request_fingerprint`` -> times answered with 200 (sync answers + batch lines)."""
        with self._lock:
            return dict(self._answers_per_prompt)

    def repeated_prompts(self) -> dict[str, int]:
        """The fingerprints answered more than once (empty when no prompt was paid twice)."""
        return {k: v for k, v in self.answers_per_prompt().items() if v > 1}

    @property
    def in_flight_max(self) -> int:
        """Most requests being handled at the same time."""
        with self._lock:
            return self._in_flight_max

    @property
    def batches_created(self) -> int:
        with self._lock:
            return len(self._submissions)

    @property
    def batch_submissions(self) -> list[BatchSubmission]:
        with self._lock:
            return list(self._submissions)

    @property
    def batch_polls(self) -> dict[str, int]:
        """Batch id -> GET retrievals of that batch."""
        with self._lock:
            return dict(self._batch_polls)

    @property
    def batch_lines_answered(self) -> int:
        with self._lock:
            return self._batch_lines_answered

    # --- shared state helpers ------------------------------------------------------------

    def _next_id(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _pop_forced(self) -> int | str | None:
        with self._lock:
            if self.fail_after is not None and self._answered >= self.fail_after:
                return 400
            return self._fail_next.pop(0) if self._fail_next else None

    def _count_status(self, status: int) -> None:
        with self._lock:
            self._status_counts[status] = self._status_counts.get(status, 0) + 1

    def _count_chaos(self, kind: str) -> None:
        with self._lock:
            self._chaos_counts[kind] = self._chaos_counts.get(kind, 0) + 1

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._in_flight_max = max(self._in_flight_max, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _count_answer(self, fingerprint: str, admitted_at: float | None, tokens: int) -> None:
        with self._lock:
            self._answers_per_prompt[fingerprint] = self._answers_per_prompt.get(fingerprint, 0) + 1
            if admitted_at is None:
                self._batch_lines_answered += 1
            else:
                self._answered += 1
                self._answer_times.append((admitted_at, tokens))

    def _draw_chaos(self) -> str | None:
        if not self.chaos:
            return None
        with self._lock:
            draw = self._rng.random()
        cumulative = 0.0
        for kind in CHAOS_KINDS:
            cumulative += self.chaos.get(kind, 0.0)
            if draw < cumulative:
                return kind
        return None

    def _tokens(self, body: dict[str, Any], answer: _Answer | None) -> int:
        if self.tpm_counts == "requested" or answer is None:
            return _prompt_words(body) + _max_tokens(body)
        return _prompt_words(body) + answer.output_tokens

    def _admit(self, tokens: int) -> tuple[float, float | None, str]:
        """Sliding-window admission: (now, None, "") if admitted else (now, wait_s, which)."""
        with self._lock:
            now = time.monotonic()
            window = self._window
            while window and window[0][0] <= now - self.window_s:
                window.popleft()
            if self.rpm is None and self.tpm is None:
                return now, None, ""
            cap_requests = math.inf if self.rpm is None else self.rpm * self.window_s / 60.0
            cap_tokens = math.inf if self.tpm is None else self.tpm * self.window_s / 60.0
            count, used = len(window), sum(t for _, t in window)

            def fits(count: int, used: int) -> bool:
                return count + 1 <= cap_requests + 1e-9 and used + tokens <= cap_tokens + 1e-9

            if not window or fits(count, used):
                window.append((now, tokens))
                return now, None, ""
            which = "requests" if count + 1 > cap_requests + 1e-9 else "tokens"
            # the earliest moment enough old entries have slid out for this request to fit
            wait = self.window_s
            for at, spent in window:
                count, used = count - 1, used - spent
                if count == 0 or fits(count, used):
                    wait = at + self.window_s - now
                    break
            return now, max(wait, 0.001), which

    def _answer(self, body: dict[str, Any]) -> _Answer:
        reply = self.responder(body)
        if isinstance(reply, str):
            text, stop, forced_out, forced_in = reply, "stop", None, None
        elif isinstance(reply, dict):
            text = str(reply["text"])
            stop = str(reply.get("stop", "stop"))
            forced_out, forced_in = reply.get("output_tokens"), reply.get("input_tokens")
        else:
            (text, stop), forced_out, forced_in = reply, None, None
        return _Answer(
            text=text,
            stop=stop,
            input_tokens=_prompt_words(body) if forced_in is None else int(forced_in),
            output_tokens=_words(text) if forced_out is None else int(forced_out),
        )

    def _model_name(self, body: dict[str, Any]) -> str:
        return self.served_model or str(body.get("model", "fake"))

    def _openai_reply(self, body: dict[str, Any], answer: _Answer, empty: bool = False) -> dict[str, Any]:
        reply: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._model_name(body),
            "choices": []
            if empty
            else [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.text},
                    "finish_reason": answer.stop,
                }
            ],
            "usage": {
                "prompt_tokens": answer.input_tokens,
                "completion_tokens": answer.output_tokens,
                "total_tokens": answer.input_tokens + answer.output_tokens,
            },
        }
        if self.system_fingerprint is not None:
            reply["system_fingerprint"] = self.system_fingerprint
        return reply

    def _anthropic_reply(self, body: dict[str, Any], answer: _Answer, empty: bool = False) -> dict[str, Any]:
        reply: dict[str, Any] = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": self._model_name(body),
            "content": [{"type": "text", "text": answer.text}],
            "stop_reason": {"stop": "end_turn", "length": "max_tokens"}.get(answer.stop, answer.stop),
            "stop_sequence": None,
            "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
        }
        if empty:
            del reply["content"]
        return reply

    # --- batches -------------------------------------------------------------------------

    def _new_file(self, filename: str, purpose: str, content: bytes) -> dict[str, Any]:
        file_id = f"file-fake{self._next_id()}"
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }
        with self._batch_lock:
            self._files[file_id] = {**obj, "_content": content}
        return obj

    def _advance_batches(self) -> None:
        """Finish every batch whose time has come; each line is answered exactly once."""
        with self._batch_lock:
            now = time.monotonic()
            for batch in self._batches.values():
                if batch.ended_wall is None and (batch.cancel_wall is not None or now >= batch.due):
                    self._finish_batch(batch)

    def _finish_batch(self, batch: _Batch) -> None:
        batch.ended_wall = time.time()
        if batch.validation_errors:
            return
        if batch.cancel_wall is not None:
            batch.canceled = len(batch.lines)
            batch.results = [{"custom_id": cid, "result": {"type": "canceled"}} for cid, _ in batch.lines]
            return
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for custom_id, body in batch.lines:
            n = self._next_id()
            failure = "failed on purpose (batch_fail_ids)" if custom_id in self.batch_fail_ids else None
            answer = None
            if failure is None:
                try:
                    answer = self._answer(body)
                except Exception as err:  # a raising responder fails just that line
                    failure = f"responder failed: {err}"
            if batch.provider == "anthropic":
                if answer is None:
                    error = {"type": "api_error", "message": failure}
                    result = {"type": "errored", "error": {"type": "error", "error": error}}
                else:
                    result = {"type": "succeeded", "message": self._anthropic_reply(body, answer)}
                batch.results.append({"custom_id": custom_id, "result": result})
            elif answer is None:
                line: dict[str, Any] = {"id": f"batch_req_{n}", "custom_id": custom_id}
                if self.batch_fail_shape == "error":
                    line |= {"response": None, "error": {"code": "server_error", "message": failure}}
                else:
                    error = {"message": failure, "type": "server_error", "param": None, "code": None}
                    line["response"] = {
                        "status_code": 500,
                        "request_id": f"req_{n}",
                        "body": {"error": error},
                    }
                    line["error"] = None
                errors.append(line)
            else:
                response = {
                    "status_code": 200,
                    "request_id": f"req_{n}",
                    "body": self._openai_reply(body, answer),
                }
                outputs.append(
                    {"id": f"batch_req_{n}", "custom_id": custom_id, "response": response, "error": None}
                )
            if answer is None:
                batch.failed += 1
            else:
                batch.succeeded += 1
                self._count_answer(request_fingerprint(body), None, 0)
        if batch.provider == "openai":

            def jsonl(lines: list[dict[str, Any]]) -> bytes:
                return b"".join(_dumps(line) + b"\n" for line in lines)

            if outputs:
                name = f"{batch.id}_output.jsonl"
                batch.output_file_id = self._new_file(name, "batch_output", jsonl(outputs))["id"]
            if errors:
                name = f"{batch.id}_error.jsonl"
                batch.error_file_id = self._new_file(name, "batch_output", jsonl(errors))["id"]

    def _openai_batch_object(self, batch: _Batch) -> dict[str, Any]:
        created = int(batch.created_wall)
        ended = None if batch.ended_wall is None else int(batch.ended_wall)
        total = len(batch.lines)
        obj: dict[str, Any] = {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "input_file_id": batch.input_file_id,
            "completion_window": batch.completion_window,
            "created_at": created,
            "expires_at": created + _DAY_S,
            "in_progress_at": None,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "expired_at": None,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "errors": None,
            "metadata": batch.metadata,
            "request_counts": {"total": total, "completed": batch.succeeded, "failed": batch.failed},
        }
        if batch.validation_errors:
            obj["status"] = "failed" if ended is not None else "validating"
            obj["failed_at"] = ended
            if ended is not None:
                obj["errors"] = {"object": "list", "data": batch.validation_errors}
                obj["request_counts"] = {"total": 0, "completed": 0, "failed": 0}
        elif batch.cancel_wall is not None:
            obj["cancelling_at"] = int(batch.cancel_wall)
            obj["status"] = "cancelled" if batch.polled and ended is not None else "cancelling"
            if obj["status"] == "cancelled":
                obj["cancelled_at"] = ended
        elif ended is not None:
            obj |= {"status": "completed", "in_progress_at": created, "finalizing_at": ended}
            obj["completed_at"] = ended
        else:
            obj["status"] = "in_progress" if batch.polled else "validating"
            obj["in_progress_at"] = created if batch.polled else None
        return obj

    def _anthropic_batch_object(self, batch: _Batch) -> dict[str, Any]:
        ended = batch.ended_wall is not None and (batch.cancel_wall is None or batch.polled)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            counts |= {"succeeded": batch.succeeded, "errored": batch.failed, "canceled": batch.canceled}
        else:
            counts["processing"] = len(batch.lines)
        if ended:
            status = "ended"
        else:
            status = "canceling" if batch.cancel_wall is not None else "in_progress"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": _rfc3339(batch.created_wall),
            "expires_at": _rfc3339(batch.created_wall + _DAY_S),
            "ended_at": _rfc3339(batch.ended_wall) if ended else None,
            "cancel_initiated_at": _rfc3339(batch.cancel_wall),
            "archived_at": None,
            "results_url": f"{self.root_url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    def _create_batch(
        self, provider: Literal["openai", "anthropic"], lines: list[tuple[str, dict[str, Any]]], **extra: Any
    ) -> _Batch:
        prefix = "batch_fake" if provider == "openai" else "msgbatch_fake"
        batch = _Batch(
            provider=provider,
            id=f"{prefix}{self._next_id()}",
            created_wall=time.time(),
            due=time.monotonic() + self.batch_complete_after_s,
            lines=lines,
            **extra,
        )
        with self._batch_lock:
            self._batches[batch.id] = batch
        with self._lock:
            ids = tuple(cid for cid, _ in lines)
            self._submissions.append(BatchSubmission(provider, batch.id, ids, time.monotonic()))
        return batch

    def _parse_openai_input(
        self, content: bytes, endpoint: str
    ) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
        lines: list[tuple[str, dict[str, Any]]] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        for number, text in enumerate(content.decode("utf-8", "replace").splitlines(), start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
                custom_id, body = str(line["custom_id"]), dict(line["body"])
            except (ValueError, KeyError, TypeError):
                errors.append({"code": "invalid_json_line", "message": "bad line", "line": number})
                continue
            if line.get("url") != endpoint or line.get("method", "POST") != "POST":
                message = f"url {line.get('url')!r} does not match endpoint {endpoint!r}"
                errors.append({"code": "mismatched_url", "message": message, "line": number})
            if custom_id in seen:
                message = f"duplicate custom_id {custom_id!r}"
                errors.append({"code": "duplicate_custom_id", "message": message, "line": number})
            seen.add(custom_id)
            lines.append((custom_id, body))
        if not lines and not errors:
            errors.append({"code": "empty_file", "message": "the input file has no requests", "line": None})
        return lines, errors

    # --- request handling -------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # keep test output clean

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                self._dispatch("POST")

            def do_GET(self) -> None:  # noqa: N802
                self._dispatch("GET")

            def do_DELETE(self) -> None:  # noqa: N802
                self._dispatch("DELETE")

            # --- plumbing ---------------------------------------------------------------

            def _dispatch(self, method: str) -> None:
                server._enter()
                try:
                    self._handle(method)
                except OSError:
                    self.close_connection = True  # the client went away mid-answer
                finally:
                    server._leave()

            def _read_raw(self) -> bytes:
                if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("content-length") or 0)
                return self.rfile.read(length) if length else b""

            def _handle(self, method: str) -> None:
                raw = self._read_raw()
                headers = {k.lower(): v for k, v in self.headers.items()}
                path, _, query = self.path.partition("?")
                content_type = headers.get("content-type", "")
                body: dict[str, Any]
                multipart: dict[str, Any] = {}
                if content_type.startswith("multipart/form-data"):
                    multipart = _parse_multipart(content_type, raw)
                    body = {
                        k: {"filename": v["filename"], "bytes": len(v["content"])}
                        if isinstance(v, dict)
                        else v
                        for k, v in multipart.items()
                    }
                else:
                    try:
                        body = json.loads(raw or b"{}")
                    except ValueError:
                        body = {"_raw": raw.decode("utf-8", "replace")}
                    if not isinstance(body, dict):
                        body = {"_json": body}
                server._record(RecordedRequest(path, headers, body, method, query))
                anthropic = path.startswith("/v1/messages")
                route = self._route(method, path)
                if route is None:
                    self._send(404, {"error": {"message": f"no route {method} {path}"}})
                    return
                forced = server._pop_forced()
                if forced == _DROP:
                    server._count_chaos("drop")
                    self._drop()
                    return
                if forced is not None:
                    self._error(int(forced), "forced failure", headers, anthropic)
                    return
                if server.valid_keys is not None and self._api_key(headers) not in server.valid_keys:
                    if anthropic:
                        self._error(401, "invalid x-api-key", headers, True)
                    else:
                        self._error(401, "Incorrect API key provided", headers, False)
                    return
                handler, args = route
                handler(body, headers, multipart, *args)

            def _route(self, method: str, path: str) -> tuple[Callable[..., None], tuple[str, ...]] | None:
                table: list[tuple[str, str, Callable[..., None]]] = [
                    ("POST", r"/v1/chat/completions", self._chat_openai),
                    ("POST", r"/v1/messages", self._chat_anthropic),
                    ("POST", r"/v1/files", self._file_upload),
                    ("GET", r"/v1/files/([^/]+)", self._file_get),
                    ("GET", r"/v1/files/([^/]+)/content", self._file_content),
                    ("POST", r"/v1/batches", self._openai_batch_create),
                    ("GET", r"/v1/batches", self._openai_batch_list),
                    ("GET", r"/v1/batches/([^/]+)", self._openai_batch_get),
                    ("POST", r"/v1/batches/([^/]+)/cancel", self._openai_batch_cancel),
                    ("POST", r"/v1/messages/batches", self._anthropic_batch_create),
                    ("GET", r"/v1/messages/batches", self._anthropic_batch_list),
                    ("GET", r"/v1/messages/batches/([^/]+)", self._anthropic_batch_get),
                    ("GET", r"/v1/messages/batches/([^/]+)/results", self._anthropic_batch_results),
                    ("POST", r"/v1/messages/batches/([^/]+)/cancel", self._anthropic_batch_cancel),
                ]
                for want, pattern, handler in table:
                    match = re.fullmatch(pattern, path)
                    if match and want == method:
                        return handler, match.groups()
                return None

            @staticmethod
            def _api_key(headers: dict[str, str]) -> str | None:
                if "x-api-key" in headers:
                    return headers["x-api-key"]
                auth = headers.get("authorization", "")
                return auth[len("bearer ") :].strip() if auth.lower().startswith("bearer ") else None

            # --- chat ---------------------------------------------------------------------

            def _chat_openai(self, body: dict[str, Any], headers: dict[str, str], _: Any) -> None:
                self._chat(body, headers, anthropic=False)

            def _chat_anthropic(self, body: dict[str, Any], headers: dict[str, str], _: Any) -> None:
                self._chat(body, headers, anthropic=True)

            def _respond(
                self, body: dict[str, Any], headers: dict[str, str], anthropic: bool
            ) -> _Answer | None:
                try:
                    return server._answer(body)
                except Exception as err:  # a raising responder simulates a server error
                    self._error(500, f"responder failed: {err}", headers, anthropic)
                    return None

            def _chat(self, body: dict[str, Any], headers: dict[str, str], anthropic: bool) -> None:
                answer = None
                if server.tpm is not None and server.tpm_counts == "used":
                    # the exact output size is needed before admission
                    answer = self._respond(body, headers, anthropic)
                    if answer is None:
                        return
                admitted_at, wait, which = server._admit(server._tokens(body, answer))
                if wait is not None:
                    self._rate_limited(wait, which, headers, anthropic)
                    return
                if answer is None:
                    answer = self._respond(body, headers, anthropic)
                    if answer is None:
                        return
                tokens = server._tokens(body, answer)
                kind = server._draw_chaos()
                if kind is not None:
                    server._count_chaos(kind)
                if kind in ("500", "503"):
                    self._error(int(kind), "chaos: injected server error", headers, anthropic)
                    return
                if kind == "drop":
                    self._drop()
                    return
                if kind == "malformed":
                    self._send_raw(200, b'{"content": [' if anthropic else b'{"choices": [')
                    return
                if kind == "timeout":
                    if server._stopping.wait(server.chaos_timeout_s):
                        self._drop()  # shutting down: leave without an answer
                        return
                elif server.latency_s > 0 and server._stopping.wait(server.latency_s):
                    self._drop()
                    return
                empty = kind == "empty_choices"
                if anthropic:
                    reply = server._anthropic_reply(body, answer, empty)
                else:
                    reply = server._openai_reply(body, answer, empty)
                payload = _dumps(reply)
                with server._lock:  # billed before the bytes go out, like an answer
                    server._billed.append((str(body.get("model")), answer.input_tokens, answer.output_tokens))
                if not empty:
                    # counted before the bytes go out, so a client that has its answer sees it
                    server._count_answer(request_fingerprint(body, headers), admitted_at, tokens)
                self._send_raw(200, payload)

            def _rate_limited(
                self, wait: float, which: str, headers: dict[str, str], anthropic: bool
            ) -> None:
                limit = server.rpm if which == "requests" else server.tpm
                unit = "requests" if which == "requests" else "tokens"
                message = (
                    f"Rate limit reached for {unit} per min: limit {limit:g}, "
                    f"enforced over {server.window_s:g} s. Please try again in {wait * 1000:.0f}ms."
                )
                extra = {}
                if server.retry_after_header:
                    extra = {"retry-after-ms": str(math.ceil(wait * 1000)), "retry-after": f"{wait:.3f}"}
                openai_type = "requests" if which == "requests" else "tokens"
                self._error(429, message, headers, anthropic, extra=extra, openai_type=openai_type)

            # --- files and OpenAI batches -----------------------------------------------

            def _file_upload(
                self, body: dict[str, Any], headers: dict[str, str], form: dict[str, Any]
            ) -> None:
                upload = form.get("file")
                if not isinstance(upload, dict):
                    self._error(400, "a multipart 'file' field is required", headers, False)
                    return
                purpose = str(form.get("purpose", "batch"))
                self._send(200, server._new_file(upload["filename"], purpose, upload["content"]))

            def _find_file(self, file_id: str, headers: dict[str, str]) -> dict[str, Any] | None:
                server._advance_batches()
                with server._batch_lock:
                    found = server._files.get(file_id)
                if found is None:
                    self._error(404, f"No such File object: {file_id}", headers, False)
                return found

            def _file_get(self, body: Any, headers: dict[str, str], _: Any, file_id: str) -> None:
                found = self._find_file(file_id, headers)
                if found is not None:
                    self._send(200, {k: v for k, v in found.items() if k != "_content"})

            def _file_content(self, body: Any, headers: dict[str, str], _: Any, file_id: str) -> None:
                found = self._find_file(file_id, headers)
                if found is not None:
                    self._send_raw(200, found["_content"], "application/octet-stream")

            def _openai_batch_create(self, body: dict[str, Any], headers: dict[str, str], _: Any) -> None:
                endpoint = str(body.get("endpoint", ""))
                input_file_id = str(body.get("input_file_id", ""))
                if endpoint != "/v1/chat/completions":
                    self._error(400, f"unsupported endpoint {endpoint!r}", headers, False)
                    return
                with server._batch_lock:
                    found = server._files.get(input_file_id)
                if found is None:
                    self._error(404, f"No such File object: {input_file_id}", headers, False)
                    return
                lines, errors = server._parse_openai_input(found["_content"], endpoint)
                batch = server._create_batch(
                    "openai",
                    lines,
                    endpoint=endpoint,
                    input_file_id=input_file_id,
                    completion_window=str(body.get("completion_window", "24h")),
                    metadata=body.get("metadata"),
                    validation_errors=errors,
                )
                with server._batch_lock:
                    reply = server._openai_batch_object(batch)
                self._send(200, reply)

            def _find_batch(
                self, batch_id: str, provider: str, headers: dict[str, str], poll: bool = False
            ) -> _Batch | None:
                server._advance_batches()
                with server._batch_lock:
                    batch = server._batches.get(batch_id)
                    if batch is None or batch.provider != provider:
                        self._error(404, f"No such batch: {batch_id}", headers, provider == "anthropic")
                        return None
                    if poll:
                        with server._lock:
                            server._batch_polls[batch_id] = server._batch_polls.get(batch_id, 0) + 1
                    return batch

            def _openai_batch_get(self, body: Any, headers: dict[str, str], _: Any, batch_id: str) -> None:
                batch = self._find_batch(batch_id, "openai", headers, poll=True)
                if batch is not None:
                    with server._batch_lock:
                        batch.polled = True
                        reply = server._openai_batch_object(batch)
                    self._send(200, reply)

            def _openai_batch_cancel(self, body: Any, headers: dict[str, str], _: Any, batch_id: str) -> None:
                batch = self._find_batch(batch_id, "openai", headers)
                if batch is not None:
                    with server._batch_lock:
                        if batch.ended_wall is None:
                            batch.cancel_wall = time.time()
                            batch.polled = False  # the cancel reply says "cancelling"
                            server._advance_batches()
                        reply = server._openai_batch_object(batch)
                    self._send(200, reply)

            def _openai_batch_list(self, body: Any, headers: dict[str, str], _: Any) -> None:
                server._advance_batches()
                with server._batch_lock:
                    data = [
                        server._openai_batch_object(b)
                        for b in reversed(server._batches.values())
                        if b.provider == "openai"
                    ]
                first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
                reply = {"object": "list", "data": data, "first_id": first, "last_id": last}
                self._send(200, reply | {"has_more": False})

            # --- Anthropic message batches ----------------------------------------------

            def _anthropic_batch_create(self, body: dict[str, Any], headers: dict[str, str], _: Any) -> None:
                requests = body.get("requests")
                if not isinstance(requests, list) or not requests:
                    self._error(400, "requests: a non-empty list is required", headers, True)
                    return
                lines: list[tuple[str, dict[str, Any]]] = []
                for item in requests:
                    if not isinstance(item, dict) or "custom_id" not in item or "params" not in item:
                        self._error(400, "each request needs custom_id and params", headers, True)
                        return
                    lines.append((str(item["custom_id"]), dict(item["params"])))
                ids = [cid for cid, _ in lines]
                if len(set(ids)) != len(ids):
                    self._error(400, "custom_id values must be unique within a batch", headers, True)
                    return
                batch = server._create_batch("anthropic", lines)
                with server._batch_lock:
                    reply = server._anthropic_batch_object(batch)
                self._send(200, reply)

            def _anthropic_batch_get(self, body: Any, headers: dict[str, str], _: Any, batch_id: str) -> None:
                batch = self._find_batch(batch_id, "anthropic", headers, poll=True)
                if batch is not None:
                    with server._batch_lock:
                        batch.polled = True
                        reply = server._anthropic_batch_object(batch)
                    self._send(200, reply)

            def _anthropic_batch_results(
                self, body: Any, headers: dict[str, str], _: Any, batch_id: str
            ) -> None:
                batch = self._find_batch(batch_id, "anthropic", headers)
                if batch is None:
                    return
                with server._batch_lock:
                    if batch.ended_wall is None:
                        self._error(400, f"batch {batch_id} is still in progress", headers, True)
                        return
                    data = b"".join(_dumps(line) + b"\n" for line in batch.results)
                self._send_raw(200, data, "application/binary")

            def _anthropic_batch_cancel(
                self, body: Any, headers: dict[str, str], _: Any, batch_id: str
            ) -> None:
                batch = self._find_batch(batch_id, "anthropic", headers)
                if batch is not None:
                    with server._batch_lock:
                        if batch.ended_wall is None:
                            batch.cancel_wall = time.time()
                            batch.polled = False  # the cancel reply says "canceling"
                            server._advance_batches()
                        reply = server._anthropic_batch_object(batch)
                    self._send(200, reply)

            def _anthropic_batch_list(self, body: Any, headers: dict[str, str], _: Any) -> None:
                server._advance_batches()
                with server._batch_lock:
                    data = [
                        server._anthropic_batch_object(b)
                        for b in reversed(server._batches.values())
                        if b.provider == "anthropic"
                    ]
                first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
                self._send(200, {"data": data, "has_more": False, "first_id": first, "last_id": last})

            # --- responses ----------------------------------------------------------------

            def _error(
                self,
                status: int,
                message: str,
                headers: dict[str, str],
                anthropic: bool,
                *,
                extra: dict[str, str] | None = None,
                openai_type: str | None = None,
            ) -> None:
                if server.echo_auth_in_errors:
                    auth = headers.get("authorization") or headers.get("x-api-key") or ""
                    message = f"{message}; you sent credentials {auth}"
                if anthropic:
                    kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
                    payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
                else:
                    kind = openai_type or _OPENAI_ERROR_TYPES.get(
                        status, "server_error" if status >= 500 else "invalid_request_error"
                    )
                    error = {"message": message, "type": kind, "param": None}
                    payload = {"error": error | {"code": _OPENAI_ERROR_CODES.get(status)}}
                if extra is None:
                    # tiny retry-after keeps SDK backoff (0.5 s and up by default) out of tests
                    extra = {"retry-after-ms": "1", "retry-after": "0"}
                self._send(status, payload, extra)

            def _drop(self) -> None:
                """Close the connection without a response (the SDK sees a connection error)."""
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def _send(
                self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None
            ) -> None:
                self._send_raw(status, _dumps(payload), "application/json", extra)

            def _send_raw(
                self,
                status: int,
                data: bytes,
                content_type: str = "application/json",
                extra: dict[str, str] | None = None,
            ) -> None:
                server._count_status(status)
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                request_id = f"req_fake{server._next_id()}"
                self.send_header("x-request-id", request_id)
                self.send_header("request-id", request_id)
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextmanager
def running_fake_server(responder: Responder, **options: Any) -> Iterator[FakeModelServer]:
    """Start a server on an ephemeral port for the duration of the block.

    ``options`` are ``FakeModelServer``'s keyword options (``echo_auth_in_errors``, ``rpm``...).
    """
    server = FakeModelServer(responder, **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()
