"""The HTTP recording proxy: `agentworld record http --name NAME --upstream URL --port PORT`.

A reverse proxy on 127.0.0.1 (a Starlette app served by uvicorn, forwarding with httpx) that
passes every request to the upstream API and its response back unchanged (hop-by-hop headers
aside), and writes each exchange as a Transition: the action is the request
(`{"body", "headers", "method", "path", "query"}`), the observation the response
(`{"body", "headers", "status"}`), bodies parsed when they are JSON. Only a few headers are kept
(content type, location, and the credential headers, which redaction blanks to say that one was
sent); exchanges are grouped into trajectories by the session header (`X-Session-Id` by
default), else by client address.

At start the proxy asks the upstream for a route that cannot exist and keeps its answer in the
recording's description, so the simulator answers unknown routes as the real API does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworld.data.recording.redact import Redactor
from agentworld.data.recording.store import RecordingWriter

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
                        "transfer-encoding", "upgrade", "host", "content-length", "content-encoding"})
REQUEST_HEADERS = ("content-type", "authorization", "cookie", "x-api-key")
RESPONSE_HEADERS = ("content-type", "location", "retry-after")
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
DEFAULT_SESSION_HEADER = "x-session-id"


def body_value(content: bytes) -> Any:
    """A body as JSON when it parses, else text ('' when empty)."""
    text = content.decode("utf-8", errors="replace")
    if not text.strip():
        return ""
    try:
        return json.loads(text)
    except ValueError:
        return text


def kept(headers: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    return {name: headers[name] for name in names if name in headers}


def http_action(method: str, path: str, query: str, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
    return {"method": method, "path": path, "query": query, "body": body_value(body),
            "headers": kept(headers, REQUEST_HEADERS)}


def http_observation(status: int, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    return {"status": status, "headers": kept(headers, RESPONSE_HEADERS), "body": body_value(body)}


def session_key(request: Request, session_header: str) -> str:
    """Which agent session a request belongs to: its session header, else its client address."""
    return request.headers.get(session_header) or (request.client.host if request.client else "client")


def build_app(upstream: str, writer: RecordingWriter, *, session_header: str = DEFAULT_SESSION_HEADER) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream.rstrip("/"), timeout=60.0)
    sessions: dict[str, str] = {}

    async def forward(request: Request) -> Response:
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        query = request.url.query
        url = request.url.path + (f"?{query}" if query else "")
        answer = await client.request(request.method, url, content=body, headers=headers)
        trajectory = sessions.setdefault(session_key(request, session_header), writer.trajectory_id(len(sessions)))
        lower = {k.lower(): v for k, v in request.headers.items()}
        writer.record(trajectory, action=http_action(request.method, request.url.path, query, body, lower),
                      observation=http_observation(answer.status_code, answer.headers, answer.content),
                      info={"method": request.method, "status": answer.status_code,
                            "latency_s": round(answer.elapsed.total_seconds(), 4)})
        out_headers = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        return Response(answer.content, status_code=answer.status_code, headers=out_headers)

    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        yield
        await client.aclose()

    return Starlette(routes=[Route("/{path:path}", forward, methods=METHODS)], lifespan=lifespan)


def unknown_route_answer(upstream: str) -> dict[str, Any]:
    """What the upstream answers for a route that cannot exist (status and body)."""
    path = f"/agentworld-unknown-route-{uuid.uuid4().hex}"
    answer = httpx.get(upstream.rstrip("/") + path, timeout=30.0)
    return {"probe": path, **http_observation(answer.status_code, answer.headers, answer.content)}


def record_http(name: str, upstream: str, directory: Path, port: int, *, redactor: Redactor | None = None,
                session_header: str = DEFAULT_SESSION_HEADER) -> None:
    """Serve the proxy on 127.0.0.1:`port` until interrupted."""
    import uvicorn

    try:
        unknown = unknown_route_answer(upstream)
    except httpx.HTTPError as exc:
        raise ConnectionError(f"--upstream {upstream}: not reachable ({exc})") from None
    writer = RecordingWriter(directory, name, recorder="http-proxy", redactor=redactor,
                             provenance={"upstream": upstream})
    writer.describe({"kind": "http", "server": {"name": name}, "upstream": upstream, "tools": [],
                     "unknown_route": unknown, "session_header": session_header})
    app = build_app(upstream, writer, session_header=session_header.lower())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
