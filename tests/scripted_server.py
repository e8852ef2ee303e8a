"""A few lines of HTTP on loopback that speak OpenAI's chat completions: for the failures a real model server
can't be made to produce on cue, and for a judge whose every verdict a test decides."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any


class StreamPlan:
    """How a streamed completion is sent: `first_token_s` before its first chunk, `gap_s` between chunks
    (of `chars` characters each), silent for good after `stall_after` chunks, cut off (the connection closed
    short of the length it promised) after `break_after` chunks, or never ending (`endless`: whitespace, a
    chunk every `gap_s`, after the content)."""

    def __init__(
        self,
        *,
        first_token_s: float = 0.0,
        gap_s: float = 0.0,
        chars: int = 4,
        stall_after: int | None = None,
        break_after: int | None = None,
        endless: bool = False,
    ) -> None:
        self.first_token_s = first_token_s
        self.gap_s = gap_s
        self.chars = chars
        self.stall_after = stall_after
        self.break_after = break_after
        self.endless = endless


class ScriptedServer:
    """A few lines of HTTP on loopback: answers every request with `status` and `body`, or never answers
    (`hang`). A request that asks for a stream of the completion `completion` set is sent it as chunks, as
    `plan` says. Only for the failures a real model can't be made to produce on cue."""

    def __init__(self, model: str = "smollm2-135m-instruct") -> None:
        self.model = model
        # Answers each request's JSON with (status, body) when set, instead of `status` and `body`.
        self.reply: Callable[[dict[str, Any]], tuple[int, bytes]] | None = None
        self.status = 200
        self.body = b""
        self.content_type = "application/json"
        self.hang = False
        # Statuses the next requests get first, one each (with a tiny retry-after, so SDK retries are quick).
        self.failures: list[int] = []
        self.plan = StreamPlan()
        # Streams as llama.cpp's server does: chunked, its headers promising keep-alive, and the connection closed
        # after the reply all the same; the close comes late (as on a busy CPU), when the next request on the
        # connection has been sent, which is dropped unanswered.
        self.late_close = False
        self.connections = 0
        # The completion `completion` set, for a request that asks for it streamed.
        self._reply: dict[str, Any] | None = None
        self.requests: list[dict[str, Any]] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def completion(self, content: str | None, finish_reason: str = "stop", usage: bool = True) -> None:
        reply: dict[str, Any] = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [
                {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}
            ],
        }
        if usage:
            reply["usage"] = {"prompt_tokens": 321, "completion_tokens": 1024, "total_tokens": 1345}
        self.body = json.dumps(reply).encode()
        self._reply = reply

    def _chunks(self) -> list[dict[str, Any]]:
        """The completion as a server streams it: the role, the content in pieces, the finish, the usage."""
        assert self._reply is not None
        choice = self._reply["choices"][0]
        content = choice["message"]["content"] or ""
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": self.model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        size = self.plan.chars
        pieces = [chunk({"content": content[i : i + size]}) for i in range(0, len(content), size)]
        out = [chunk({"role": "assistant", "content": ""}), *pieces, chunk({}, choice["finish_reason"])]
        if "usage" in self._reply:
            out.append({**base, "choices": [], "usage": self._reply["usage"]})
        return out

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        plan = self.plan
        # A body of a promised length that ends short is what a server that died mid-answer looks like.
        length = b"content-length: 1000000\r\n" if plan.break_after is not None else b""
        framing = (
            b"transfer-encoding: chunked\r\nkeep-alive: timeout=5, max=100" if self.late_close else b"connection: close"
        )
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n%s%s\r\n\r\n" % (length, framing))
        await writer.drain()

        def send(data: bytes) -> None:
            writer.write(b"%x\r\n%s\r\n" % (len(data), data) if self.late_close else data)

        chunks = self._chunks()
        await asyncio.sleep(plan.first_token_s)
        sent = 0
        for n, chunk in enumerate(chunks):
            if plan.endless and n == len(chunks) - 2:
                # Whitespace in the JSON, a chunk at a time, for ever, before the finish that never comes.
                while True:
                    filler = {**chunk, "choices": [{"index": 0, "delta": {"content": " "}, "finish_reason": None}]}
                    send(b"data: %s\n\n" % json.dumps(filler).encode())
                    await writer.drain()
                    await asyncio.sleep(plan.gap_s)
            if plan.stall_after is not None and sent >= plan.stall_after:
                await asyncio.sleep(3600)
            if plan.break_after is not None and sent >= plan.break_after:
                return
            send(b"data: %s\n\n" % json.dumps(chunk).encode())
            await writer.drain()
            if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                sent += 1
                await asyncio.sleep(plan.gap_s)
        send(b"data: [DONE]\n\n")
        if self.late_close:
            writer.write(b"0\r\n\r\n")
        await writer.drain()

    def _streams(self) -> bool:
        # Only the completion `completion` set streams: a body set by hand is sent as it is.
        return self._reply is not None and self.body == json.dumps(self._reply).encode()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            request = json.loads(await reader.readexactly(length))
            self.requests.append(request)
            if self.hang:
                await asyncio.sleep(3600)
            if self.failures:
                failed = b'{"error": {"message": "injected failure"}}'
                writer.write(
                    b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\nretry-after-ms: 1\r\n"
                    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (self.failures.pop(0), len(failed), failed)
                )
                await writer.drain()
                return
            if request.get("stream") and self.reply is None and self.status == 200 and self._streams():
                await self._stream(writer)
                if self.late_close:
                    await reader.read(1)
                return
            status, body = self.reply(request) if self.reply is not None else (self.status, self.body)
            writer.write(
                b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status, self.content_type.encode(), len(body), body)
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def logprob_reply(model: str, p_yes: float, *, token: str | None = None) -> bytes:
    """A one-token completion whose first token's alternatives give P(Yes) = `p_yes` (llama.cpp's shape)."""
    import math

    yes, no = max(p_yes, 1e-9), max(1 - p_yes, 1e-9)
    top = [
        {"token": "Yes", "logprob": math.log(yes), "bytes": None},
        {"token": "No", "logprob": math.log(no), "bytes": None},
    ]
    first = token or ("Yes" if p_yes >= 0.5 else "No")
    reply = {
        "id": "j1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": first},
                "logprobs": {
                    "content": [
                        {
                            "token": first,
                            "logprob": math.log(yes if first == "Yes" else no),
                            "bytes": None,
                            "top_logprobs": top,
                        }
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 200, "completion_tokens": 1, "total_tokens": 201},
    }
    return json.dumps(reply).encode()
