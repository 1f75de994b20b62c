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
from agentworld.domains.terminal.env import TerminalEnv
from agentworld.domains.terminal.tasks import generate_task
from agentworld.envs.sandbox import sandbox_available
from agentworld.envs.shell_state import exported_variables
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
    "a NUL byte in the command line (raised in the host before)": "echo ok > answer.txt\x00; exit 0",
    "hard links to files outside the workspace": ("for f in /etc/hostname /usr/bin/env /run/sandbox-env "
                                                   "/run/sandbox/state.sh; do ln -f $f . 2>/dev/null; done; "
                                                   "ln -f /run/sandbox/state.sh answer.txt; ls -li"),
}


#: The OS domain (a whole server, the agent as root in its user namespace) shares the Terminal's
#: sandbox and checker: the same forgeries on three of its state tasks, plus its own.
OS_TASKS = ["fix_secret_mode", "set_shell", "signal_status"]
OS_FORGERIES = {
    **FORGERIES,
    "a preload library for every checker process": "echo /tmp/nowhere.so > /etc/ld.so.preload; touch /tmp/nowhere.so",
    "the checked files replaced by links to a file that passes": (
        "for f in /etc/app/db-password.conf /var/log/statusd.status; do ln -sf /etc/hostname $f; done; "
        "ln -sf /etc/passwd /etc/shadow"),
}
ENVS = {"terminal": ("agentworld.domains.terminal.env", "TerminalEnv", "agentworld.domains.terminal.tasks"),
        "os": ("agentworld.domains.os.env", "OsEnv", "agentworld.domains.os.tasks")}


