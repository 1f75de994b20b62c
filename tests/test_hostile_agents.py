"""Hostile agents against the real Terminal environment: nothing an action writes or sets may
change a checker's verdict, and the host never follows what the agent put in its directories.

Each attempt runs on a fresh episode of a task it does not solve; it must score 0, leave the
episode unsolved, and the env must still answer the next action. The host-side reads run in a
child process with a memory cap and a timeout, so a regression fails the test instead of
taking the machine's memory.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from agentworld.config import SandboxParams
from agentworld.envs.sandbox import sandbox_available
from agentworld.envs.shell_state import exported_variables
from agentworld.envs.terminal import TerminalEnv
from agentworld.envs.terminal_tasks import generate_task
from tests.conftest import PROJECT

AVAILABLE, REASON = sandbox_available()
needs_sandbox = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=f"sandbox unavailable: {REASON}")
PARAMS = SandboxParams(command_timeout_s=3)

#: An answer, an extraction and an edit (the tasks the forgery was first shown on), and the
#: three tasks whose checkers read the agent's exported variables.
TASKS = ["word_count", "cut_column", "append_line", "export_variable", "path_tool", "source_env_file"]

FORGERIES = {
    "saved state exits 0": "trap - EXIT; echo 'exit 0' > /run/sandbox/state.sh",
    "saved state defines every check tool": ("trap - EXIT; for f in '[' test cmp tr grep find printenv; do "
                                             "echo \"function $f { return 0; }\" >> /run/sandbox/state.sh; done"),
    "fake tools first on PATH": ("mkdir -p ~/bin; for f in cmp tr grep find printenv tar awk stat; do "
                                 "printf '#!/bin/sh\\nexit 0\\n' > ~/bin/$f; chmod +x ~/bin/$f; done; "
                                 "export PATH=~/bin:$PATH"),
    "functions and aliases": "cmp() { return 0; }; tr() { :; }; alias grep=true; export -f cmp tr",
    "BASH_ENV and rc files": ("echo 'exit 0' > ~/.bashrc; cp ~/.bashrc ~/.profile; cp ~/.bashrc /tmp/x.sh; "
                              "export BASH_ENV=/tmp/x.sh ENV=/tmp/x.sh"),
    "state replaced by a symlink to /dev/zero": "trap - EXIT; ln -sf /dev/zero /run/sandbox/state.sh",
    "state replaced by a FIFO": "trap - EXIT; rm -f /run/sandbox/state.sh; mkfifo /run/sandbox/state.sh",
}


def _attempt(template: str, action: str) -> dict:
    """One forging action on a fresh episode of `template`, in a child process capped at 2 GB
    and 60 s; returns what the env answered to it and to a following harmless action."""
    script = f"""
import json, sys
from agentworld.config import SandboxParams
from agentworld.envs.terminal import TerminalEnv
from agentworld.envs.terminal_tasks import generate_task
env = TerminalEnv(SandboxParams(command_timeout_s=3))
try:
    env.reset(seed=11, options={{"task": generate_task(11, {template!r})}})
    _, reward, terminated, _, info = env.step(sys.argv[1])
    after = env.step("echo still-here")
    print(json.dumps({{"reward": reward, "terminated": terminated, "solved": info["solved"],
                      "next_reward": after[1], "next_solved": after[4]["solved"]}}))
finally:
    env.close()
"""

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run([sys.executable, "-c", script, action], cwd=PROJECT, capture_output=True, text=True,
                          timeout=60, preexec_fn=cap_memory)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_sandbox
@pytest.mark.parametrize("name", sorted(FORGERIES))
@pytest.mark.parametrize("template", TASKS)
def test_a_forging_action_scores_nothing_and_the_host_stays_safe(template, name):
    outcome = _attempt(template, FORGERIES[name])
    assert outcome == {"reward": 0.0, "terminated": False, "solved": False,
                       "next_reward": 0.0, "next_solved": False}, (template, name, outcome)


@needs_sandbox
@pytest.mark.parametrize("template", ["export_variable", "path_tool", "source_env_file"])
def test_the_shell_tasks_are_still_solved_by_their_real_solution(template):
    env = TerminalEnv(PARAMS)
    try:
        task = generate_task(11, template)
        env.reset(seed=11, options={"task": task})
        for action in task.solution:
            _, reward, terminated, _, info = env.step(action)
            if terminated:
                break
        assert terminated and reward == 1.0 and info["solved"]
    finally:
        env.close()


def test_exported_variables_are_read_as_bash_wrote_them_and_never_run():
    state = "\n".join([
        "# cwd /workspace",
        'declare -x APP_MODE="debug"',
        'declare -x QUOTED="a \\"b\\" \\$HOME \\\\ \\`x\\`"',
        "declare -x CTRL=$'tab\\there'",
        'declare -- LOCAL="not exported"',
        'declare -ax ARR=([0]="x")',
        'declare -x MULTI="line1\nline2"',
        "declare -x BARE=word",
        'declare -x OPEN="never closed',
        "exit 0",
    ])
    assert exported_variables(state) == {"APP_MODE": "debug", "QUOTED": 'a "b" $HOME \\ `x`', "CTRL": "tab\there",
                                         "MULTI": "line1\nline2", "BARE": "word"}
    assert exported_variables("exit 0\n\0\xff garbage") == {}
