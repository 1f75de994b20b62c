"""Issue tracker (Jira/Linear-like): projects, users, issues and comments."""

from __future__ import annotations

import random
import sqlite3
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from agentworld.domains.mcp.apps.common import (
    AppDB,
    Limit,
    LongText,
    Query,
    RowId,
    ShortText,
    add_submit_answer,
    denied,
    first_answer,
    invalid,
    like,
    normalise_answer,
    not_found,
    rows,
    tick,
    tool_action,
)

NAME = "tracker"
DESCRIPTION = "an issue tracker with projects, users, issues and comments"
SEARCH_LIMIT = 6

SCHEMA = """
CREATE TABLE users (username TEXT PRIMARY KEY, full_name TEXT NOT NULL, role TEXT NOT NULL);
CREATE TABLE projects (key TEXT PRIMARY KEY, name TEXT NOT NULL, archived INTEGER NOT NULL,
                       lead TEXT NOT NULL REFERENCES users(username));
CREATE TABLE issues (id INTEGER PRIMARY KEY, project_key TEXT NOT NULL REFERENCES projects(key),
                     title TEXT NOT NULL, description TEXT NOT NULL, status TEXT NOT NULL, priority TEXT NOT NULL,
                     assignee TEXT REFERENCES users(username), reporter TEXT NOT NULL REFERENCES users(username),
                     created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE comments (id INTEGER PRIMARY KEY, issue_id INTEGER NOT NULL REFERENCES issues(id),
                       author TEXT NOT NULL REFERENCES users(username), body TEXT NOT NULL, created_at TEXT NOT NULL);
"""

STATUSES = ("open", "in_progress", "closed")
PRIORITIES = ("low", "medium", "high", "critical")
Status = Literal["open", "in_progress", "closed"]
Priority = Literal["low", "medium", "high", "critical"]
ProjectKey = Annotated[str, Field(pattern=r"^[A-Z]{2,5}$", description="project key, e.g. WEB")]
Username = Annotated[str, Field(pattern=r"^[a-z][a-z0-9._]{1,30}$")]
ME = "agent"  # the account the agent acts as

_FIRST = ("Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam", "Maya",
          "Noah", "Olga", "Priya", "Quinn", "Rosa", "Sami", "Tara")
_LAST = ("Adams", "Baker", "Chen", "Diaz", "Evans", "Fischer", "Garcia", "Hughes", "Ito", "Jensen", "Kowalski",
         "Lopez", "Moreau", "Novak", "Okafor", "Patel", "Rossi", "Silva", "Tanaka", "Weber")
_PROJECTS = (("WEB", "Web storefront"), ("API", "Public API"), ("OPS", "Operations"), ("MOB", "Mobile app"),
             ("DATA", "Data platform"), ("SEC", "Security"), ("INFRA", "Infrastructure"))
_VERBS = ("Fix", "Investigate", "Refactor", "Add", "Remove", "Document", "Speed up", "Migrate")
_THINGS = ("login form", "checkout flow", "search endpoint", "billing export", "dark mode", "rate limiter",
           "CSV import", "password reset", "audit log", "push notifications", "cache layer", "error pages",
           "session timeout", "webhook retries", "user avatars", "report scheduler")
_CONTEXTS = ("on Safari", "for large accounts", "after the last release", "in staging", "under load",
             "for new users", "in the EU region", "on Android")
_COMMENTS = ("Can reproduce on my machine.", "Looks related to the recent deploy.", "Needs a design review first.",
             "I will pick this up next sprint.", "Added logs, waiting for the next occurrence.",
             "Customer escalated this again.", "Blocked by the database migration.", "Fix is in review.")


