"""`agentworld serve http`: a recorded HTTP API, simulated on 127.0.0.1.

Every request is turned into the action the recorder wrote (redacted alike) and answered on the
hybrid path, as `serve mcp` does:

1. a route never recorded (its method and path template, ids generalised) gets the answer the
   real API gave the recorder's probe for a route that cannot exist (its 404, say);
2. the **cache**: a session (the session header, else the client address) whose requests so far
   replay a recorded session exactly gets the recorded response;
3. otherwise the **world model** generates the response (`{"body", "headers", "status"}`) from
   the session's history; a generation that is not such a response after `retries` sampled
   retries becomes a 502 with a JSON error body, never a crash.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworld.data.recording.http_proxy import DEFAULT_SESSION_HEADER, METHODS, http_action, session_key
from agentworld.data.recording.recording import Recording, path_template
from agentworld.data.recording.store import canonical_json
from agentworld.models.backends import Backend
from agentworld.simulation.recorded import RecordedSystem


def response_of(observation: str) -> tuple[int, dict[str, str], Any] | None:
    """(status, headers, body) of a recorded or generated response; None if not well formed."""
    try:
        payload = json.loads(observation)
    except ValueError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("status"), int) or "body" not in payload:
        return None
    if not 100 <= payload["status"] <= 599:
        return None
    headers = payload.get("headers") if isinstance(payload.get("headers"), dict) else {}
    return payload["status"], {str(k): str(v) for k, v in headers.items()}, payload["body"]


def to_response(status: int, headers: dict[str, str], body: Any) -> Response:
    if isinstance(body, str):
        return Response(body, status_code=status, media_type=headers.get("content-type", "text/plain"),
                        headers={k: v for k, v in headers.items() if k != "content-type"})
    return Response(json.dumps(body), status_code=status, media_type=headers.get("content-type", "application/json"),
                    headers={k: v for k, v in headers.items() if k != "content-type"})


class SimulatedHttpApi(RecordedSystem):
    """The recorded API's routes answered by the cache and the world model, per session."""

    PATHS = ("cache", "model", "malformed", "unknown_route", "unanswered")

    def __init__(self, recording: Recording, backend: Backend | None, **options: Any) -> None:
        if recording.kind != "http":
            raise ValueError(f"{recording.directory}: a {recording.kind} recording; serve it with "
                             "`agentworld serve mcp`")
        super().__init__(recording, backend, **options)
        self.routes = set(recording.endpoints())
        self.unknown = recording.description.get("unknown_route") or {"status": 404, "headers": {}, "body": ""}
        self.session_header = str(recording.description.get("session_header") or DEFAULT_SESSION_HEADER)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.handle, methods=METHODS)])

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        request_json = http_action(request.method, request.url.path, request.url.query, body, headers)
        action = canonical_json(self.redactor.value(request_json))
        history = self.sessions.setdefault(session_key(request, self.session_header), [])
        status, out_headers, out_body, observation = await self.answer(history, request.method, request.url.path,
                                                                       action)
        history.append((action, observation))
        return to_response(status, out_headers, out_body)

    async def answer(self, history: list[tuple[str, str]], method: str, path: str,
                     action: str) -> tuple[int, dict[str, str], Any, str]:
        if (method, path_template(path)) not in self.routes:
            self.counts["unknown_route"] += 1
            unknown = {k: self.unknown.get(k) for k in ("status", "headers", "body")}
            status = int(unknown["status"] or 404)
            return status, dict(unknown["headers"] or {}), unknown["body"], canonical_json(unknown)
        row = self.cached(history, action)
        recorded = response_of(row.observation) if row is not None else None
        if recorded is not None:
            self.counts["cache"] += 1
            return (*recorded, row.observation)
        if self.backend is None:
            self.counts["unanswered"] += 1
            return error_response("this request is not in the recording and no world model is served")
        observation, response = await anyio.to_thread.run_sync(self.generate, list(history), action, response_of)
        if response is None:
            self.counts["malformed"] += 1
            return error_response(f"no well-formed response after {self.retries + 1} attempts")
        self.counts["model"] += 1
        return (*response, observation)


def error_response(message: str) -> tuple[int, dict[str, str], Any, str]:
    """A 502 with a JSON error body, and the observation a session remembers of it."""
    payload = {"status": 502, "headers": {"content-type": "application/json"},
               "body": {"error": f"world model error: {message}"}}
    return 502, payload["headers"], payload["body"], canonical_json(payload)