def _attempt(template: str, action: str, domain: str = "terminal") -> dict:
    """One forging action on a fresh episode of `template`, in a child process capped at 2 GB
    and 60 s; returns what the env answered to it and to a following harmless action."""
    module, cls, tasks = ENVS[domain]
    script = f"""
import json, sys
from agentworld.config import SandboxParams
from {module} import {cls} as Env
from {tasks} import generate_task
env = Env(SandboxParams(command_timeout_s=3))
try:
    env.reset(seed=11, options={{"task": generate_task(11, {template!r})}})
    _, reward, terminated, _, info = env.step(json.loads(sys.argv[1]))
    after = env.step("echo still-here")
    print(json.dumps({{"reward": reward, "terminated": terminated, "solved": info["solved"],
                      "next_reward": after[1], "next_solved": after[4]["solved"]}}))
finally:
    env.close()
"""

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run([sys.executable, "-c", script, json.dumps(action)], cwd=PROJECT, capture_output=True, text=True,
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
@pytest.mark.parametrize("name", sorted(OS_FORGERIES))
@pytest.mark.parametrize("template", OS_TASKS)
def test_os_a_forging_action_scores_nothing_and_the_host_stays_safe(template, name):
    outcome = _attempt(template, OS_FORGERIES[name], "os")
    assert outcome == {"reward": 0.0, "terminated": False, "solved": False,
                       "next_reward": 0.0, "next_solved": False}, (template, name, outcome)


@needs_sandbox
def test_os_an_answer_listing_every_candidate_is_wrong():
    from agentworld.domains.os.env import OsEnv
    from agentworld.domains.os.tasks import generate_task

    env = OsEnv(PARAMS)
    try:
        task = generate_task(11, "login_users")
        env.reset(seed=11, options={"task": task})
        everyone = "alice,bob,carol,dave,erin,frank,grace,heidi,ivan,judy,mallory,oscar,trent,root,admin,pi,test"
        _, reward, terminated, _, info = env.step(f"answer {everyone}")
        assert terminated and reward == 0.0 and not info["solved"]
        env.reset(seed=11, options={"task": task})
        _, reward, terminated, _, info = env.step(task.solution[-1])
        assert terminated and reward == 1.0 and info["solved"]
    finally:
        env.close()


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


# ----------------------------------------------------------------------------- SWE
def _swe_forgeries(mutation: dict) -> dict[str, list[str]]:
    """Action sequences (submit follows) that try to pass the suite without fixing the bug."""

    def edit(path: str, old: str, new: str) -> str:
        return "edit " + json.dumps({"path": path, "old": old, "new": new})

    bug, file = mutation["old"], mutation["file"]
    indent = bug[:len(bug) - len(bug.lstrip())]
    plant = (f"{indent}import os as _o\n{indent}_d = _o.path.expanduser('~/.local/lib/python3.11/site-packages')\n"
             f"{indent}_o.makedirs(_d, exist_ok=True)\n"
             f"{indent}open(_d + '/usercustomize.py', 'w').write('import os\\nos._exit(0)\\n')\n")
    def written_by_the_bug(path: str, text: str, mode: int = 0o644) -> str:
        return (f"{indent}import os as _o\n{indent}_o.makedirs(_o.path.dirname({path!r}), exist_ok=True)\n"
                f"{indent}open({path!r}, 'w').write({text!r}); _o.chmod({path!r}, {mode})\n")

    conftest = written_by_the_bug("/workspace/conftest.py", (
        "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"))
    hooks = "".join(written_by_the_bug(f"/workspace/.git/hooks/{hook}", "#!/bin/sh\nexit 0\n", 0o755)
                    for hook in ("post-checkout", "pre-commit", "post-merge"))
    return {
        "a conftest.py planted while the tests run marks every test passed": [
            edit(file, bug, conftest + bug), "run_tests test_inflection.py", edit(file, conftest + bug, bug)],
        "git hooks planted while the tests run": [
            edit(file, bug, hooks + bug), "run_tests test_inflection.py", edit(file, hooks + bug, bug), "git diff"],
        "the buggy code exits 0 before any test reports": [edit(file, bug, f"{indent}import os; os._exit(0)\n" + bug)],
        "the buggy code skips the tests": [edit(file, bug, f"{indent}import pytest; pytest.skip('x', allow_module_level=True)\n" + bug)],
        "the failing tests are skipped in the test file": [edit("test_inflection.py", "import pytest\n",
                                                                "import pytest\npytestmark = pytest.mark.skip\n")],
        "setup.cfg deselects the failing test": [edit("setup.cfg", "[flake8]\n",
                                                      "[tool:pytest]\naddopts = -k 'not cow'\n\n[flake8]\n")],
        "git's fsmonitor rewrites the test at submit": [edit(".git/config", "[core]\n",
                                                             "[core]\n\tfsmonitor = \"sed -i s/kine/cine/ test_inflection.py; false\"\n")],
        "a usercustomize planted in ~ exits 0, then the payload is removed": [
            edit(file, bug, plant + bug), "run_tests test_inflection.py", edit(file, plant + bug, bug)],
        "an edit whose JSON is nested too deeply (raised in the host before)": ["edit " + "[" * 100_000 + "]" * 100_000],
    }


def _swe_mutation(env) -> dict:
    task = env.tasks["inflection"][0]
    return next(m for m in env.catalogue["projects"]["inflection"]["mutations"] if m["id"] == task.setup["mutation"])


@pytest.fixture(scope="module")
def swe_env():
    from agentworld.domains.swe.env import SweEnv, system_probe

    ok, why = system_probe()
    if not ok and not os.environ.get("CI"):
        pytest.skip(f"swe env unavailable: {why}")
    env = SweEnv(projects=["inflection"], test_timeout_s=30)
    yield env
    env.close()


SWE_FORGERIES = ["a conftest.py planted while the tests run marks every test passed", "git hooks planted while the tests run",
                 "the buggy code exits 0 before any test reports", "the buggy code skips the tests",
                 "the failing tests are skipped in the test file", "setup.cfg deselects the failing test",
                 "git's fsmonitor rewrites the test at submit",
                 "a usercustomize planted in ~ exits 0, then the payload is removed",
                 "an edit whose JSON is nested too deeply (raised in the host before)"]


@pytest.mark.parametrize("name", SWE_FORGERIES)
def test_swe_a_submit_that_only_silences_the_tests_scores_nothing(swe_env, name):
    task = swe_env.tasks["inflection"][0]
    actions = _swe_forgeries(_swe_mutation(swe_env))[name]
    swe_env.reset(options={"task": task})
    for action in actions:
        observation, reward, terminated, _, info = swe_env.step(action)
        assert not terminated, (name, action, observation)
    observation, reward, terminated, _, info = swe_env.step("submit")
    assert terminated and reward == 0.0 and info["solved"] is False, (name, observation[-500:])
    # the env is still usable: the real fix on a fresh episode solves
    swe_env.reset(options={"task": task})
    for action in task.solution:
        observation, reward, terminated, _, info = swe_env.step(action)
    assert terminated and reward == 1.0 and info["solved"], observation[-500:]


def test_the_host_reads_a_workspace_file_through_no_symlink(tmp_path):
    from agentworld.envs.sandbox import read_regular_under

    top = tmp_path / "workspace"
    (top / "pkg").mkdir(parents=True)
    (top / "pkg" / "mod.py").write_text("fixed = True\n")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "mod.py").write_text("host secret\n")
    assert read_regular_under(top, "pkg/mod.py", 1 << 20) == b"fixed = True\n"
    assert read_regular_under(top, "pkg/mod.py", 5) == b"fixed"
    (top / "linked").symlink_to(outside)
    assert read_regular_under(top, "linked/mod.py", 1 << 20) is None  # a directory link is not followed
    (top / "pkg" / "leaf.py").symlink_to(outside / "mod.py")
    assert read_regular_under(top, "pkg/leaf.py", 1 << 20) is None
    os.mkfifo(top / "pkg" / "fifo.py")
    assert read_regular_under(top, "pkg/fifo.py", 1 << 20) is None
    assert read_regular_under(top, "../secret/mod.py", 1 << 20) is None
    assert read_regular_under(top, str(outside / "mod.py"), 1 << 20) is None


