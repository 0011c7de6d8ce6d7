"""A misbehaving stand-in for an OpenAI-compatible server, run as a process by the openai backend tests.

Usage: ``python openai_standin.py PORT MODE [ARG]``. Modes (every POST):

- ``ok``: a valid answer after ARG seconds (default 0);
- ``hang``: reads the request and never answers;
- ``close``: closes the connection without answering;
- ``flaky``: HTTP 503 for the first ARG requests, then ``ok``;
- ``bad_request``: HTTP 400 with a vLLM-style error body;
- ``garbage``: HTTP 200 with a body that is not JSON;
- ``no_lora``: like ``ok`` but the LoRA endpoints are missing (404);
- ``die``: like ``ok`` for the first ARG requests, then the process exits (a server that dies mid-run).

``GET /v1/models`` lists one model; ``GET /stats`` returns ``{"posts": n, "max_in_flight": k}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODE = sys.argv[2]
ARG = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
STATE = {"posts": 0, "in_flight": 0, "max_in_flight": 0}
LOCK = threading.Lock()

COMPLETION = {
    "choices": [
        {
            "index": 0,
            "text": "hi",
            "finish_reason": "stop",
            "token_ids": [5, 6],
            "logprobs": {"tokens": ["token_id:5", "token_id:6"], "token_logprobs": [-0.5, -0.25]},
        }
    ],
    "usage": {"prompt_tokens": 3},
}
CHAT = {
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "ping", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "ping", "arguments": "{oops"}},
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 4},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/stats":
            with LOCK:
                self._send(200, json.dumps(STATE).encode())
        else:
            self._send(200, json.dumps({"data": [{"id": "standin"}]}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with LOCK:
            STATE["posts"] += 1
            STATE["in_flight"] += 1
            STATE["max_in_flight"] = max(STATE["max_in_flight"], STATE["in_flight"])
            count = STATE["posts"]
        try:
            self._answer(count)
        finally:
            with LOCK:
                STATE["in_flight"] -= 1

    def _answer(self, count: int) -> None:
        if MODE == "die" and count > ARG:
            os._exit(0)
        if MODE == "hang":
            time.sleep(3600)
        elif MODE == "close":
            self.close_connection = True
        elif MODE == "flaky" and count <= ARG:
            self._send(503, b'{"error": {"message": "warming up"}}')
        elif MODE == "bad_request":
            message = "This model's maximum context length is 2048 tokens. However, your prompt contains 3000"
            self._send(400, json.dumps({"error": {"message": message, "code": 400}}).encode())
        elif MODE == "garbage":
            self._send(200, b"<html>proxy error</html>", "text/html")
        elif MODE == "no_lora" and "lora" in self.path:
            self._send(404, b'{"detail": "Not Found"}')
        else:
            if MODE == "ok":
                time.sleep(ARG)
            self._send(200, json.dumps(CHAT if "chat" in self.path else COMPLETION).encode())


if __name__ == "__main__":
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
