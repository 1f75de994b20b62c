"""CRM (HubSpot/Salesforce-like): companies, contacts, deals and logged activities."""

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

NAME = "crm"
DESCRIPTION = "a CRM with companies, contacts, deals and logged activities"
SEARCH_LIMIT = 6

SCHEMA = """
CREATE TABLE companies (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, industry TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE contacts (id INTEGER PRIMARY KEY, company_id INTEGER NOT NULL REFERENCES companies(id),
                       first_name TEXT NOT NULL, last_name TEXT NOT NULL, email TEXT NOT NULL UNIQUE,
                       phone TEXT, title TEXT, owner TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE deals (id INTEGER PRIMARY KEY, company_id INTEGER NOT NULL REFERENCES companies(id),
                    contact_id INTEGER REFERENCES contacts(id), title TEXT NOT NULL, amount INTEGER NOT NULL,
                    stage TEXT NOT NULL, close_date TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE activities (id INTEGER PRIMARY KEY, contact_id INTEGER NOT NULL REFERENCES contacts(id),
                         kind TEXT NOT NULL, note TEXT NOT NULL, at TEXT NOT NULL);
"""

STAGES = ("lead", "qualified", "proposal", "negotiation", "won", "lost")
OPEN_STAGES = STAGES[:4]
Stage = Literal["lead", "qualified", "proposal", "negotiation", "won", "lost"]
ActivityKind = Literal["call", "email", "meeting", "note"]
Email = Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", max_length=120)]
Name = Annotated[str, Field(min_length=1, max_length=60)]
Phone = Annotated[str, Field(pattern=r"^\+?[0-9 ()-]{7,20}$")]
Owner = Literal["agent", "sales.east", "sales.west", "partners"]

_COMPANIES = ("Acme Corp", "Globex", "Initech", "Umbrella Labs", "Stark Tools", "Wayne Logistics", "Hooli",
              "Vandelay Imports", "Soylent Foods", "Tyrell Systems", "Cyberdyne", "Wonka Sweets", "Oscorp",
              "Pied Piper", "Monarch Travel", "Nakatomi Trading", "Gringotts Finance", "Dunder Paper")
_INDUSTRIES = ("software", "retail", "logistics", "finance", "manufacturing", "healthcare", "food")
_CITIES = ("Berlin", "Austin", "Lisbon", "Toronto", "Osaka", "Nairobi", "Lyon", "Denver", "Madrid", "Oslo")
_FIRST = ("Alice", "Bruno", "Carla", "Deepak", "Emma", "Felix", "Gina", "Hassan", "Irene", "Jack", "Kira", "Luca",
          "Mona", "Nils", "Omar", "Paula", "Rafael", "Sofia", "Tom", "Uma", "Victor", "Wen", "Yara", "Zane")
_LAST = ("Andersen", "Brown", "Costa", "Dubois", "Eriksen", "Ferreira", "Gupta", "Horvat", "Iqbal", "Jones",
         "Kim", "Larsen", "Mendes", "Nguyen", "Oliveira", "Petrov", "Reyes", "Schmidt", "Torres", "Walsh")
_TITLES = ("CTO", "Head of Procurement", "Operations Manager", "CFO", "IT Director", "Buyer", "VP Sales")
_DEALS = ("Annual licence", "Pilot project", "Support renewal", "Fleet upgrade", "Data migration", "Training package")
_NOTES = ("Discussed pricing for next quarter.", "Sent the product brochure.", "Asked for a follow-up demo.",
          "Budget approval expected next month.", "Intro call went well.", "Waiting on legal review.")


def _email(first: str, last: str, company: str) -> str:
    domain = "".join(ch for ch in company.lower() if ch.isalnum())
    return f"{first.lower()}.{last.lower()}@{domain}.com"