# ----------------------------------------------------------------------------- seeded data
def generate(rng: random.Random, clock: str) -> dict[str, list[dict[str, Any]]]:
    people = rng.sample([(f, l) for f in _FIRST for l in _LAST], 8)
    users = [{"username": ME, "full_name": "Agent Smith", "role": "developer"}]
    for first, last in people:
        users.append({"username": f"{first.lower()}.{last.lower()}", "full_name": f"{first} {last}",
                      "role": rng.choice(("developer", "developer", "designer", "manager", "qa"))})
    names = [u["username"] for u in users[1:]]
    projects = [{"key": k, "name": n, "archived": 0, "lead": rng.choice(names)} for k, n in rng.sample(_PROJECTS, 4)]
    projects[-1]["archived"] = 1
    issues, comments = [], []
    for i in range(1, 41):
        project = projects[i % 4] if i <= 4 else rng.choice(projects)
        month = int(clock[5:7])
        created = f"{clock[:5]}{max(1, month - rng.randint(1, 3)):02d}-{rng.randint(1, 28):02d}T{rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:00Z"
        status = rng.choices(STATUSES, weights=(5, 3, 3))[0]
        issues.append({
            "id": i, "project_key": project["key"],
            "title": f"{rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_CONTEXTS)}",
            "description": f"Reported by support ticket #{rng.randint(1000, 9999)}.",
            "status": status, "priority": rng.choices(PRIORITIES, weights=(3, 4, 3, 1))[0],
            "assignee": None if rng.random() < 0.15 else rng.choice(names),
            "reporter": rng.choice(names), "created_at": created, "updated_at": created,
        })
    for c in range(1, 31):
        issue = rng.choice(issues)
        comments.append({"id": c, "issue_id": issue["id"], "author": rng.choice(names),
                         "body": rng.choice(_COMMENTS), "created_at": issue["created_at"]})
    return {"users": users, "projects": projects, "issues": issues, "comments": comments}


