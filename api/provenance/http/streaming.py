"""POST /ask as Server-Sent Events (`Accept: text/event-stream`): each stage's record as the stage completes,
then the whole AskResponse.

The events, each `data` one JSON object:

- `start`: `{"requestId", "stages": [...]}`, the stages' keys in the order the pipeline runs them;
- `stage`: `{"stage": key, "record": {...}, "at": unix seconds}`, one stage's record, exactly as
  `AskResponse.stages` holds it, sent when the pipeline sets it (`at`); a stage that runs twice (the rate
  limit: a look, then the count; the spend cap: the reservation, then the settlement) is sent twice;
- `progress`: `{"stage": key, "tokens", "elapsedS"}` while a model call of that stage runs (the model reading
  the prompt, tokens 0, then writing) and when the claims' checking begins: the tokens written so far and the
  seconds since the call began, never the text; at most a few a second (`PROGRESS_EVERY_S`);
- `response`: the AskResponse, last. The answer is in this event only, and only when the gate passed it;
  no stage record holds the answer's text (pipeline.py);
- `error`: `{"error": {"code", "message"}}`, when the run fails after the stream began (a database outage).

The stream starts once the request holds a pipeline slot (and its place in the hourly limit: the spend cap's
first record says both). A request settled before that (bad input, the bot
check, the rate limit, the deny-list, a full or slow admission queue) is answered exactly as a JSON request
is, with its status and body; a cached answer streams its stored stages at once.

The pipeline runs in a task of its own, not under the response's cancel scope: when the client goes away
the task is cancelled, so its work stops, its pipeline slot is freed and its spend reservation settled (the
pipeline's own `finally`), whatever the response was doing.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.openapi.spec import OpenAPI, OpenAPIMediaType, OpenAPIType, Reference, Schema
from litestar.response import ServerSentEvent
from litestar.response.sse import ServerSentEventMessage

from provenance.errors import ErrorBody, ErrorEnvelope
from provenance.http.exceptions import service_error_for
from provenance.inference.streamed_calls import PROGRESS, Progress
from provenance.logs import get_logger
from provenance.pipeline.run import OnStage, Outcome
from provenance.wire import AskResponse, StageRecord, Stages

log = get_logger("provenance.http")

JSON = "application/json"
EVENT_STREAM = "text/event-stream"
# Stage field -> its key on the wire (`lexical_check` -> `lexicalCheck`), as AskResponse.stages encodes it.
WIRE_KEYS = {f.name: f.encode_name for f in msgspec.structs.fields(Stages)}

# Pipelines of streams still running: a task is only weakly held by the loop.
_RUNNING: set[asyncio.Task[Outcome]] = set()
_DONE = ServerSentEventMessage(comment="done")
# The most often one stage's progress is told: a model writes tens of tokens a second on a GPU, and a reader
# needs no more than a few updates a second.
PROGRESS_EVERY_S = 0.25


def wants_stream(request: Request[Any, Any, Any]) -> bool:
    return request.accept.best_match([JSON, EVENT_STREAM], default=JSON) == EVENT_STREAM


def _message(event: str, data: object, seq: int) -> ServerSentEventMessage:
    return ServerSentEventMessage(data=msgspec.json.encode(data).decode(), event=event, id=seq)


class _Events:
    """What the pipeline's task tells the stream: each stage record, encoded the moment it is set (a record
    is not touched again once told, but encoding now also stamps the time honestly)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[ServerSentEventMessage] = asyncio.Queue()
        self.admitted = asyncio.Event()
        # Event ids count from 1, the `start` event's, which is sent first though stages may be told before it.
        self.seq = 1
        # When each stage's progress was last told.
        self._told: dict[str, float] = {}

    def next_id(self) -> int:
        self.seq += 1
        return self.seq

    def stage(self, name: str, record: StageRecord) -> ServerSentEventMessage:
        payload = {"stage": WIRE_KEYS[name], "record": record, "at": time.time()}
        return _message("stage", payload, self.next_id())

    def on_stage(self, name: str, record: StageRecord) -> None:
        self.queue.put_nowait(self.stage(name, record))
        # The spend cap's reservation comes once the request holds a slot and has taken its place in the hourly
        # limit: from here on nothing is answered with a status of its own (a 429 for a place another request
        # took while this one waited stays a JSON 429).
        if name == "spend":
            self.admitted.set()

    def on_progress(self, progress: Progress) -> None:
        """A model call's progress: the first of its stage at once, then at most one per PROGRESS_EVERY_S."""
        now = time.monotonic()
        last = self._told.get(progress.stage)
        if last is not None and now - last < PROGRESS_EVERY_S:
            return
        self._told[progress.stage] = now
        payload = {"stage": progress.stage, "tokens": progress.tokens, "elapsedS": progress.elapsed_s}
        self.queue.put_nowait(_message("progress", payload, self.next_id()))

    def done(self, _: object) -> None:
        self.queue.put_nowait(_DONE)

    def start(self, request_id: str) -> ServerSentEventMessage:
        return _message("start", {"requestId": request_id, "stages": list(WIRE_KEYS.values())}, 1)