def generate(rng: random.Random, clock: str) -> dict[str, list[dict[str, Any]]]:
    companies = [{"id": i, "name": n, "industry": rng.choice(_INDUSTRIES), "city": rng.choice(_CITIES)}
                 for i, n in enumerate(rng.sample(_COMPANIES, 12), start=1)]
    people = rng.sample([(f, l) for f in _FIRST for l in _LAST], 36)
    contacts = []
    for i, (first, last) in enumerate(people, start=1):
        company = companies[(i - 1) % 12] if i <= 12 else rng.choice(companies)
        contacts.append({"id": i, "company_id": company["id"], "first_name": first, "last_name": last,
                         "email": _email(first, last, company["name"]),
                         "phone": f"+1 555 {rng.randint(100, 999)} {rng.randint(1000, 9999)}",
                         "title": rng.choice(_TITLES), "owner": rng.choice(("sales.east", "sales.west", "partners")),
                         "created_at": f"{clock[:4]}-0{rng.randint(1, 3)}-{rng.randint(10, 28)}T10:00:00Z"})
    deals = []
    for i in range(1, 31):
        company = rng.choice(companies)
        theirs = [c for c in contacts if c["company_id"] == company["id"]]
        stage = rng.choices(STAGES, weights=(3, 3, 3, 2, 2, 1))[0]
        deals.append({"id": i, "company_id": company["id"], "contact_id": rng.choice(theirs)["id"],
                      "title": f"{company['name']} - {rng.choice(_DEALS)}", "amount": rng.randrange(2000, 90000, 500),
                      "stage": stage, "close_date": f"{clock[:4]}-{rng.randint(5, 12):02d}-{rng.randint(1, 28):02d}",
                      "updated_at": f"{clock[:4]}-03-{rng.randint(1, 28):02d}T12:00:00Z"})
    activities = [{"id": i, "contact_id": rng.choice(contacts)["id"], "kind": rng.choice(("call", "email", "meeting")),
                   "note": rng.choice(_NOTES), "at": f"{clock[:4]}-03-{rng.randint(1, 28):02d}T15:30:00Z"}
                  for i in range(1, 31)]
    return {"companies": companies, "contacts": contacts, "deals": deals, "activities": activities}


