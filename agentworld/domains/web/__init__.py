"""The `web` domain: Agora, a real Flask shop + forum over SQLite, driven by headless Chromium.

Modules: `app` (the web application and its server thread), `seed` (the seeded database),
`tasks` (task templates, solutions and database checkers), `browser` (Playwright/Chromium and the
page-to-text snapshot), `env` (the TextEnv, probe, factory, behaviour policies). Importing this
package is light: it declares the domain (`DOMAIN`, with `rationale`), and Playwright and Flask are
imported by the modules that need them.
"""

from agentworld.domains import lazy
from agentworld.domains.base import Domain, ShapeRule
from agentworld.domains.web.rationale import describe_web

#: Actions that end an episode.
END_ACTIONS = frozenset({"stop"})
WORLD_MODEL_PROMPT = (
    "You are a world model of Agora, a small online shop with a community forum (products, reviews, "
    "orders, forum threads, account settings), seen by an agent through a headless browser. Given the"
    ' agent\'s browser action (click [id], type [id] "text", select [id] "option", goto /path, back, '
    "scroll down|up, stop), answer with exactly what the environment returns: the `URL:` line and the"
    " page's accessibility tree with numbered interactive elements, or the single `Error: ...` line. "
    "Keep the site consistent across turns: logins, orders, posts, reviews and profile changes "
    "persist."
)

DOMAIN = Domain(
    name="web",
    description=(
        "Agora, a Flask shop and forum on seeded SQLite, in headless Chromium via Playwright: login, "
        "search, orders, reviews, forum posts, account settings; accessibility-tree observations"
    ),
    entry_point="agentworld.domains.web.env:factory",
    probe=lazy("agentworld.domains.web.env", "probe"),
    policies=lazy("agentworld.domains.web.env", "web_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    shape_rules=(
        ShapeRule(
            "a browser action answers with the page's accessibility tree or one error line",
            "regex",
            "^(?:URL: /\\S*|Error: [^\\n]+$)",
            verbs=("click", "type", "select", "goto", "back", "scroll"),
        ),
        ShapeRule("stop ends the episode", "regex", "^(?:Episode ended\\.|Error: [^\\n]+)$", verbs=("stop",)),
    ),
    describer=describe_web,
    judge_title="a web shop and forum seen through a headless browser",
    judge_format=(
        'A page is "URL: /path" then the accessibility tree with numbered interactive elements ([n] '
        'role "name"); a failed action is one "Error: ..." line; stop answers "Episode ended.".'
    ),
    judge_notes=(
        "The URL, element ids, roles, names, form values and state (logged in, cart, orders, posts) "
        "must match; product and forum prose that existed before need only be plausible."
    ),
    end_actions=END_ACTIONS,
)
