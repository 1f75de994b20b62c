"""What the sandbox costs: steps per second, sandboxed vs a plain `bash -c`, same command mix.

    .venv/bin/python bench/sandbox_overhead.py [--repeats 5] [--rounds 10]

Rows: plain `subprocess.run(["bash", "-c", cmd])` in a temp dir; `Sandbox.run` (bwrap, limits,
state restore/save); `TerminalEnv.step` (Sandbox.run plus the task checker, i.e. what the
collector pays per transition). Each figure is the median of `--repeats` timed passes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentworld.config import SandboxParams  # noqa: E402
from agentworld.envs.sandbox import Sandbox, sandbox_available  # noqa: E402
from agentworld.envs.terminal import TerminalEnv  # noqa: E402
from agentworld.envs.terminal_tasks import generate_task  # noqa: E402

SEED_FILE = "notes.txt"
COMMANDS = (
    "echo hello",
    "pwd",
    "ls -la",
    f"cat {SEED_FILE}",
    f"wc -l {SEED_FILE}",
    f"grep -c apple {SEED_FILE}",
    f"sort {SEED_FILE} | uniq -c | sort -rn | head -n 3",
    "seq 1 100 | awk '{s+=$1} END {print s}'",
    "export X=1; echo $X",
    "nosuchcommand",
)
CONTENT = "".join(f"{w}\n" for w in ("apple", "pear", "apple", "plum", "fig", "apple", "kiwi") * 20)


def steps_per_second(step: Callable[[str], object], repeats: int, rounds: int) -> float:
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(rounds):
            for command in COMMANDS:
                step(command)
        rates.append(rounds * len(COMMANDS) / (time.perf_counter() - started))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10, help="passes over the command mix per repeat")
    args = parser.parse_args()
    ok, reason = sandbox_available()
    if not ok:
        sys.exit(f"sandbox unavailable: {reason}")
    params = SandboxParams()

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, SEED_FILE).write_text(CONTENT)
        plain = steps_per_second(
            lambda cmd: subprocess.run(["bash", "-c", cmd], cwd=tmp, capture_output=True, check=False),
            args.repeats, args.rounds)

    with Sandbox(params) as sandbox:
        sandbox.write_files({SEED_FILE: CONTENT})
        sandboxed = steps_per_second(sandbox.run, args.repeats, args.rounds)

    env = TerminalEnv(params)
    task = generate_task(0, "count_lines")  # never solved by the mix, so episodes never end
    env.reset(options={"task": task})
    env.sandbox.write_files({SEED_FILE: CONTENT})
    try:
        env_rate = steps_per_second(lambda cmd: env.step(cmd), args.repeats, args.rounds)
    finally:
        env.close()

    print(f"command mix: {len(COMMANDS)} commands x {args.rounds} rounds, median of {args.repeats} repeats")
    print(f"{'runner':<34}{'steps/s':>10}{'ms/step':>10}{'overhead':>10}")
    for name, rate in (("bash -c (unsandboxed)", plain), ("Sandbox.run (bwrap)", sandboxed),
                       ("TerminalEnv.step (run + checker)", env_rate)):
        print(f"{name:<34}{rate:>10.1f}{1000 / rate:>10.2f}{plain / rate:>9.2f}x")


if __name__ == "__main__":
    main()