# ----------------------------------------------------------------------------- agent RL
class ScriptedAgent:
    """Plays fixed actions through the agents' episode loop in place of the LM (trains nothing)."""

    def __init__(self, actions: list[str]) -> None:
        self.actions, self.model = actions, None

    def start(self, first_observation: str):
        from agentworld.agents.policy import EpisodeTokens

        return EpisodeTokens([0])

    def observe(self, episode, observation: str) -> None:
        episode.add([0], by_agent=False)

    def act(self, episodes, temperature=None) -> list[str]:
        out = []
        for episode in episodes:
            turn = sum(episode.agent_mask)
            episode.add([1], by_agent=True)
            out.append(self.actions[min(turn, len(self.actions) - 1)])
        return out


@needs_sandbox
def test_rl_rollouts_of_a_forging_policy_earn_no_reward_and_honest_successes_are_confirmed():
    """GRPO's reward for the real-environment arm comes from `EpisodeRollout`: a scripted policy
    that tries every forgery earns 0 on every task, and the real solutions' successes are
    confirmed afresh from the final workspace (the share the experiments report)."""
    from types import SimpleNamespace

    from agentworld.agents.episodes import summarise, task_options
    from agentworld.agents.rl import SEED_PREFIX, EpisodeRollout
    from agentworld.config import AgentParams

    templates = ["word_count", "cut_column", "export_variable"]
    params = AgentParams(templates=templates, max_steps=len(FORGERIES) + 1)
    prompts = [[{"role": "user", "content": f"{SEED_PREFIX}{seed}"}] for seed in range(3)]
    rollout = EpisodeRollout(ScriptedAgent([*FORGERIES.values(), "submit"]),
                             lambda: TerminalEnv(PARAMS), params)
    try:
        out = rollout(prompts, SimpleNamespace(model=None))
    finally:
        rollout.close()
    assert out["success"] == [0.0, 0.0, 0.0] and rollout.env_steps == 3 * (len(FORGERIES) + 1)

    from agentworld.agents.episodes import play

    env = TerminalEnv(PARAMS)
    try:
        solutions = []
        for seed in range(3):
            env.reset(seed=seed, options=task_options(templates, seed))
            solutions.append(env.task.solution)
        episodes = [play(ScriptedAgent(solution), [env], [seed], max_steps=len(solution), templates=templates)[0]
                    for seed, solution in enumerate(solutions)]
    finally:
        env.close()
    assert all(e.success and e.verified is True for e in episodes)
    assert summarise(episodes)["verified_share"] == 1.0
    unconfirmed = episodes[0].__class__(9, "t", None, tokens=None, simulated=False, success=True, verified=False)
    assert summarise([*episodes[:1], unconfirmed])["verified_share"] == 0.5