# ----------------------------------------------------------------------------- server
def build_server(db: AppDB) -> MCPServer:
    server = MCPServer("tracker", instructions="Issue tracker. You act as user 'agent'.", log_level="ERROR")

    def project(conn: sqlite3.Connection, key: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM projects WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise not_found("project", key)
        return row

    def issue(conn: sqlite3.Connection, issue_id: int, *, write: bool = False) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM issues WHERE id = ?", (issue_id,)).fetchone()
        if row is None:
            raise not_found("issue", issue_id)
        if write and project(conn, row["project_key"])["archived"]:
            raise denied(f"project {row['project_key']} is archived and read-only")
        return dict(row)

    def user(conn: sqlite3.Connection, username: str) -> None:
        if conn.execute("SELECT 1 FROM users WHERE username = ?", (username,)).fetchone() is None:
            raise not_found("user", username)

    @server.tool(description="List all projects with their lead and whether they are archived (read-only).")
    def list_projects() -> dict[str, Any]:
        with db.tx() as conn:
            found = rows(conn.execute("SELECT key, name, lead, archived FROM projects ORDER BY key"))
        for p in found:
            p["archived"] = bool(p["archived"])
        return {"projects": found}

    @server.tool(description="List users who can be assigned issues.")
    def list_users() -> dict[str, Any]:
        with db.tx() as conn:
            return {"users": rows(conn.execute("SELECT username, full_name, role FROM users ORDER BY username"))}

    @server.tool(description="List a project's issues, optionally filtered by status and assignee.")
    def list_issues(project_key: ProjectKey, status: Status | None = None, assignee: Username | None = None,
                    limit: Limit = 20) -> dict[str, Any]:
        with db.tx() as conn:
            project(conn, project_key)
            sql, args = "SELECT id, title, status, priority, assignee FROM issues WHERE project_key = ?", [project_key]
            if status is not None:
                sql, args = sql + " AND status = ?", [*args, status]
            if assignee is not None:
                user(conn, assignee)
                sql, args = sql + " AND assignee = ?", [*args, assignee]
            total = conn.execute(sql.replace("id, title, status, priority, assignee", "COUNT(*)"), args).fetchone()[0]
            found = rows(conn.execute(sql + " ORDER BY id LIMIT ?", [*args, limit]))
        return {"issues": found, "project_key": project_key, "total": total}

    @server.tool(description="Get one issue with its comments.")
    def get_issue(issue_id: RowId) -> dict[str, Any]:
        with db.tx() as conn:
            found = issue(conn, issue_id)
            found["comments"] = rows(conn.execute(
                "SELECT id, author, body, created_at FROM comments WHERE issue_id = ? ORDER BY id", (issue_id,)))
        return found

    @server.tool(description=f"Full-text search over issue titles in all projects (rate limited: {SEARCH_LIMIT} calls).")
    def search_issues(query: Query, limit: Limit = 10) -> dict[str, Any]:
        db.rate_limit("search_issues", SEARCH_LIMIT)
        with db.tx() as conn:
            found = rows(conn.execute(
                "SELECT id, project_key, title, status FROM issues WHERE lower(title) LIKE ? ESCAPE '\\' "
                "ORDER BY id LIMIT ?", (like(query), limit)))
        return {"issues": found, "query": query}

    @server.tool(description="Create an issue in a project; it starts open and is reported by you.")
    def create_issue(project_key: ProjectKey, title: ShortText, priority: Priority = "medium",
                     assignee: Username | None = None, description: LongText = "No description.") -> dict[str, Any]:
        with db.tx() as conn:
            if project(conn, project_key)["archived"]:
                raise denied(f"project {project_key} is archived and read-only")
            if assignee is not None:
                user(conn, assignee)
            now = tick(conn)
            cur = conn.execute(
                "INSERT INTO issues (project_key, title, description, status, priority, assignee, reporter, "
                "created_at, updated_at) VALUES (?, ?, ?, 'open', ?, ?, ?, ?, ?)",
                (project_key, title, description, priority, assignee, ME, now, now))
            return issue(conn, int(cur.lastrowid))

    @server.tool(description="Change an issue's status, priority and/or assignee (use assignee '' to unassign).")
    def update_issue(issue_id: RowId, status: Status | None = None, priority: Priority | None = None,
                     assignee: Annotated[str, Field(max_length=32)] | None = None) -> dict[str, Any]:
        if status is None and priority is None and assignee is None:
            raise invalid("give at least one of status, priority, assignee")
        with db.tx() as conn:
            current = issue(conn, issue_id, write=True)
            if assignee:
                user(conn, assignee)
            if status == "in_progress" and current["status"] == "closed":
                raise invalid(f"issue {issue_id} is closed; reopen it (status 'open') before starting work")
            changes = {k: v for k, v in (("status", status), ("priority", priority)) if v is not None}
            if assignee is not None:
                changes["assignee"] = assignee or None
            changes["updated_at"] = tick(conn)
            conn.execute(f"UPDATE issues SET {', '.join(f'{k} = ?' for k in changes)} WHERE id = ?",  # noqa: S608 - fixed column names
                         (*changes.values(), issue_id))
            return issue(conn, issue_id)

    @server.tool(description="Add a comment to an issue as user 'agent'.")
    def add_comment(issue_id: RowId, body: LongText) -> dict[str, Any]:
        with db.tx() as conn:
            issue(conn, issue_id, write=True)
            now = tick(conn)
            cur = conn.execute("INSERT INTO comments (issue_id, author, body, created_at) VALUES (?, ?, ?, ?)",
                               (issue_id, ME, body, now))
        return {"author": ME, "body": body, "created_at": now, "id": cur.lastrowid, "issue_id": issue_id}

    add_submit_answer(server, db)
    return server


# ----------------------------------------------------------------------------- tasks
KINDS = ("close_with_comment", "reassign", "set_priority", "create_issue", "start_work",
         "lookup_assignee", "lookup_count", "lookup_latest")
READ_ONLY_TOOLS = ("list_projects", "list_users", "list_issues", "get_issue")


def make_task(kind: str, data: dict[str, list[dict[str, Any]]], rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    """(instruction, check, solution) of task `kind` over the seeded data."""
    live = {p["key"] for p in data["projects"] if not p["archived"]}
    people = [u["username"] for u in data["users"] if u["username"] != ME]
    editable = [i for i in data["issues"] if i["project_key"] in live]
    open_issues = [i for i in editable if i["status"] != "closed"]
    if kind == "close_with_comment":
        it = rng.choice(open_issues)
        note = f"Fixed in release {rng.randint(2, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        return (f"Close issue {it['id']} (\"{it['title']}\") and leave a comment saying \"{note}\".",
                {"kind": kind, "issue_id": it["id"], "text": note},
                [tool_action("get_issue", issue_id=it["id"]), tool_action("add_comment", issue_id=it["id"], body=note),
                 tool_action("update_issue", issue_id=it["id"], status="closed")])
    if kind == "reassign":
        it = rng.choice(open_issues)
        to = rng.choice([p for p in people if p != it["assignee"]])
        full = next(u["full_name"] for u in data["users"] if u["username"] == to)
        return (f"Reassign issue {it['id']} in project {it['project_key']} to {full}.",
                {"kind": kind, "issue_id": it["id"], "assignee": to},
                [tool_action("list_users"), tool_action("update_issue", issue_id=it["id"], assignee=to)])
    if kind == "set_priority":
        it = rng.choice([i for i in open_issues if i["priority"] != "critical"])
        return (f"Issue {it['id']} (\"{it['title']}\") is blocking customers: raise its priority to critical.",
                {"kind": kind, "issue_id": it["id"], "priority": "critical"},
                [tool_action("update_issue", issue_id=it["id"], priority="critical")])
    if kind == "create_issue":
        key = rng.choice(sorted(live))
        title = f"{rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_CONTEXTS)}"
        prio = rng.choice(PRIORITIES)
        who = rng.choice(people)
        return (f"Create an issue in project {key} titled \"{title}\" with priority {prio}, assigned to {who}.",
                {"kind": kind, "project_key": key, "title": title, "priority": prio, "assignee": who},
                [tool_action("create_issue", project_key=key, title=title, priority=prio, assignee=who)])
    if kind == "start_work":
        it = rng.choice([i for i in open_issues if i["status"] == "open"])
        return (f"Start working on issue {it['id']}: set it to in_progress and assign it to yourself (user 'agent').",
                {"kind": kind, "issue_id": it["id"], "status": "in_progress", "assignee": ME},
                [tool_action("get_issue", issue_id=it["id"]),
                 tool_action("update_issue", issue_id=it["id"], status="in_progress", assignee=ME)])
    if kind == "lookup_assignee":
        it = rng.choice([i for i in data["issues"] if i["assignee"]])
        return (f"Who is assigned to issue {it['id']}? Submit their username with submit_answer.",
                {"kind": "answer", "answer": it["assignee"]},
                [tool_action("get_issue", issue_id=it["id"]), tool_action("submit_answer", answer=it["assignee"])])
    if kind == "lookup_count":
        key = rng.choice(sorted(p["key"] for p in data["projects"]))
        status = rng.choice(("open", "in_progress", "closed"))
        n = sum(1 for i in data["issues"] if i["project_key"] == key and i["status"] == status)
        return (f"How many issues in project {key} have status {status}? Submit the number with submit_answer.",
                {"kind": "answer", "answer": str(n)},
                [tool_action("list_issues", project_key=key, status=status, limit=50), tool_action("submit_answer", answer=str(n))])
    if kind == "lookup_latest":
        key = rng.choice(sorted(p["key"] for p in data["projects"]))
        mine = [i for i in data["issues"] if i["project_key"] == key]
        latest = max(mine, key=lambda i: (i["created_at"], i["id"]))
        return (f"What is the title of the most recently created issue in project {key}? "
                "Submit the exact title with submit_answer.",
                {"kind": "answer", "answer": latest["title"]},
                [tool_action("list_issues", project_key=key, limit=50), tool_action("get_issue", issue_id=latest["id"]),
                 tool_action("submit_answer", answer=latest["title"])])
    raise ValueError(f"unknown tracker task kind {kind!r}")


def check(conn: sqlite3.Connection, spec: dict[str, Any]) -> bool:
    kind = spec["kind"]
    if kind == "answer":
        got = first_answer(conn)
        return got is not None and normalise_answer(got) == normalise_answer(spec["answer"])
    if kind == "create_issue":
        return conn.execute("SELECT 1 FROM issues WHERE project_key = ? AND title = ? AND priority = ? AND assignee = ?",
                            (spec["project_key"], spec["title"], spec["priority"], spec["assignee"])).fetchone() is not None
    row = conn.execute("SELECT * FROM issues WHERE id = ?", (spec["issue_id"],)).fetchone()
    if row is None:
        return False
    if kind == "close_with_comment":
        commented = conn.execute("SELECT 1 FROM comments WHERE issue_id = ? AND instr(body, ?) > 0",
                                 (spec["issue_id"], spec["text"])).fetchone() is not None
        return row["status"] == "closed" and commented
    if kind == "reassign":
        return row["assignee"] == spec["assignee"]
    if kind == "set_priority":
        return row["priority"] == spec["priority"]
    if kind == "start_work":
        return row["status"] == spec["status"] and row["assignee"] == spec["assignee"]
    raise ValueError(f"unknown tracker check {kind!r}")


# ----------------------------------------------------------------------------- behaviour vocabulary
def explore(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A valid call that does not aim at the goal (`v` is the episode vocabulary)."""
    roll = rng.random()
    iid, key = v.pick("issue_id", rng), v.pick("project_key", rng)
    if roll < 0.15:
        return rng.choice((("list_projects", {}), ("list_users", {})))
    if roll < 0.40:
        args: dict[str, Any] = {"project_key": key}
        if rng.random() < 0.5:
            args["status"] = rng.choice(STATUSES)
        return "list_issues", args
    if roll < 0.70:
        return "get_issue", {"issue_id": iid}
    if roll < 0.80:
        return "search_issues", {"query": rng.choice(_THINGS).split()[0]}
    if roll < 0.90:
        return "add_comment", {"issue_id": iid, "body": rng.choice(_COMMENTS)}
    return "update_issue", {"issue_id": iid, "priority": rng.choice(PRIORITIES)}


def inspect(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    if rng.random() < 0.5:
        return "get_issue", {"issue_id": v.pick("issue_id", rng)}
    return rng.choice((("list_projects", {}), ("list_issues", {"project_key": v.pick("project_key", rng)})))


def mistake(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A call the server refuses: unknown ids, bad enums, archived projects, constraint violations."""
    iid = v.pick("issue_id", rng)
    options: list[tuple[str, dict[str, Any]]] = [
        ("get_issue", {"issue_id": rng.randint(500, 99999)}),
        ("get_issue", {"issue_id": -rng.randint(0, 5)}),
        ("list_issues", {"project_key": rng.choice(("ZZZ", "WEBB", "web", "X1"))}),
        ("update_issue", {"issue_id": iid, "status": rng.choice(("done", "resolved", "CLOSED"))}),
        ("update_issue", {"issue_id": iid}),
        ("update_issue", {"issue_id": iid, "assignee": rng.choice(("nobody", "john.doe", "admin"))}),
        ("update_issue", {"issue_id": iid, "priority": rng.choice(("urgent", "P1", 3))}),
        ("add_comment", {"issue_id": iid, "body": ""}),
        ("create_issue", {"project_key": v.pick("project_key", rng), "title": ""}),
        ("create_issue", {"title": "Missing project"}),
        ("list_issues", {"project_key": v.pick("project_key", rng), "limit": rng.choice((0, 500))}),
    ]
    archived = v.values.get("archived_project")
    if archived:
        options.append(("create_issue", {"project_key": archived[0], "title": "New work item"}))
        if v.values.get("archived_issue"):
            options.append(("update_issue", {"issue_id": v.values["archived_issue"][0], "status": "closed"}))
    return rng.choice(options)


def entities(data: dict[str, list[dict[str, Any]]], rng: random.Random) -> dict[str, list[Any]]:
    archived = [p["key"] for p in data["projects"] if p["archived"]]
    return {"issue_id": sorted(rng.sample([i["id"] for i in data["issues"]], 6)),
            "project_key": sorted(p["key"] for p in data["projects"]),
            "username": sorted(u["username"] for u in data["users"])[:4],
            "archived_project": archived,
            "archived_issue": [i["id"] for i in data["issues"] if i["project_key"] in archived][:2]}
