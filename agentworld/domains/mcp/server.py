"""One application's MCP server over stdio: `python -m agentworld.domains.mcp.server --app shop --db PATH`.

The server is the official SDK's `MCPServer`; the tools open the SQLite file at `--db` on every
call, so the environment can reset an episode by replacing that file while the server keeps running.
Started with its working directory outside the repository so that `mcp` resolves to the SDK.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from agentworld.domains.mcp.apps import APP_NAMES, app_module
from agentworld.domains.mcp.apps.common import AppDB


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--app", required=True, choices=APP_NAMES)
    parser.add_argument("--db", required=True)
    parser.add_argument("--pidfile")
    args = parser.parse_args(argv)
    if args.pidfile:
        Path(args.pidfile).write_text(str(os.getpid()))
    server = app_module(args.app).build_server(AppDB(args.db))
    server.run("stdio")


if __name__ == "__main__":
    main()