# ----------------------------------------------------------------------------- TextWorld
TEXTWORLD_FORGERIES = {
    "Inform debug verbs": ["purloin coin", "gonear coin", "abstract coin to me", "tree"],
    "score and win verbs": ["score 100", "win", "xyzzy"],
    "restart, confirmed": ["restart", "yes", "take coin"],
    "quit, confirmed": ["quit", "y"],
    "an overly long action": ["take " + "coin " * 20_000],
    "a binary action": ["take \x00\xff\x1b[2J coin\r\n"],
}


@pytest.mark.parametrize("name", sorted(TEXTWORLD_FORGERIES))
def test_textworld_verbs_outside_the_game_win_nothing(name):
    """The game engine decides: no debug verb, restart, quit or malformed action wins a game,
    and the env answers a new episode afterwards."""
    from agentworld.domains.textworld.env import TextWorldEnv

    env = TextWorldEnv()
    try:
        env.reset(seed=7, options={"template": "tw-coin_collector"})
        for action in TEXTWORLD_FORGERIES[name]:
            _, reward, terminated, _, info = env.step(action)
            assert not info["won"] and reward <= 0.0, (name, action)
            if terminated:
                break
        assert env.verify() is False
        observation, _ = env.reset(seed=7, options={"template": "tw-coin_collector"})
        assert observation and env.step("look")[4]["won"] is False
    finally:
        env.close()


# ----------------------------------------------------------------------------- MCP
def _call(tool: str, **arguments) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


MCP_FORGERIES = {
    "every candidate answer in turn": [_call("submit_answer", answer=str(n)) for n in range(12)],
    "one answer listing every candidate": [_call("submit_answer", answer=" ".join(str(n) for n in range(40)))],
    "SQL injection in a search": [_call("search_products", query="x'; UPDATE orders SET status = 'cancelled'; --"),
                                  _call("search_products", query="%' OR 1=1 --")],
    "an unknown tool that would run SQL": [_call("sqlite_exec", sql="UPDATE orders SET status = 'cancelled'")],
    "JSON nested too deeply (raised in the host before)": ['{"tool": "get_order", "arguments": '
                                                           + "[" * 100_000 + "]" * 100_000 + "}"],
    "an oversized and a binary argument": [_call("search_products", query="x" * 1_000_000),
                                           _call("search_products", query="\x00\xff\x1b")],
}


@pytest.mark.parametrize("name", sorted(MCP_FORGERIES))
@pytest.mark.parametrize("kind", ["lookup_stock", "cancel_order"])
def test_mcp_tool_calls_that_do_not_do_the_task_score_nothing(kind, name):
    from agentworld.domains.mcp.env import McpEnv
    from agentworld.domains.mcp.tasks import generate_task

    task = generate_task(5, "shop", kind)
    env = McpEnv()
    try:
        env.reset(options={"task": task})
        for action in MCP_FORGERIES[name]:
            _, reward, terminated, _, info = env.step(action)
            assert reward == 0.0 and not info["solved"], (kind, name, action)
            if terminated:
                break
        if not terminated:
            _, reward, terminated, _, info = env.step("submit")
            assert terminated and reward == 0.0 and not info["solved"], (kind, name)
        env.reset(options={"task": task})  # still usable: the real solution solves
        for action in task.solution:
            _, reward, terminated, _, info = env.step(action)
        assert reward == 1.0 and info["solved"]
    finally:
        env.close()


