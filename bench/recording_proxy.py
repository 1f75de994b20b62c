"""The MCP recording proxy's added latency per call, next to a direct call to the same server.

    .venv/bin/python bench/recording_proxy.py [--calls 200] [--repeats 3]

One client session talks to `mcp-server-git` (a third-party MCP server from PyPI) over a local
repository directly, and one through `agentworld record mcp` in front of an identical
repository; both make the same read-only calls (`git_status`, `git_log`, `git_show`) in turn,
alternating direct and proxied blocks so machine noise falls on both alike. Per-call latency is
the client's wall time from request to result. Printed: median and p95 per call for each, the
added latency (proxied - direct) and the ratio; medians over `--repeats` blocks. The proxy
writes one redacted row per call, included in its figure. Results also go to
reports/bench/recording_proxy.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def make_repo(path: Path) -> Path:
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    for i in range(5):
        (path / f"file{i}.txt").write_text(f"line {i}\n" * 20)
        subprocess.run(["git", "-C", str(path), "add", "."], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", f"commit {i}"], check=True, env=env)
    return path


async def timed_calls(params: StdioServerParameters, repo: Path, calls: int) -> list[float]:
    plan = [("git_status", {}), ("git_log", {"max_count": 3}), ("git_show", {"revision": "HEAD"})]
    out = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(calls):
                name, extra = plan[i % len(plan)]
                start = time.perf_counter()
                await session.call_tool(name, {"repo_path": str(repo), **extra})
                out.append(time.perf_counter() - start)
    return out


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    server = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent)) or shutil.which("mcp-server-git")
    if server is None:
        sys.exit("mcp-server-git is not installed (make setup installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        direct_repo, proxied_repo = make_repo(tmp_path / "direct"), make_repo(tmp_path / "proxied")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        direct = StdioServerParameters(command=server, args=["--repository", str(direct_repo)])
        proxied = StdioServerParameters(
            command=sys.executable, env=env,
            args=["-m", "agentworld.cli", "record", "mcp", "--name", "bench", "--out", str(tmp_path / "rec"), "--",
                  server, "--repository", str(proxied_repo)])
        blocks: dict[str, list[list[float]]] = {"direct": [], "proxied": []}
        for _ in range(args.repeats):
            blocks["direct"].append(anyio.run(timed_calls, direct, direct_repo, args.calls))
            blocks["proxied"].append(anyio.run(timed_calls, proxied, proxied_repo, args.calls))
        rows = sum(1 for _ in (tmp_path / "rec" / "trajectories.jsonl").open())
    figures = {name: {"median_ms": 1000 * statistics.median(statistics.median(b) for b in runs),
                      "p95_ms": 1000 * statistics.median(p95(b) for b in runs)} for name, runs in blocks.items()}
    added = {k: figures["proxied"][k] - figures["direct"][k] for k in ("median_ms", "p95_ms")}
    print(f"MCP recording proxy, mcp-server-git, {args.calls} calls x {args.repeats} blocks "
          f"({rows} rows recorded)")
    print(f"{'path':<10}{'median ms/call':>16}{'p95 ms/call':>14}")
    for name, fig in figures.items():
        print(f"{name:<10}{fig['median_ms']:>16.2f}{fig['p95_ms']:>14.2f}")
    print(f"{'added':<10}{added['median_ms']:>16.2f}{added['p95_ms']:>14.2f}")
    print(f"ratio proxied/direct: median {figures['proxied']['median_ms'] / figures['direct']['median_ms']:.2f}x, "
          f"p95 {figures['proxied']['p95_ms'] / figures['direct']['p95_ms']:.2f}x")
    out = ROOT / "reports" / "bench" / "recording_proxy.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"calls": args.calls, "repeats": args.repeats, "rows_recorded": rows,
                               **figures, "added": added}, indent=2) + "\n")


if __name__ == "__main__":
    main()