def build_server(db: AppDB) -> MCPServer:
    server = MCPServer("crm", instructions="CRM. You act as sales user 'agent'.", log_level="ERROR")

    def company(conn: sqlite3.Connection, company_id: int) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM companies WHERE id = ?", (company_id,)).fetchone()
        if row is None:
            raise not_found("company", company_id)
        return dict(row)

    def contact(conn: sqlite3.Connection, contact_id: int) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM contacts WHERE id = ?", (contact_id,)).fetchone()
        if row is None:
            raise not_found("contact", contact_id)
        return dict(row)

    @server.tool(description="List companies, optionally of one industry.")
    def list_companies(industry: Annotated[str, Field(max_length=40)] | None = None) -> dict[str, Any]:
        with db.tx() as conn:
            if industry is None:
                found = rows(conn.execute("SELECT id, name, industry, city FROM companies ORDER BY id"))
            else:
                found = rows(conn.execute("SELECT id, name, industry, city FROM companies WHERE industry = ? "
                                          "ORDER BY id", (industry,)))
        return {"companies": found}

    @server.tool(description="Get a company with its contacts and deals.")
    def get_company(company_id: RowId) -> dict[str, Any]:
        with db.tx() as conn:
            found = company(conn, company_id)
            found["contacts"] = rows(conn.execute("SELECT id, first_name, last_name, title FROM contacts "
                                                  "WHERE company_id = ? ORDER BY id", (company_id,)))
            found["deals"] = rows(conn.execute("SELECT id, title, amount, stage FROM deals WHERE company_id = ? "
                                               "ORDER BY id", (company_id,)))
        return found

    @server.tool(description=f"Search contacts by name or email (rate limited: {SEARCH_LIMIT} calls).")
    def search_contacts(query: Query, limit: Limit = 10) -> dict[str, Any]:
        db.rate_limit("search_contacts", SEARCH_LIMIT)
        with db.tx() as conn:
            pattern = like(query)
            found = rows(conn.execute(
                "SELECT c.id, c.first_name, c.last_name, c.email, co.name AS company FROM contacts c "
                "JOIN companies co ON co.id = c.company_id WHERE lower(c.first_name || ' ' || c.last_name) "
                "LIKE ? ESCAPE '\\' OR lower(c.email) LIKE ? ESCAPE '\\' ORDER BY c.id LIMIT ?",
                (pattern, pattern, limit)))
        return {"contacts": found, "query": query}

    @server.tool(description="Get a contact with its logged activities.")
    def get_contact(contact_id: RowId) -> dict[str, Any]:
        with db.tx() as conn:
            found = contact(conn, contact_id)
            found["activities"] = rows(conn.execute("SELECT id, kind, note, at FROM activities WHERE contact_id = ? "
                                                    "ORDER BY id", (contact_id,)))
        return found

    @server.tool(description="Create a contact at a company; the email must be unique. You become the owner.")
    def create_contact(first_name: Name, last_name: Name, email: Email, company_id: RowId,
                       phone: Phone | None = None, title: Name | None = None) -> dict[str, Any]:
        with db.tx() as conn:
            company(conn, company_id)
            if conn.execute("SELECT 1 FROM contacts WHERE lower(email) = lower(?)", (email,)).fetchone():
                raise invalid(f"a contact with email {email!r} already exists")
            cur = conn.execute(
                "INSERT INTO contacts (company_id, first_name, last_name, email, phone, title, owner, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, 'agent', ?)", (company_id, first_name, last_name, email, phone, title,
                                                         tick(conn)))
            return contact(conn, int(cur.lastrowid))

    @server.tool(description="Update a contact's phone, title and/or owner.")
    def update_contact(contact_id: RowId, phone: Phone | None = None, title: Name | None = None,
                       owner: Owner | None = None) -> dict[str, Any]:
        changes = {k: v for k, v in (("phone", phone), ("title", title), ("owner", owner)) if v is not None}
        if not changes:
            raise invalid("give at least one of phone, title, owner")
        with db.tx() as conn:
            contact(conn, contact_id)
            tick(conn)
            conn.execute(f"UPDATE contacts SET {', '.join(f'{k} = ?' for k in changes)} WHERE id = ?",  # noqa: S608 - fixed column names
                         (*changes.values(), contact_id))
            return contact(conn, contact_id)

    @server.tool(description="Log a call, email, meeting or note against a contact.")
    def log_activity(contact_id: RowId, kind: ActivityKind, note: LongText) -> dict[str, Any]:
        with db.tx() as conn:
            contact(conn, contact_id)
            at = tick(conn)
            cur = conn.execute("INSERT INTO activities (contact_id, kind, note, at) VALUES (?, ?, ?, ?)",
                               (contact_id, kind, note, at))
        return {"at": at, "contact_id": contact_id, "id": cur.lastrowid, "kind": kind, "note": note}

    @server.tool(description="List deals, optionally filtered by stage and/or company.")
    def list_deals(stage: Stage | None = None, company_id: RowId | None = None, limit: Limit = 20) -> dict[str, Any]:
        with db.tx() as conn:
            sql, args = "SELECT id, company_id, title, amount, stage, close_date FROM deals WHERE 1 = 1", []
            if stage is not None:
                sql, args = sql + " AND stage = ?", [*args, stage]
            if company_id is not None:
                company(conn, company_id)
                sql, args = sql + " AND company_id = ?", [*args, company_id]
            found = rows(conn.execute(sql + " ORDER BY id LIMIT ?", [*args, limit]))
        return {"deals": found}

    @server.tool(description="Move a deal to another pipeline stage; won and lost deals are closed and locked.")
    def update_deal_stage(deal_id: RowId, stage: Stage) -> dict[str, Any]:
        with db.tx() as conn:
            row = conn.execute("SELECT * FROM deals WHERE id = ?", (deal_id,)).fetchone()
            if row is None:
                raise not_found("deal", deal_id)
            if row["stage"] in ("won", "lost"):
                raise denied(f"deal {deal_id} is closed ({row['stage']}) and can no longer change stage")
            if row["stage"] == stage:
                raise invalid(f"deal {deal_id} is already in stage {stage!r}")
            conn.execute("UPDATE deals SET stage = ?, updated_at = ? WHERE id = ?", (stage, tick(conn), deal_id))
            return dict(conn.execute("SELECT * FROM deals WHERE id = ?", (deal_id,)).fetchone())

    add_submit_answer(server, db)
    return server


# ----------------------------------------------------------------------------- tasks
KINDS = ("contact_and_call", "deal_stage", "close_won", "log_meeting", "update_phone",
         "lookup_email", "lookup_pipeline", "lookup_company_city")