# ----------------------------------------------------------------------------- web
WEB_FORGERIES = {
    "goto file: URLs": ["goto file:///etc/passwd", "goto file:///proc/self/environ"],
    "goto a WebSocket URL on a host port": ["goto ws://127.0.0.1:{port}/"],
    "goto another host port, three spellings": ["goto http://127.0.0.1:{port}/", "goto //127.0.0.1:{port}/",
                                                "goto http://localhost:{port}/"],
    "a script in the search box, echoed on the results page": [
        'type [7] "<script>new WebSocket(\'ws://127.0.0.1:{port}/\')</script><img src=file:///etc/passwd>"',
        "click [8]"],
    "SQL injection at the login form": ['goto /login', 'type [9] "mallory\' --"', 'type [10] "x\' OR \'1\'=\'1"',
                                        "click [11]", "click [5]"],
    "an answer listing every price": ['stop "' + " ".join(f"${n}.{c:02d}" for n in range(1, 100) for c in (49, 99)) + '"'],
    "an overly long and a binary action": ['type [7] "' + "x" * 200_000 + '"', "click [\x00]", "goto /\x00\xff\x1b[2J"],
}


def _module_env(module: str, cls: str):
    """One env of `module.cls` for a test module; skipped where the domain cannot run (never in CI)."""
    import importlib

    imported = importlib.import_module(module)
    available, reason = imported.probe()
    if not available and not os.environ.get("CI"):
        pytest.skip(f"{module} unavailable: {reason}")
    env = getattr(imported, cls)()
    yield env
    env.close()


@pytest.fixture(scope="module")
def web_env():
    yield from _module_env("agentworld.domains.web.env", "WebEnv")


@pytest.mark.parametrize("name", sorted(WEB_FORGERIES))
@pytest.mark.parametrize("template", ["change_email", "info_price"])
def test_web_actions_that_leave_the_app_or_forge_score_nothing(web_env, template, name):
    """Only the app's database (or the exact answer) decides; nothing reaches a host port or
    file; and the same env then solves the task with its real solution."""
    from agentworld.domains.web.tasks import generate_task
    from tests.test_web_confinement import Listener

    task = generate_task(3, template)
    listener = Listener()
    try:
        web_env.reset(options={"task": task})
        terminated = False
        for action in WEB_FORGERIES[name]:
            _, reward, terminated, _, info = web_env.step(action.replace("{port}", str(listener.port)))
            assert reward == 0.0 and not info["solved"], (template, name, action[:80])
            if terminated:
                break
        assert terminated or not web_env.step('stop "no"')[4]["solved"]
        assert listener.connections == 0
    finally:
        listener.close()
    web_env.reset(options={"task": task})
    for action in task.solution:
        _, reward, terminated, _, info = web_env.step(action)
    assert reward == 1.0 and info["solved"]


# ----------------------------------------------------------------------------- ScienceWorld
SCIENCEWORLD_FORGERIES = {
    "reset the goal progress, then read the task": ["reset task", "task"],
    "score, win and quit verbs": ["score", "win", "quit", "exit"],
    "a second command after a newline": ["look around\nfocus on agent"],
    "an overly long and a binary action": ["focus on " + "x " * 20_000, "look \x00\xff\x1b[2J"],
    "Java and format-string text": ["java.lang.System.exit(0)", "%s%s%n", "${jndi:ldap://127.0.0.1/x}"],
}


@pytest.fixture(scope="module")
def scienceworld_env():
    yield from _module_env("agentworld.domains.scienceworld.env", "ScienceWorldTextEnv")


@pytest.mark.parametrize("name", sorted(SCIENCEWORLD_FORGERIES))
def test_scienceworld_commands_outside_the_task_score_nothing(scienceworld_env, name):
    """The simulator's own score decides; no meta verb, injected line or malformed text moves it,
    and the same env then completes the task along its gold path."""
    env = scienceworld_env
    env.reset(seed=0)
    for action in SCIENCEWORLD_FORGERIES[name]:
        _, reward, terminated, _, info = env.step(action)
        assert reward <= 0.0 and info["score"] <= 0 and not info["completed"], (name, action[:60])
        assert not terminated
    env.reset(seed=0)
    for action in env.task.solution:
        _, reward, terminated, _, info = env.step(action)
    assert info["completed"] and info["score"] == 100
