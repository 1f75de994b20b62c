"""Recorders and importers: a user's own system (an MCP server, agent logs) into trajectory files."""
