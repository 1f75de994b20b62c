"""The os domain, declared for the shared layers (see `agentworld.domains.base.Domain`).

System administration on a seeded Linux server (bubblewrap, no network, root of a user namespace):
users/groups, permissions, processes, systemd units, disk usage, logs, dpkg, cron.
"""

from agentworld.domains import lazy
from agentworld.domains.base import SHELL_TOOL, Domain, ShapeRule, shell_fault
from agentworld.envs.rationale import describe_shell

#: Actions that end an episode.
END_ACTIONS = frozenset({"exit", "logout", "submit"})
WORLD_MODEL_PROMPT = (
    "You are a world model of a Linux server's root shell: bash as root in a sandbox with no network,"
    " holding users and groups, systemd unit files, cron jobs, logs under /var/log, a dpkg package "
    "database and application files under /opt and /srv. Given the administrator's command, answer "
    "with exactly what the shell prints (stdout and stderr), nothing else; the actions `answer ...`, "
    "`submit` and `exit` end the episode and print nothing. Keep the system's state consistent across"
    " turns."
)

DOMAIN = Domain(
    name="os",
    description=(
        "system administration on a seeded Linux server (bubblewrap, no network, root of a user "
        "namespace): users/groups, permissions, processes, systemd units, disk usage, logs, dpkg, "
        "cron"
    ),
    entry_point="agentworld.domains.os.env:factory",
    probe=lazy("agentworld.domains.os.env", "probe"),
    policies=lazy("agentworld.domains.os.env", "os_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    shape_rules=(
        ShapeRule(
            "ending the episode (answer, submit, exit) prints nothing",
            "regex",
            "^$",
            verbs=("answer", "submit", "exit", "logout"),
        ),
    ),
    describer=describe_shell,
    judge_title="a Linux server's root shell",
    judge_format="Plain stdout/stderr; `answer`, `submit` and `exit` print nothing.",
    judge_notes=(
        "Users, groups, units, package names and versions, log lines the agent caused must match; "
        "pre-existing log and config text need only be plausible; timestamps and pids are runtime "
        "metadata."
    ),
    end_actions=END_ACTIONS,
    action_tool=SHELL_TOOL,
    fault_observation=shell_fault,
)