async def stream_ask(
    run: Callable[[OnStage], Coroutine[Any, Any, Outcome]], request_id: str, path: str
) -> Response[AskResponse] | ServerSentEvent:
    """Run the pipeline (`run`, told the stage callback) and answer as a stream once it is admitted; as JSON
    when it was settled before (an exception raised before then is the usual JSON error)."""
    events = _Events()
    # The pipeline's task runs in a copy of this context with its progress listener set: the model calls
    # deep inside it report there (`streamed_calls.report`), and no other request hears them.
    context = contextvars.copy_context()
    context.run(PROGRESS.set, events.on_progress)
    task = asyncio.create_task(run(events.on_stage), context=context)
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    task.add_done_callback(events.done)
    admitted = asyncio.create_task(events.admitted.wait())
    try:
        await asyncio.wait({task, admitted}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        admitted.cancel()
    if not events.admitted.is_set():
        outcome = task.result()  # raises what the run raised: Overloaded, UnknownCorpus, a database outage
        if not outcome.response.cached:
            return Response(outcome.response, status_code=outcome.http_status, headers=outcome.headers)
        return ServerSentEvent(_stored(events, outcome.response), headers=outcome.headers)
    return ServerSentEvent(_live(events, task, request_id, path))


async def _live(
    events: _Events, task: asyncio.Task[Outcome], request_id: str, path: str
) -> AsyncIterator[ServerSentEventMessage]:
    try:
        yield events.start(request_id)
        while (message := await events.queue.get()) is not _DONE:
            yield message
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            yield _message("response", task.result().response, events.next_id())
        else:
            error = service_error_for(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)), path)
            yield _message("error", ErrorEnvelope(ErrorBody(code=error.code, message=error.message)), events.next_id())
    finally:
        if not task.done():
            # The client went away (or the server is stopping): stop the work; the pipeline frees its slot
            # and settles its spend reservation as the cancellation unwinds it.
            log.info("stream closed before the answer; its pipeline is cancelled", request_id=request_id)
            task.cancel()


async def _stored(events: _Events, response: AskResponse) -> AsyncIterator[ServerSentEventMessage]:
    """A cached answer: its stored stages at once, then the answer."""
    yield events.start(response.request_id)
    for name in WIRE_KEYS:
        yield events.stage(name, getattr(response.stages, name))
    yield _message("response", response, events.next_id())


def declare_streaming(openapi: OpenAPI) -> None:
    """Write POST /ask's two media types into the OpenAPI document: the framework makes nothing of a handler
    that returns one of two response classes."""
    paths = openapi.paths or {}
    operation = paths["/ask"].post
    assert operation is not None and operation.responses is not None
    ok = operation.responses["200"]
    assert not isinstance(ok, dict) and hasattr(ok, "content")
    content = ok.content or {}
    content[JSON] = OpenAPIMediaType(schema=Reference(ref="#/components/schemas/AskResponse"))
    content[EVENT_STREAM] = OpenAPIMediaType(
        schema=Schema(
            type=OpenAPIType.STRING,
            description=(
                "with `Accept: text/event-stream`: Server-Sent Events. `start` {requestId, stages}, then one"
                " `stage` {stage, record, at} as each stage completes (record: that stage's record in"
                " AskResponse.stages), `progress` {stage, tokens, elapsedS} while a model call runs (never its"
                " text), then `response` (the AskResponse); `error` {error: {code, message}} when"
                " the run fails after the stream began. A request settled before it is admitted (bad input, bot"
                " check, rate limit, deny-list, overload) is answered as JSON, as without the header."
            ),
        )
    )
    ok.content = content
    ok.description = "the AskResponse; with Accept: text/event-stream, each stage as it completes, then the AskResponse"
