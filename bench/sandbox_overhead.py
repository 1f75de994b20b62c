"""What the sandbox costs: steps per second, sandboxed vs a plain `bash -c`, same command mix.

    .venv/bin/python bench/sandbox_overhead.py [--repeats 5] [--rounds 10] [--baseline REV]

Rows: plain `subprocess.run(["bash", "-c", cmd])` in a temp dir; `Sandbox.run` (bwrap, limits,
state restore/save); `TerminalEnv.step` (Sandbox.run plus the task checker, i.e. what the
collector pays per transition). Each figure is the median of `--repeats` timed passes.

`--baseline REV` adds `TerminalEnv.step` of another revision (checked out in a temporary git
worktree) beside this tree's, each pass in a fresh child process, the two trees alternating, so
machine noise hits both alike: e.g. `--baseline 535cc44^`, the tree before checkers stopped
reading the agent's saved shell state, to see what that hardening costs per step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentworld.config import SandboxParams  # noqa: E402
from agentworld.domains.terminal.env import TerminalEnv  # noqa: E402
from agentworld.domains.terminal.tasks import generate_task  # noqa: E402
from agentworld.envs.sandbox import Sandbox, sandbox_available  # noqa: E402

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
# `--mix write`: every command also changes the workspace, so the task's checker runs after every
# step (it is skipped when a step changed nothing); `read` is the mix as it is.
WRITE_SUFFIX = "; echo $RANDOM >> scratch.log"
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


# One timed pass of TerminalEnv.step over the mix, in the tree given as argv[1].
_CHILD = f"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from agentworld.config import SandboxParams
from agentworld.domains.terminal.env import TerminalEnv
from agentworld.domains.terminal.tasks import generate_task
commands, rounds, template = json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
env = TerminalEnv(SandboxParams())
env.reset(options={{"task": generate_task(0, template)}})
env.sandbox.write_files({{{SEED_FILE!r}: {CONTENT!r}}})
for command in commands:  # warm-up pass
    env.step(command)
started = time.perf_counter()
for _ in range(rounds):
    for command in commands:
        env.step(command)
print(json.dumps(rounds * len(commands) / (time.perf_counter() - started)))
env.close()
"""


def child_rate(tree: Path, rounds: int, template: str) -> float:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tree), json.dumps(COMMANDS), str(rounds), template],
                          cwd=tree, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def compare_with(baseline: str, repeats: int, rounds: int, template: str) -> tuple[float, float]:
    """Median steps/s of TerminalEnv.step in `baseline`'s tree and in this tree, alternating."""
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", "-q", str(tree), baseline], check=True)
        try:
            old, new = [], []
            for _ in range(repeats):
                old.append(child_rate(tree, rounds, template))
                new.append(child_rate(here, rounds, template))
        finally:
            subprocess.run(["git", "-C", str(here), "worktree", "remove", "--force", str(tree)], check=False)
    return statistics.median(old), statistics.median(new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10, help="passes over the command mix per repeat")
    parser.add_argument("--mix", choices=("read", "write"), default="read",
                        help="write: each command also changes the workspace, so the checker runs every step")
    parser.add_argument("--template", default="count_lines",
                        help="the Terminal task the env steps run in (its checker runs after every step)")
    parser.add_argument("--baseline", default=None, help="git revision whose TerminalEnv.step is timed beside this tree's")
    args = parser.parse_args()
    global COMMANDS
    if args.mix == "write":
        COMMANDS = tuple(command + WRITE_SUFFIX for command in COMMANDS)
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
    task = generate_task(0, args.template)  # never solved by the mix, so episodes never end
    env.reset(options={"task": task})
    env.sandbox.write_files({SEED_FILE: CONTENT})
    try:
        env_rate = steps_per_second(lambda cmd: env.step(cmd), args.repeats, args.rounds)
    finally:
        env.close()

    print(f"command mix ({args.mix}): {len(COMMANDS)} commands x {args.rounds} rounds, "
          f"median of {args.repeats} repeats")
    print(f"{'runner':<34}{'steps/s':>10}{'ms/step':>10}{'overhead':>10}")
    for name, rate in (("bash -c (unsandboxed)", plain), ("Sandbox.run (bwrap)", sandboxed),
                       ("TerminalEnv.step (run + checker)", env_rate)):
        print(f"{name:<34}{rate:>10.1f}{1000 / rate:>10.2f}{plain / rate:>9.2f}x")
    if args.baseline:
        old, new = compare_with(args.baseline, args.repeats, args.rounds, args.template)
        print(f"\nTerminalEnv.step on {args.template}, fresh child process per pass, trees alternating "
              f"({args.repeats} passes each)")
        print(f"{'tree':<34}{'steps/s':>10}{'ms/step':>10}{'vs baseline':>13}")
        for name, rate in ((f"baseline {args.baseline}", old), ("this tree", new)):
            print(f"{name:<34}{rate:>10.1f}{1000 / rate:>10.2f}{old / rate:>12.2f}x")


if __name__ == "__main__":
    main()
