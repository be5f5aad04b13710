"""A real HTTP server on 127.0.0.1 that speaks just enough OpenAI and Anthropic.

Tests drive the official SDKs over real sockets against it, so retries, headers and
response parsing are exercised as in production, with no network and no real key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: a responder returns the reply text, or (text, "stop" | "length")
Reply = str | tuple[str, str]
Responder = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]


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


class FakeModelServer:
    """State shared by the handler threads: the responder, recorded requests, failures."""

    def __init__(self, responder: Responder, *, echo_auth_in_errors: bool = False) -> None:
        self.responder = responder
        #: put the request's auth headers into error bodies, like a careless proxy might,
        #: to prove clients scrub keys from error messages
        self.echo_auth_in_errors = echo_auth_in_errors
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._fail_next: list[int] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        # a short poll interval keeps shutdown (and so each test) fast
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

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

    def fail_next(self, n: int, status: int = 429) -> None:
        """Answer the next ``n`` requests with ``status`` (and a 1 ms retry-after)."""
        with self._lock:
            self._fail_next.extend([status] * n)

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- request handling -------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> int | None:
        with self._lock:
            self.requests.append(request)
            return self._fail_next.pop(0) if self._fail_next else None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # keep test output clean

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                headers = {k.lower(): v for k, v in self.headers.items()}
                path = self.path.split("?", 1)[0]
                forced = server._record(RecordedRequest(path, headers, body))
                if path not in ("/v1/chat/completions", "/v1/messages"):
                    self._send(404, {"error": {"message": f"no route {path}"}})
                    return
                anthropic = path == "/v1/messages"
                if forced is not None:
                    self._error(forced, "forced failure", headers, anthropic)
                    return
                try:
                    reply = server.responder(body)
                except Exception as err:  # a raising responder simulates a server error
                    self._error(500, f"responder failed: {err}", headers, anthropic)
                    return
                text, stop = (reply, "stop") if isinstance(reply, str) else reply
                if anthropic:
                    self._send(200, self._anthropic_reply(body, text, stop))
                else:
                    self._send(200, self._openai_reply(body, text, stop))

            def _openai_reply(self, body: dict[str, Any], text: str, stop: str) -> dict[str, Any]:
                prompt, completion = _prompt_words(body), _words(text)
                return {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": stop,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                }

            def _anthropic_reply(self, body: dict[str, Any], text: str, stop: str) -> dict[str, Any]:
                return {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "fake"),
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": {"stop": "end_turn", "length": "max_tokens"}.get(stop, stop),
                    "stop_sequence": None,
                    "usage": {"input_tokens": _prompt_words(body), "output_tokens": _words(text)},
                }

            def _error(self, status: int, message: str, headers: dict[str, str], anthropic: bool) -> None:
                if server.echo_auth_in_errors:
                    auth = headers.get("authorization") or headers.get("x-api-key") or ""
                    message = f"{message}; you sent credentials {auth}"
                if anthropic:
                    kind = "rate_limit_error" if status == 429 else "api_error"
                    payload = {"type": "error", "error": {"type": kind, "message": message}}
                else:
                    payload = {"error": {"message": message, "type": "server_error"}}
                # tiny retry-after keeps SDK backoff (0.5 s and up by default) out of tests
                self._send(status, payload, {"retry-after-ms": "1", "retry-after": "0"})

            def _send(
                self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextmanager
def running_fake_server(
    responder: Responder, *, echo_auth_in_errors: bool = False
) -> Iterator[FakeModelServer]:
    """Start a server on an ephemeral port for the duration of the block."""
    server = FakeModelServer(responder, echo_auth_in_errors=echo_auth_in_errors)
    server.start()
    try:
        yield server
    finally:
        server.stop()
