"""A fake OpenAI-compatible chat server for tests: real HTTP, scripted answers.

In tests, use the ``fake_llm`` fixture; it starts a server on 127.0.0.1 and points
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``EHR_MAGIC_MODEL`` at it::

    def test_answer(fake_llm):
        fake_llm.enqueue("SELECT 1")                               # next answer
        fake_llm.enqueue(FakeReply(status=429, headers={"Retry-After": "0.2"}))
        fake_llm.responder = lambda req: "fixed" if "Traceback" in str(req) else "buggy"
        ...
        assert fake_llm.requests[0].json["model"] == "fake-model"

Queued replies are used first, in order; then ``responder(request_json)``; with neither,
the server answers 500 with a message saying so (and the fixture fails the test).

Routes: ``POST /v1/chat/completions`` (also ``/chat/completions``), Azure's
``POST /openai/deployments/{deployment}/chat/completions?api-version=...`` and
``GET /v1/models``. Streaming follows OpenAI's SSE format, including the usage chunk
when the request asks for ``stream_options.include_usage``.

Standalone, for notebook or browser tests::

    python tests/fake_llm.py --port 8765 --script replies.json

where the script is a JSON list whose items are a reply (a string, or an object of
``FakeReply`` fields such as ``{"text": "...", "status": 429}``) queued in order, or a
rule ``{"if_contains": "Traceback", "reply": ...}`` matched against the text of the
request's messages, or ``{"default": reply}`` used when nothing else applies.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Union
from urllib.parse import parse_qsl, urlsplit

try:
    import pytest
except ImportError:  # standalone use without pytest
    pytest = None  # type: ignore[assignment]

_AZURE_ROUTE = re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$")
_CHAT_ROUTES = ("/v1/chat/completions", "/chat/completions")


@dataclass
class FakeReply:
    """One scripted answer.

    ``text``: the assistant message (for an error status: the error message).
    ``status``/``headers``: HTTP status and extra headers (e.g. ``Retry-After``).
    ``delay``: seconds to wait before answering (to provoke client timeouts).
    ``body``: raw body that replaces everything (e.g. malformed JSON), sent as ``content_type``.
    ``truncate_stream``: drop the connection halfway through a streamed answer.
    ``empty_choices``: answer with ``choices: []``.
    ``usage``: include token usage (``True``: computed, a dict: these numbers, ``False``: none).
    ``finish_reason``: ``None`` omits it (a stream that never says it finished).
    ``chunk_delay``: seconds between streamed chunks.
    """

    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: str | bytes | None = None
    content_type: str = "application/json"
    truncate_stream: bool = False
    empty_choices: bool = False
    usage: bool | dict[str, int] = True
    finish_reason: str | None = "stop"
    chunk_delay: float = 0.0


Reply = Union[str, FakeReply]
Responder = Callable[[dict[str, Any]], Reply]


def as_reply(value: Any) -> FakeReply:
    """A ``FakeReply`` from a string, a ``FakeReply`` or a dict of its fields."""
    if isinstance(value, FakeReply):
        return value
    if isinstance(value, str):
        return FakeReply(text=value)
    if isinstance(value, dict):
        known = {f.name for f in fields(FakeReply)}
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"Unknown FakeReply fields {sorted(unknown)}; known: {sorted(known)}")
        return FakeReply(**value)
    raise TypeError(f"A reply must be a str, a FakeReply or a dict, not {type(value).__name__}")


def messages_text(request_json: dict[str, Any] | None) -> str:
    """All message contents of a chat request, joined by newlines."""
    parts = []
    for message in (request_json or {}).get("messages", []) or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if content:
            parts.append(str(content))
    return "\n".join(parts)


@dataclass
class FakeRequest:
    """One request as received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    json: dict[str, Any] | None
    raw: bytes
    received_at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the request arrived (to measure client backoff)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.json or {}).get("messages", []))

    @property
    def text(self) -> str:
        """All message contents joined: what a ``responder`` usually matches against."""
        return messages_text(self.json)

    @property
    def last_user_message(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return str(message.get("content") or "")
        return ""


class NoMatchingRule(LookupError):
    """Raised by a responder that has no reply for a request (the server answers 500)."""


class RuleResponder:
    """Choose a reply by substring rules: ``[(needle, reply), ...]`` checked in order
    against the request's message text, else ``default``."""

    def __init__(self, rules: list[tuple[str, Reply]], default: Reply | None = None) -> None:
        self.rules = rules
        self.default = default

    def __call__(self, request_json: dict[str, Any]) -> Reply:
        text = messages_text(request_json)
        for needle, reply in self.rules:
            if needle in text:
                return reply
        if self.default is None:
            raise NoMatchingRule("no rule matches the request and there is no default reply")
        return self.default


def _count_tokens(text: str) -> int:
    return len(text.split())


def _stream_pieces(text: str) -> list[str]:
    """Split text into word-sized pieces that join back to the exact text."""
    return re.findall(r"\S+\s*|\s+", text)


class FakeLLMServer:
    """The fake server. ``start()`` / ``stop()``, or use it as a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._queue: deque[FakeReply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.responder: Responder | None = None
        self.requests: list[FakeRequest] = []
        # GET /props reports it as n_ctx, as llama.cpp's server does (None: 404)
        self.context_window: int | None = 32_768
        self.unscripted: list[FakeRequest] = []
        """Requests that found no reply (answered 500)."""
        self.responder_errors: list[str] = []
        """Exceptions raised by ``responder`` (answered 500)."""
        self._httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Azure endpoint form)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the OpenAI base URL form)."""
        return f"{self.root_url}/v1"

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes replies sleeping in `delay`
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ scripting

    def enqueue(self, *replies: Reply) -> FakeLLMServer:
        """Queue replies, used in order before any ``responder``."""
        with self._lock:
            self._queue.extend(as_reply(r) for r in replies)
        return self

    @property
    def pending(self) -> int:
        """Queued replies not used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def last_request(self) -> FakeRequest:
        return self.requests[-1]

    def chat_requests(self) -> list[FakeRequest]:
        return [r for r in self.requests if r.method == "POST"]

    def _next_reply(self, request: FakeRequest) -> FakeReply | str | None:
        """The reply to send; a str is an error message for a 500 (a broken responder)."""
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        if responder is not None:
            try:
                return as_reply(responder(request.json or {}))
            except NoMatchingRule:
                pass
            except Exception as exc:  # noqa: BLE001 - boundary: a bug in the test's responder is reported
                message = f"FakeLLMServer responder raised {type(exc).__name__}: {exc}"
                with self._lock:
                    self.responder_errors.append(message)
                return message
        with self._lock:
            self.unscripted.append(request)
        return None


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeLLM/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def setup(self) -> None:
            super().setup()
            # many small SSE writes: without this, Nagle + delayed ACK add ~40 ms per answer
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def handle(self) -> None:
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                pass  # the client gave up (timeout tests): nothing to answer

        # -------------------------------------------------------------- routing

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/props" and server.context_window:  # llama.cpp's server: where the window is read
                self._json(200, {"default_generation_settings": {"n_ctx": server.context_window}})
            elif path in ("/v1/models", "/models"):
                self._json(200, {"object": "list",
                                 "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}]})
            else:
                self._error(404, f"FakeLLMServer has no GET route {path}")

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                payload = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                payload = None
            request = FakeRequest(
                method="POST",
                path=parts.path,
                query=dict(parse_qsl(parts.query)),
                headers={k.lower(): v for k, v in self.headers.items()},
                json=payload if isinstance(payload, dict) else None,
                raw=raw,
            )
            azure = _AZURE_ROUTE.match(parts.path)
            if parts.path not in _CHAT_ROUTES and not azure:
                server.requests.append(request)
                self._error(404, f"FakeLLMServer has no route POST {parts.path}")
                return
            if azure and "api-version" not in request.query:
                server.requests.append(request)
                self._error(400, "Azure requests need an api-version query parameter")
                return
            if request.json is None:
                server.requests.append(request)
                self._error(400, "The request body is not a JSON object")
                return

            reply = server._next_reply(request)
            if isinstance(reply, str):
                self._error(500, reply)
                return
            if reply is None:
                self._error(
                    500,
                    f"FakeLLMServer has no reply for request #{len(server.requests)} "
                    f"(last user message: {request.last_user_message[:80]!r}): "
                    "call server.enqueue(...) or set server.responder.",
                )
                return
            if reply.delay and server._stopping.wait(reply.delay):
                return
            if reply.body is not None:
                body = reply.body.encode() if isinstance(reply.body, str) else reply.body
                self._send(reply.status, body, reply.content_type, reply.headers)
            elif reply.status >= 400:
                message = reply.text or f"fake error {reply.status}"
                self._error(reply.status, message, reply.headers)
            elif request.json.get("stream"):
                self._stream(request, reply)
            else:
                self._json(reply.status, self._completion(request, reply), reply.headers)

        # -------------------------------------------------------------- bodies

        def _usage(self, request: FakeRequest, reply: FakeReply) -> dict[str, int] | None:
            if reply.usage is False:
                return None
            if isinstance(reply.usage, dict):
                usage = dict(reply.usage)
            else:
                usage = {
                    "prompt_tokens": _count_tokens(request.text),
                    "completion_tokens": _count_tokens(reply.text),
                }
            usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
            return usage

        def _completion(self, request: FakeRequest, reply: FakeReply) -> dict[str, Any]:
            body: dict[str, Any] = {
                "id": f"chatcmpl-fake-{len(server.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": (request.json or {}).get("model", "fake-model"),
                "choices": [] if reply.empty_choices else [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.text},
                        "finish_reason": reply.finish_reason,
                        "logprobs": None,
                    }
                ],
            }
            usage = self._usage(request, reply)
            if usage is not None:
                body["usage"] = usage
            return body

        def _chunks(self, request: FakeRequest, reply: FakeReply) -> Iterator[dict[str, Any]]:
            base = {
                "id": f"chatcmpl-fake-{len(server.requests)}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": (request.json or {}).get("model", "fake-model"),
            }
            if reply.empty_choices:
                yield {**base, "choices": []}
                return
            yield {**base,
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
            for piece in _stream_pieces(reply.text):
                yield {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            if reply.finish_reason is not None:
                yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]}
            options = (request.json or {}).get("stream_options") or {}
            usage = self._usage(request, reply)
            if options.get("include_usage") and usage is not None:
                yield {**base, "choices": [], "usage": usage}

        def _stream(self, request: FakeRequest, reply: FakeReply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            chunks = list(self._chunks(request, reply))
            # truncate: keep the role chunk and about half the text, then drop the connection
            cut = max(2, len(chunks) // 2) if reply.truncate_stream else None
            for i, chunk in enumerate(chunks):
                if cut is not None and i >= cut:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                if reply.chunk_delay and server._stopping.wait(reply.chunk_delay):
                    return
            self._write_chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json", headers or {})

        def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
            kind = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status, "fake_error")
            error = {"message": message, "type": kind, "param": None, "code": kind}
            self._json(status, {"error": error}, headers)

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

    return Handler


# --------------------------------------------------------------------------- pytest

if pytest is not None:

    @pytest.fixture
    def fake_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
        """A running ``FakeLLMServer`` with the OpenAI environment pointing at it.

        Fails the test if a request found no scripted reply (set
        ``server.unscripted.clear()`` in a test that expects that).
        """
        server = FakeLLMServer().start()
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("EHR_MAGIC_MODEL", "fake-model")
        for var in ("AZURE_OPENAI_API_VERSION", "AZURE_OPENAI_AD_TOKEN", "OPENAI_ORG_ID",
                    "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS"):
            monkeypatch.delenv(var, raising=False)
        try:
            yield server
        finally:
            server.stop()
        if server.responder_errors:
            pytest.fail(server.responder_errors[0], pytrace=False)
        if server.unscripted:
            pytest.fail(
                f"FakeLLMServer got {len(server.unscripted)} request(s) with no scripted reply; first one: "
                f"{server.unscripted[0].last_user_message[:200]!r}",
                pytrace=False,
            )


# --------------------------------------------------------------------------- standalone


def load_script(path: Path) -> tuple[list[FakeReply], RuleResponder | None]:
    """Read a script file: queued replies, and rules (+ default) as a responder."""
    items = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(items, list):
        raise ValueError(f"{path}: the script must be a JSON list of replies and rules")
    queued: list[FakeReply] = []
    rules: list[tuple[str, Reply]] = []
    default: Reply | None = None
    for item in items:
        if isinstance(item, dict) and "if_contains" in item:
            rules.append((str(item["if_contains"]), as_reply(item["reply"])))
        elif isinstance(item, dict) and set(item) == {"default"}:
            default = as_reply(item["default"])
        else:
            queued.append(as_reply(item))
    responder = RuleResponder(rules, default) if rules or default is not None else None
    return queued, responder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a fake OpenAI-compatible chat server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on start)")
    parser.add_argument("--script", type=Path, help="JSON list of replies / rules (see module docstring)")
    args = parser.parse_args(argv)

    server = FakeLLMServer(args.host, args.port)
    if args.script:
        queued, responder = load_script(args.script)
        server.enqueue(*queued)
        server.responder = responder
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    server.start()
    print(f"FakeLLMServer listening on {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
