"""`agentworld record ...` and `agentworld import ...`: a user's own system into trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentworld.data.recording.redact import Redactor
from agentworld.data.recording.store import recording_dir

record_app = typer.Typer(help="Record an agent's traffic with your own system as trajectories.", no_args_is_help=True)
import_app = typer.Typer(help="Import agent logs as trajectories.", no_args_is_help=True)

NameOpt = typer.Option(..., "--name", help="the recording's name (its folder under data/recordings/)")
OutOpt = typer.Option(None, "--out", help="recording folder [default: data/recordings/NAME]")
RedactOpt = typer.Option(None, "--redact", help="also redact matches of REGEX as <REDACTED:NAME>; repeatable",
                         metavar="NAME=REGEX")


def _target(name: str, out: Optional[Path], redact: Optional[list[str]]) -> tuple[Path, Redactor]:
    try:
        return (out or recording_dir(name)), Redactor.from_options(redact)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None


@record_app.command("mcp", context_settings={"allow_interspersed_args": False})
def record_mcp(
    command: list[str] = typer.Argument(..., help="the real MCP server's command and arguments, after --"),
    name: str = NameOpt,
    out: Optional[Path] = OutOpt,
    http: Optional[int] = typer.Option(None, "--http", help="serve streamable HTTP on 127.0.0.1:PORT/mcp "
                                                             "instead of stdio"),
    redact: Optional[list[str]] = RedactOpt,
) -> None:
    """Be the MCP server your agent talks to: forward every request to the real one (stdio) and
    record each tool call, its result or error, one trajectory per client session.

    Example: agentworld record mcp --name git -- mcp-server-git --repository ./repo
    """
    from agentworld.data.recording.mcp_proxy import record_mcp as run

    directory, redactor = _target(name, out, redact)
    if http is not None:
        typer.echo(f"recording {name!r} into {directory}; MCP on http://127.0.0.1:{http}/mcp", err=True)
    try:
        run(name, command, directory, redactor=redactor, http_port=http)
    except KeyboardInterrupt:
        pass


@record_app.command("http")
def record_http(
    name: str = NameOpt,
    upstream: str = typer.Option(..., "--upstream", help="the real API's base URL, e.g. http://127.0.0.1:5000"),
    port: int = typer.Option(8790, "--port", help="serve the proxy on 127.0.0.1:PORT"),
    session_header: str = typer.Option("X-Session-Id", "--session-header",
                                       help="request header naming the agent's session (else the client address)"),
    out: Optional[Path] = OutOpt,
    redact: Optional[list[str]] = RedactOpt,
) -> None:
    """Be the HTTP API your agent talks to: forward every request to the real one and record each
    request and response, one trajectory per session, until interrupted.

    Example: agentworld record http --name crm --upstream https://crm.internal --port 8790
    """
    from agentworld.data.recording.http_proxy import record_http as run

    directory, redactor = _target(name, out, redact)
    typer.echo(f"recording {name!r} into {directory}; proxy on http://127.0.0.1:{port} -> {upstream}", err=True)
    try:
        run(name, upstream, directory, port, redactor=redactor, session_header=session_header)
    except ConnectionError as err:
        typer.echo(f"record http: {err}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


@import_app.command("openai-chat")
def import_openai_chat(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSON Lines, one conversation per line"),
    name: str = NameOpt,
    out: Optional[Path] = OutOpt,
    redact: Optional[list[str]] = RedactOpt,
) -> None:
    """Turn chat-completions logs (assistant `tool_calls`, `tool` results) into trajectories, one
    per conversation; malformed conversations are listed by line and field and left out.

    Example: agentworld import openai-chat logs/agent.jsonl --name crm
    """
    from agentworld.data.recording.openai_chat import import_openai_chat as run

    directory, redactor = _target(name, out, redact)
    conversations, transitions, rejections = run(file, name, directory, redactor=redactor)
    for rejection in rejections:
        typer.echo(f"{file}: {rejection}", err=True)
    typer.echo(f"{file}: {conversations} conversations ({transitions} transitions) into {directory}; "
               f"{len(rejections)} rejected", err=True)
    if not conversations:
        raise typer.Exit(1)
