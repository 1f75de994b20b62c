"""MCP domain: SaaS-like applications (issue tracker, CRM, online shop) behind real MCP servers.

Each application is a real SQLite database served by the official `mcp` SDK's `MCPServer` over
stdio; the environment (`agentworld.envs.mcp.env`) is an MCP client speaking the real protocol.

This package is named `mcp` too: every module here uses absolute imports, so `from mcp import ...`
always resolves to the SDK's top-level package, never to `agentworld.envs.mcp`. Nothing is
imported here, so listing environments stays light.
"""
