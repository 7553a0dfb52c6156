"""A mock OpenAI-compatible server for tests and benchmarks (FastAPI + uvicorn, 127.0.0.1).

``/v1/chat/completions`` answers with ``answer(messages)`` (a string, or a dict with
``tool_calls``), with per-token logprobs (one token per character; spelled ``token_id:N``
when the request asks for vLLM's ``return_tokens_as_token_ids``).  ``/v1/completions``
takes a prompt of token ids and answers with ``complete(prompt_ids)`` ids, returning
``token_ids`` (vLLM ``return_token_ids``) and ``token_id:N`` logprob tokens; with
``prompt_logprob`` set, an ``echo`` request also gets the prompt's log-probs first.  Every
response waits ``latency_s`` first.  Faults are queued and consumed one per request:
``"500"`` (HTTP 500), ``"timeout"`` (never answers in time), ``"garbage"`` (HTTP 200, not
JSON), ``"nochoices"`` (JSON without choices).

In-process: ``with MockOpenAI(answer=...) as m: m.base_url``.  As a separate process
(benchmarks, so the server does not share the client's interpreter lock):
``python -m tests._mock_openai --port N --latency 0.05 --answer guess`` (``--raw``: the
same chat completions from a bare asyncio server, for the benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

Answer = Callable[[list[dict[str, Any]]], Any]


def echo_answer(messages: list[dict[str, Any]]) -> str:
    return str(messages[-1].get("content", "")) if messages else ""


def guess_answer(messages: list[dict[str, Any]]) -> str:
    """Binary search on ``higher`` / ``lower`` hints (works for the fakes and the benchmark env)."""
    lo, hi, last = 0, 7, None
    for m in messages:
        c = str(m.get("content", ""))
        if m["role"] == "assistant":
            digits = "".join(ch for ch in c if ch.isdigit())
            last = int(digits) if digits else None
        elif last is not None and "higher" in c.lower():
            lo = last + 1
        elif last is not None and "lower" in c.lower():
            hi = last - 1
    return str((lo + hi) // 2)


ANSWERS: dict[str, Answer] = {"echo": echo_answer, "guess": guess_answer}


def make_app(mock: MockOpenAI) -> Any:
    app = FastAPI()

    async def fault() -> Response | None:
        mock.requests += 1
        if mock.latency_s:
            await asyncio.sleep(mock.latency_s)
        f = mock.faults.pop(0) if mock.faults else None
        if f == "500":
            return JSONResponse({"error": {"message": "injected failure"}}, status_code=500)
        if f == "timeout":
            await asyncio.sleep(mock.hang_s)
            return JSONResponse({"error": {"message": "too late"}}, status_code=504)
        if f == "garbage":
            return Response(b"\x00not json{", media_type="application/json")
        if f == "nochoices":
            return JSONResponse({"id": "x", "object": "chat.completion", "unexpected": True})
        if f == "nullcontent":  # a reply with neither text nor tool calls
            return JSONResponse({"id": "x", "object": "chat.completion", "created": 0, "model": mock.model,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": None},
                                              "finish_reason": "stop"}]})
        return None

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": mock.model, "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        mock.bodies.append(body)
        bad = await fault()
        if bad is not None:
            return bad
        out = mock.answer(body["messages"])
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        message: dict[str, Any] = {"role": "assistant", "content": out if isinstance(out, str) else out.get("content")}
        finish = "stop"
        if isinstance(out, dict) and out.get("tool_calls"):
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for i, c in enumerate(out["tool_calls"])
            ]
            finish = "tool_calls"
        text = message["content"] or ""
        logprobs = None
        if body.get("logprobs"):
            logprobs = {"content": [
                {"token": f"token_id:{ord(ch)}" if as_ids else ch, "logprob": -0.5, "bytes": None, "top_logprobs": []}
                for ch in text
            ]}
        return {
            "id": f"chatcmpl-{mock.requests}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", mock.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(text), "total_tokens": 1 + len(text)},
        }

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        body = await request.json()
        mock.bodies.append(body)
        bad = await fault()
        if bad is not None:
            return bad
        prompt = body["prompt"]
        if not (isinstance(prompt, list) and all(isinstance(i, int) for i in prompt)):
            return JSONResponse({"error": {"message": "mock completions takes token ids"}}, status_code=400)
        ids = list(mock.complete(prompt))
        choice: dict[str, Any] = {
            "index": 0, "text": "", "finish_reason": "stop",
            "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.5] * len(ids),
                         "text_offset": list(range(len(ids))), "top_logprobs": None},
        }
        if body.get("echo") and mock.prompt_logprob is not None:
            # vLLM's echo: the prompt's tokens first (the first has no log-prob), then the completion's
            lp = choice["logprobs"]
            lp["tokens"] = [f"token_id:{i}" for i in prompt] + lp["tokens"]
            lp["token_logprobs"] = [None, *(mock.prompt_logprob(prompt[:k], prompt[k]) for k in range(1, len(prompt))),
                                    *lp["token_logprobs"]]
            lp["text_offset"] = list(range(len(lp["tokens"])))
        if body.get("return_token_ids") and mock.token_ids_field:
            choice["token_ids"] = ids
        return {"id": f"cmpl-{mock.requests}", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model", mock.model), "choices": [choice],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "total_tokens": len(prompt) + len(ids)}}

    return app


class MockOpenAI:
    """The server in a background thread; a context manager (started, then stopped)."""

    def __init__(self, *, answer: Answer = echo_answer, complete: Callable[[Sequence[int]], Sequence[int]] | None = None,
                 latency_s: float = 0.0, model: str = "mock", hang_s: float = 30.0, token_ids_field: bool = True,
                 prompt_logprob: Callable[[Sequence[int], int], float] | None = None) -> None:
        self.answer, self.latency_s, self.model, self.hang_s = answer, latency_s, model, hang_s
        self.complete = complete or (lambda ids: [])
        self.token_ids_field = token_ids_field
        self.prompt_logprob = prompt_logprob
        """``(prefix ids, token) -> log-prob`` of each prompt token for ``echo`` requests; ``None``:
        echo is ignored (a server that gives no prompt log-probs)."""
        self.faults: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.requests = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> MockOpenAI:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(make_app(self), log_level="warning", timeout_graceful_shutdown=1, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("mock OpenAI server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


def chat_response(mock: MockOpenAI, body: dict[str, Any]) -> dict[str, Any]:
    """A plain chat completion (no tools, no faults) for the raw server below."""
    text = str(mock.answer(body["messages"]))
    logprobs = {"content": [{"token": ch, "logprob": -0.5, "bytes": None, "top_logprobs": []} for ch in text]} \
        if body.get("logprobs") else None
    return {"id": f"chatcmpl-{mock.requests}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", mock.model),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                         "logprobs": logprobs}],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(text), "total_tokens": 1 + len(text)}}


async def serve_raw(mock: MockOpenAI, port: int) -> None:
    """``/v1/chat/completions`` on a bare asyncio HTTP/1.1 server (keep-alive, Content-Length).

    For the benchmark: uvicorn without httptools parses HTTP in pure Python (h11) and
    costs about 1 ms of CPU per request, more than the agent loop it is meant to measure."""
    import orjson

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = 0
                for h in head.split(b"\r\n"):
                    if h[:15].lower() == b"content-length:":
                        n = int(h[15:])
                body = orjson.loads(await reader.readexactly(n))
                mock.requests += 1
                if mock.latency_s:
                    await asyncio.sleep(mock.latency_s)
                out = orjson.dumps(chat_response(mock, body))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % len(out) + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--answer", choices=sorted(ANSWERS), default="echo")
    ap.add_argument("--raw", action="store_true", help="bare asyncio server (chat completions only)")
    a = ap.parse_args(argv)
    import uvicorn

    mock = MockOpenAI(answer=ANSWERS[a.answer], latency_s=a.latency)
    if a.raw:
        asyncio.run(serve_raw(mock, a.port))
        return
    uvicorn.run(make_app(mock), host="127.0.0.1", port=a.port, log_level="warning", access_log=False, lifespan="off")


if __name__ == "__main__":
    main()