def make_task(kind: str, data: dict[str, list[dict[str, Any]]], rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    companies = {c["id"]: c for c in data["companies"]}
    open_deals = [d for d in data["deals"] if d["stage"] in OPEN_STAGES]
    if kind == "contact_and_call":
        co = rng.choice(data["companies"])
        used = {(c["first_name"], c["last_name"]) for c in data["contacts"]}
        first, last = rng.choice([(f, l) for f in _FIRST for l in _LAST if (f, l) not in used])
        email = _email(first, last, co["name"])
        note = f"Intro call: interested in {rng.choice(_DEALS).lower()}"
        new_id = len(data["contacts"]) + 1
        return (f"Add {first} {last} ({email}) as a new contact at {co['name']} (company id {co['id']}), "
                f"then log a call with them with the note \"{note}\".",
                {"kind": kind, "email": email, "company_id": co["id"], "text": note},
                [tool_action("create_contact", first_name=first, last_name=last, email=email, company_id=co["id"]),
                 tool_action("log_activity", contact_id=new_id, kind="call", note=note)])
    if kind in ("deal_stage", "close_won"):
        deal = rng.choice(open_deals)
        stage = "won" if kind == "close_won" else rng.choice([s for s in OPEN_STAGES if s != deal["stage"]])
        words = "has been signed: mark it as won" if kind == "close_won" else f"should move to stage {stage}"
        return (f"The deal \"{deal['title']}\" (deal id {deal['id']}) {words}.",
                {"kind": "deal_stage", "deal_id": deal["id"], "stage": stage},
                [tool_action("list_deals", company_id=deal["company_id"]),
                 tool_action("update_deal_stage", deal_id=deal["id"], stage=stage)])
    if kind == "log_meeting":
        c = rng.choice(data["contacts"])
        note = f"Meeting about {rng.choice(_DEALS).lower()} at {companies[c['company_id']]['city']} office"
        return (f"Log a meeting with {c['first_name']} {c['last_name']} of {companies[c['company_id']]['name']} "
                f"with the note \"{note}\".",
                {"kind": "activity", "contact_id": c["id"], "activity": "meeting", "text": note},
                [tool_action("search_contacts", query=c["last_name"]),
                 tool_action("log_activity", contact_id=c["id"], kind="meeting", note=note)])
    if kind == "update_phone":
        c = rng.choice(data["contacts"])
        phone = f"+1 555 {rng.randint(100, 999)} {rng.randint(1000, 9999)}"
        return (f"{c['first_name']} {c['last_name']} (contact id {c['id']}) has a new phone number: {phone}. "
                "Update the contact.",
                {"kind": "phone", "contact_id": c["id"], "phone": phone},
                [tool_action("get_contact", contact_id=c["id"]), tool_action("update_contact", contact_id=c["id"], phone=phone)])
    if kind == "lookup_email":
        c = rng.choice(data["contacts"])
        return (f"What is the email address of {c['first_name']} {c['last_name']} at "
                f"{companies[c['company_id']]['name']}? Submit it with submit_answer.",
                {"kind": "answer", "answer": c["email"]},
                [tool_action("search_contacts", query=f"{c['first_name']} {c['last_name']}"),
                 tool_action("submit_answer", answer=c["email"])])
    if kind == "lookup_pipeline":
        co = rng.choice(data["companies"])
        total = sum(d["amount"] for d in open_deals if d["company_id"] == co["id"])
        return (f"What is the total amount of open deals (stages lead, qualified, proposal, negotiation) for "
                f"{co['name']} (company id {co['id']})? Submit the number with submit_answer.",
                {"kind": "answer", "answer": str(total)},
                [tool_action("get_company", company_id=co["id"]), tool_action("submit_answer", answer=str(total))])
    if kind == "lookup_company_city":
        c = rng.choice(data["contacts"])
        city = companies[c["company_id"]]["city"]
        return (f"In which city is the company of contact {c['first_name']} {c['last_name']} (contact id {c['id']})? "
                "Submit the city with submit_answer.",
                {"kind": "answer", "answer": city},
                [tool_action("get_contact", contact_id=c["id"]), tool_action("get_company", company_id=c["company_id"]),
                 tool_action("submit_answer", answer=city)])
    raise ValueError(f"unknown crm task kind {kind!r}")


def check(conn: sqlite3.Connection, spec: dict[str, Any]) -> bool:
    kind = spec["kind"]
    if kind == "answer":
        got = first_answer(conn)
        return got is not None and normalise_answer(got) == normalise_answer(spec["answer"])
    if kind == "contact_and_call":
        row = conn.execute("SELECT id FROM contacts WHERE lower(email) = lower(?) AND company_id = ?",
                           (spec["email"], spec["company_id"])).fetchone()
        return row is not None and conn.execute(
            "SELECT 1 FROM activities WHERE contact_id = ? AND kind = 'call' AND instr(note, ?) > 0",
            (row[0], spec["text"])).fetchone() is not None
    if kind == "deal_stage":
        row = conn.execute("SELECT stage FROM deals WHERE id = ?", (spec["deal_id"],)).fetchone()
        return row is not None and row[0] == spec["stage"]
    if kind == "activity":
        return conn.execute("SELECT 1 FROM activities WHERE contact_id = ? AND kind = ? AND instr(note, ?) > 0",
                            (spec["contact_id"], spec["activity"], spec["text"])).fetchone() is not None
    if kind == "phone":
        row = conn.execute("SELECT phone FROM contacts WHERE id = ?", (spec["contact_id"],)).fetchone()
        return row is not None and row[0] == spec["phone"]
    raise ValueError(f"unknown crm check {kind!r}")


# ----------------------------------------------------------------------------- behaviour vocabulary
def explore(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    roll = rng.random()
    if roll < 0.15:
        return "list_companies", ({} if rng.random() < 0.6 else {"industry": rng.choice(_INDUSTRIES)})
    if roll < 0.35:
        return "get_company", {"company_id": v.pick("company_id", rng)}
    if roll < 0.55:
        return "get_contact", {"contact_id": v.pick("contact_id", rng)}
    if roll < 0.70:
        return "list_deals", ({"stage": rng.choice(STAGES)} if rng.random() < 0.5
                              else {"company_id": v.pick("company_id", rng)})
    if roll < 0.80:
        return "search_contacts", {"query": rng.choice(_LAST)}
    if roll < 0.90:
        return "log_activity", {"contact_id": v.pick("contact_id", rng), "kind": rng.choice(("call", "email", "note")),
                                "note": rng.choice(_NOTES)}
    return "update_contact", {"contact_id": v.pick("contact_id", rng), "title": rng.choice(_TITLES)}


def inspect(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    return rng.choice((("get_contact", {"contact_id": v.pick("contact_id", rng)}),
                       ("get_company", {"company_id": v.pick("company_id", rng)}), ("list_deals", {})))


def mistake(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    cid = v.pick("contact_id", rng)
    options: list[tuple[str, dict[str, Any]]] = [
        ("get_contact", {"contact_id": rng.randint(200, 99999)}),
        ("get_company", {"company_id": rng.choice((0, 77, 1234))}),
        ("create_contact", {"first_name": "Jo", "last_name": "Doe", "email": rng.choice(("jo.doe", "jo@", "jo doe@x.com")),
                            "company_id": v.pick("company_id", rng)}),
        ("create_contact", {"first_name": "Jo", "last_name": "Doe", "email": "jo.doe@example.com", "company_id": 999}),
        ("log_activity", {"contact_id": cid, "kind": rng.choice(("sms", "lunch", "CALL")), "note": "Quick chat"}),
        ("log_activity", {"contact_id": cid, "kind": "call"}),
        ("update_contact", {"contact_id": cid}),
        ("update_contact", {"contact_id": cid, "phone": rng.choice(("call me", "12", "+1-555-CALL-NOW"))}),
        ("update_deal_stage", {"deal_id": v.pick("deal_id", rng), "stage": rng.choice(("closed", "signed", "Won"))}),
        ("update_deal_stage", {"deal_id": rng.randint(300, 9999), "stage": "won"}),
        ("list_deals", {"limit": rng.choice((0, 100, -1))}),
    ]
    if v.values.get("closed_deal"):
        options.append(("update_deal_stage", {"deal_id": v.values["closed_deal"][0], "stage": "negotiation"}))
    if v.values.get("email"):
        options.append(("create_contact", {"first_name": "Copy", "last_name": "Cat", "email": v.values["email"][0],
                                           "company_id": v.pick("company_id", rng)}))
    return rng.choice(options)


def entities(data: dict[str, list[dict[str, Any]]], rng: random.Random) -> dict[str, list[Any]]:
    return {"company_id": sorted(rng.sample([c["id"] for c in data["companies"]], 4)),
            "contact_id": sorted(rng.sample([c["id"] for c in data["contacts"]], 6)),
            "deal_id": sorted(rng.sample([d["id"] for d in data["deals"]], 4)),
            "closed_deal": [d["id"] for d in data["deals"] if d["stage"] in ("won", "lost")][:2],
            "email": [data["contacts"][0]["email"]]}
