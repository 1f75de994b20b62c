"""The terminal domain, declared for the shared layers (see `agentworld.domains.base.Domain`).

Bash in a bubblewrap sandbox (no network), parametrised shell tasks.
"""

from agentworld.domains import lazy
from agentworld.domains.base import SHELL_TOOL, Domain, shell_fault
from agentworld.envs.rationale import describe_shell

#: Actions that end an episode.
END_ACTIONS = frozenset({"exit", "submit"})
WORLD_MODEL_PROMPT = (
    "You are a world model of a Linux terminal: a bash shell in a sandbox with no network, working "
    "directory /workspace. Given the agent's command, answer with exactly what the shell prints "
    "(stdout and stderr), nothing else. Keep the shell's state across turns: working directory, "
    "variables and files follow from earlier commands."
)

DOMAIN = Domain(
    name="terminal",
    description="bash in a bubblewrap sandbox (no network), parametrised shell tasks",
    entry_point="agentworld.domains.terminal.env:TerminalEnv",
    probe=lazy("agentworld.envs.sandbox", "sandbox_available"),
    policies=lazy("agentworld.domains.terminal.behaviour", "make_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    describer=describe_shell,
    judge_title="a Linux bash shell in a sandbox",
    judge_format="Shell output is plain stdout/stderr, no prompt, no commentary.",
    judge_notes=(
        "Exit messages such as `No such file or directory` or `command not found` must match the "
        "reference; file listings must name the same files; ls dates/times are runtime metadata."
    ),
    start_cwd="/workspace",
    first_observation=lazy("agentworld.domains.terminal.env", "first_observation"),
    end_actions=END_ACTIONS,
    action_tool=SHELL_TOOL,
    fault_observation=shell_fault,
    agent_prompt=(
        "You operate a Linux bash shell to complete the task in the first message. Reply with exactly"
        " one shell command per turn. Reply submit when the task is done."
    ),
    done_action="submit",
    corpus_sources={"manpages": lazy("agentworld.domains.terminal.cpt_corpus", "manpages")},  # os's commands too
    task_templates=lazy("agentworld.domains.terminal.tasks", "template_names"),
    # Templates whose instruction names everything the solution needs (short, verifiable).
    agent_templates=("rename_file", "count_lines", "word_count", "grep_count", "reverse_lines", "sort_unique",
                     "gzip_file", "chmod_private", "export_variable", "sum_range"),
)
