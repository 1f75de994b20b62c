"""Online shop (Shopify-like): customers, products with inventory, orders and refunds."""

from __future__ import annotations

import random
import sqlite3
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from agentworld.domains.mcp.apps.common import (
    AppDB,
    Limit,
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

NAME = "shop"
DESCRIPTION = "an online shop with customers, products and inventory, orders and refunds"
SEARCH_LIMIT = 6

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, tier TEXT NOT NULL,
                        city TEXT NOT NULL);
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                       price_cents INTEGER NOT NULL, stock INTEGER NOT NULL CHECK (stock >= 0), active INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     status TEXT NOT NULL, total_cents INTEGER NOT NULL, created_at TEXT NOT NULL, note TEXT);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), sku TEXT NOT NULL REFERENCES products(sku),
                          quantity INTEGER NOT NULL, unit_price_cents INTEGER NOT NULL, PRIMARY KEY (order_id, sku));
"""

ORDER_STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled", "refunded")
Sku = Annotated[str, Field(pattern=r"^[A-Z]{3}-[0-9]{3}$", description="product SKU, e.g. TEA-104")]
Quantity = Annotated[int, Field(ge=1, le=100)]
Reason = Annotated[str, Field(min_length=3, max_length=300)]


class OrderLine(BaseModel):
    sku: Sku
    quantity: Quantity


_CATALOG = {"TEA": ("tea", ("Sencha Green Tea", "Earl Grey", "Chamomile Blend", "Masala Chai", "Jasmine Pearls")),
            "MUG": ("kitchen", ("Stoneware Mug", "Travel Mug", "Glass Teapot", "Espresso Cup Set", "Milk Frother")),
            "BAG": ("accessories", ("Canvas Tote", "Laptop Sleeve", "Hiking Daypack", "Weekender Bag", "Belt Pouch")),
            "LMP": ("home", ("Desk Lamp", "Floor Lamp", "Reading Light", "Salt Lamp", "String Lights")),
            "NBK": ("stationery", ("Dot Grid Notebook", "Weekly Planner", "Sketchbook A4", "Pocket Journal", "Fountain Pen"))}
_FIRST = ("Anna", "Boris", "Cleo", "Diego", "Eva", "Finn", "Hana", "Ivan", "Julia", "Karl", "Lena", "Marco",
          "Nora", "Oscar", "Pia", "Ravi", "Sara", "Theo", "Vera", "Yusuf")
_LAST = ("Berg", "Cruz", "Dahl", "Engel", "Fox", "Gallo", "Holm", "Ivanova", "Jung", "Klein", "Lund", "Mori",
         "Nash", "Ortiz", "Park", "Quist", "Roth", "Sato", "Voss", "Wolf")
_CITIES = ("Hamburg", "Porto", "Seattle", "Leeds", "Kyoto", "Accra", "Turin", "Quebec")


def generate(rng: random.Random, clock: str) -> dict[str, list[dict[str, Any]]]:
    products = []
    for prefix, (category, names) in _CATALOG.items():
        for j, name in enumerate(names):
            products.append({"sku": f"{prefix}-{100 + j + rng.randint(0, 8) * 10:03d}", "name": name,
                             "category": category, "price_cents": rng.randrange(399, 12999, 50),
                             "stock": rng.choice((0, 2, 5, 12, 30, 75)) if j else rng.randint(3, 40),
                             "active": int(rng.random() > 0.1)})
    people = rng.sample([(f, l) for f in _FIRST for l in _LAST], 24)
    customers = [{"id": i, "name": f"{f} {l}", "email": f"{f[0].lower()}{l.lower()}{i}@mail.example",
                  "tier": rng.choice(("standard", "standard", "gold", "platinum")), "city": rng.choice(_CITIES)}
                 for i, (f, l) in enumerate(people, start=1)]
    orders, items = [], []
    for i in range(1, 41):
        lines = rng.sample(products, rng.randint(1, 3))
        qty = [rng.randint(1, 4) for _ in lines]
        status = ORDER_STATUSES[i % 4] if i <= 8 else rng.choices(ORDER_STATUSES, weights=(3, 3, 3, 4, 1, 1))[0]
        orders.append({"id": i, "customer_id": rng.choice(customers)["id"], "status": status,
                       "total_cents": sum(p["price_cents"] * q for p, q in zip(lines, qty)),
                       "created_at": f"{clock[:4]}-{rng.randint(1, 3):02d}-{rng.randint(1, 28):02d}T"
                                     f"{rng.randint(7, 22):02d}:{rng.randint(0, 59):02d}:00Z", "note": None})
        items += [{"order_id": i, "sku": p["sku"], "quantity": q, "unit_price_cents": p["price_cents"]}
                  for p, q in zip(lines, qty)]
    return {"customers": customers, "products": products, "orders": orders, "order_items": items}


def build_server(db: AppDB) -> MCPServer:
    server = MCPServer("shop", instructions="Online shop back office.", log_level="ERROR")

    def product(conn: sqlite3.Connection, sku: str) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM products WHERE sku = ?", (sku,)).fetchone()
        if row is None:
            raise not_found("product", sku)
        found = dict(row)
        found["active"] = bool(found["active"])
        return found

    def order(conn: sqlite3.Connection, order_id: int) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
        if row is None:
            raise not_found("order", order_id)
        found = dict(row)
        found["items"] = rows(conn.execute("SELECT sku, quantity, unit_price_cents FROM order_items WHERE order_id = ? "
                                           "ORDER BY sku", (order_id,)))
        return found

    @server.tool(description=f"Search products by name or category (rate limited: {SEARCH_LIMIT} calls).")
    def search_products(query: Query, limit: Limit = 10) -> dict[str, Any]:
        db.rate_limit("search_products", SEARCH_LIMIT)
        with db.tx() as conn:
            found = rows(conn.execute(
                "SELECT sku, name, category, price_cents, stock FROM products WHERE lower(name) LIKE ? ESCAPE '\\' "
                "OR category LIKE ? ESCAPE '\\' ORDER BY sku LIMIT ?", (like(query), like(query), limit)))
        return {"products": found, "query": query}

    @server.tool(description="Get one product with price and stock.")
    def get_product(sku: Sku) -> dict[str, Any]:
        with db.tx() as conn:
            return product(conn, sku)

    @server.tool(description="Find customers by name or email.")
    def search_customers(query: Query, limit: Limit = 10) -> dict[str, Any]:
        with db.tx() as conn:
            found = rows(conn.execute(
                "SELECT id, name, email, tier, city FROM customers WHERE lower(name) LIKE ? ESCAPE '\\' "
                "OR lower(email) LIKE ? ESCAPE '\\' ORDER BY id LIMIT ?", (like(query), like(query), limit)))
        return {"customers": found, "query": query}

    @server.tool(description="List orders, optionally of one customer and/or status.")
    def list_orders(customer_id: RowId | None = None, status: Annotated[str, Field(
            pattern=r"^(pending|paid|shipped|delivered|cancelled|refunded)$")] | None = None,
            limit: Limit = 20) -> dict[str, Any]:
        with db.tx() as conn:
            sql, args = "SELECT id, customer_id, status, total_cents, created_at FROM orders WHERE 1 = 1", []
            if customer_id is not None:
                if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
                    raise not_found("customer", customer_id)
                sql, args = sql + " AND customer_id = ?", [*args, customer_id]
            if status is not None:
                sql, args = sql + " AND status = ?", [*args, status]
            found = rows(conn.execute(sql + " ORDER BY id LIMIT ?", [*args, limit]))
        return {"orders": found}

    @server.tool(description="Get an order with its line items.")
    def get_order(order_id: RowId) -> dict[str, Any]:
        with db.tx() as conn:
            return order(conn, order_id)

    @server.tool(description="Place a paid order for a customer; stock is reserved immediately.")
    def place_order(customer_id: RowId, items: Annotated[list[OrderLine], Field(min_length=1, max_length=10)]) -> dict[str, Any]:
        with db.tx() as conn:
            if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
                raise not_found("customer", customer_id)
            total, lines = 0, []
            for line in items:
                p = product(conn, line.sku)
                if not p["active"]:
                    raise invalid(f"product {line.sku} is discontinued")
                if p["stock"] < line.quantity:
                    raise invalid(f"insufficient stock for {line.sku}: {p['stock']} available, {line.quantity} requested")
                total += p["price_cents"] * line.quantity
                lines.append((line.sku, line.quantity, p["price_cents"]))
            if len({sku for sku, _, _ in lines}) != len(lines):
                raise invalid("each SKU may appear only once per order")
            cur = conn.execute("INSERT INTO orders (customer_id, status, total_cents, created_at) VALUES (?, 'paid', ?, ?)",
                               (customer_id, total, tick(conn)))
            order_id = int(cur.lastrowid)
            for sku, qty, price in lines:
                conn.execute("INSERT INTO order_items VALUES (?, ?, ?, ?)", (order_id, sku, qty, price))
                conn.execute("UPDATE products SET stock = stock - ? WHERE sku = ?", (qty, sku))
            return order(conn, order_id)

    @server.tool(description="Add received units to a product's stock (at most 500 per call).")
    def restock_product(sku: Sku, quantity: Annotated[int, Field(ge=1, le=500)]) -> dict[str, Any]:
        with db.tx() as conn:
            p = product(conn, sku)
            if not p["active"]:
                raise denied(f"product {sku} is discontinued; it cannot be restocked")
            tick(conn)
            conn.execute("UPDATE products SET stock = stock + ? WHERE sku = ?", (quantity, sku))
            return product(conn, sku)

    @server.tool(description="Cancel an order that has not shipped yet; its stock is released.")
    def cancel_order(order_id: RowId, reason: Reason = "customer request") -> dict[str, Any]:
        with db.tx() as conn:
            o = order(conn, order_id)
            if o["status"] in ("shipped", "delivered"):
                raise denied(f"order {order_id} is already {o['status']}; refund it instead")
            if o["status"] in ("cancelled", "refunded"):
                raise invalid(f"order {order_id} is already {o['status']}")
            for item in o["items"]:
                conn.execute("UPDATE products SET stock = stock + ? WHERE sku = ?", (item["quantity"], item["sku"]))
            conn.execute("UPDATE orders SET status = 'cancelled', note = ? WHERE id = ?",
                         (f"{tick(conn)} cancelled: {reason}", order_id))
            return order(conn, order_id)

    @server.tool(description="Refund a delivered order.")
    def refund_order(order_id: RowId, reason: Reason) -> dict[str, Any]:
        with db.tx() as conn:
            o = order(conn, order_id)
            if o["status"] != "delivered":
                raise denied(f"only delivered orders can be refunded; order {order_id} is {o['status']}")
            conn.execute("UPDATE orders SET status = 'refunded', note = ? WHERE id = ?",
                         (f"{tick(conn)} refunded: {reason}", order_id))
            return order(conn, order_id)

    add_submit_answer(server, db)
    return server


# ----------------------------------------------------------------------------- tasks
KINDS = ("place_order", "place_order_multi", "restock", "cancel_order", "refund_order",
         "lookup_stock", "lookup_order_total", "lookup_order_count")


def make_task(kind: str, data: dict[str, list[dict[str, Any]]], rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    sellable = [p for p in data["products"] if p["active"] and p["stock"] >= 3]
    if kind in ("place_order", "place_order_multi"):
        c = rng.choice(data["customers"])
        picks = rng.sample(sellable, 2 if kind == "place_order_multi" else 1)
        lines = [{"quantity": rng.randint(1, 3), "sku": p["sku"]} for p in picks]
        what = " and ".join(f"{line['quantity']} x {p['name']} ({p['sku']})" for line, p in zip(lines, picks))
        return (f"Place an order for customer {c['name']} ({c['email']}): {what}.",
                {"kind": "order", "customer_id": c["id"], "lines": {line["sku"]: line["quantity"] for line in lines}},
                [tool_action("search_customers", query=c["email"]), tool_action("place_order", customer_id=c["id"], items=lines)])
    if kind == "restock":
        p = rng.choice([p for p in data["products"] if p["active"]])
        n = rng.choice((10, 24, 50, 100, 120))
        return (f"A delivery of {n} units of {p['name']} ({p['sku']}) arrived. Restock the product.",
                {"kind": "stock", "sku": p["sku"], "stock": p["stock"] + n},
                [tool_action("get_product", sku=p["sku"]), tool_action("restock_product", sku=p["sku"], quantity=n)])
    if kind == "cancel_order":
        o = rng.choice([o for o in data["orders"] if o["status"] in ("pending", "paid")])
        return (f"The customer asked to cancel order {o['id']}. Cancel it if it has not shipped.",
                {"kind": "status", "order_id": o["id"], "status": "cancelled"},
                [tool_action("get_order", order_id=o["id"]),
                 tool_action("cancel_order", order_id=o["id"], reason="customer request")])
    if kind == "refund_order":
        o = rng.choice([o for o in data["orders"] if o["status"] == "delivered"])
        reason = rng.choice(("item arrived damaged", "wrong size", "late delivery"))
        return (f"Refund order {o['id']}; the customer reports: {reason}.",
                {"kind": "status", "order_id": o["id"], "status": "refunded"},
                [tool_action("get_order", order_id=o["id"]), tool_action("refund_order", order_id=o["id"], reason=reason)])
    if kind == "lookup_stock":
        p = rng.choice(data["products"])
        return (f"How many units of {p['name']} are in stock? Submit the number with submit_answer.",
                {"kind": "answer", "answer": str(p["stock"])},
                [tool_action("search_products", query=p["name"]), tool_action("submit_answer", answer=str(p["stock"]))])
    if kind == "lookup_order_total":
        o = rng.choice(data["orders"])
        total = f"{o['total_cents'] / 100:.2f}"
        return (f"What is the total of order {o['id']} in dollars (e.g. 12.50)? Submit it with submit_answer.",
                {"kind": "answer", "answer": total},
                [tool_action("get_order", order_id=o["id"]), tool_action("submit_answer", answer=total)])
    if kind == "lookup_order_count":
        c = rng.choice(data["customers"])
        n = sum(1 for o in data["orders"] if o["customer_id"] == c["id"])
        return (f"How many orders has customer {c['name']} placed? Submit the number with submit_answer.",
                {"kind": "answer", "answer": str(n)},
                [tool_action("search_customers", query=c["name"]), tool_action("list_orders", customer_id=c["id"], limit=50),
                 tool_action("submit_answer", answer=str(n))])
    raise ValueError(f"unknown shop task kind {kind!r}")


def check(conn: sqlite3.Connection, spec: dict[str, Any]) -> bool:
    kind = spec["kind"]
    if kind == "answer":
        got = first_answer(conn)
        return got is not None and normalise_answer(got) == normalise_answer(spec["answer"])
    if kind == "stock":
        row = conn.execute("SELECT stock FROM products WHERE sku = ?", (spec["sku"],)).fetchone()
        return row is not None and row[0] == spec["stock"]
    if kind == "status":
        row = conn.execute("SELECT status FROM orders WHERE id = ?", (spec["order_id"],)).fetchone()
        return row is not None and row[0] == spec["status"]
    if kind == "order":
        for (order_id,) in conn.execute("SELECT id FROM orders WHERE customer_id = ? AND status IN ('pending', 'paid')",
                                        (spec["customer_id"],)).fetchall():
            lines = dict(conn.execute("SELECT sku, quantity FROM order_items WHERE order_id = ?", (order_id,)).fetchall())
            if lines == spec["lines"]:
                return True
        return False
    raise ValueError(f"unknown shop check {kind!r}")


# ----------------------------------------------------------------------------- behaviour vocabulary
def explore(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    roll = rng.random()
    if roll < 0.2:
        return "get_product", {"sku": v.pick("sku", rng)}
    if roll < 0.4:
        return "get_order", {"order_id": v.pick("order_id", rng)}
    if roll < 0.55:
        return "list_orders", rng.choice(({}, {"status": rng.choice(ORDER_STATUSES)},
                                          {"customer_id": v.pick("customer_id", rng)}))
    if roll < 0.65:
        return "search_customers", {"query": rng.choice(_LAST)}
    if roll < 0.75:
        return "search_products", {"query": rng.choice(("tea", "lamp", "mug", "bag", "notebook"))}
    if roll < 0.88:
        return "restock_product", {"sku": v.pick("sku", rng), "quantity": rng.choice((5, 10, 20))}
    return "place_order", {"customer_id": v.pick("customer_id", rng),
                           "items": [{"quantity": 1, "sku": v.pick("sku", rng)}]}


def inspect(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    return rng.choice((("get_product", {"sku": v.pick("sku", rng)}), ("get_order", {"order_id": v.pick("order_id", rng)}),
                       ("list_orders", {"limit": 10})))


def mistake(v: Any, rng: random.Random) -> tuple[str, dict[str, Any]]:
    sku = v.pick("sku", rng)
    options: list[tuple[str, dict[str, Any]]] = [
        ("get_product", {"sku": rng.choice(("TEA-999", "XYZ-100", "tea-101", "TEA101"))}),
        ("get_order", {"order_id": rng.randint(500, 99999)}),
        ("place_order", {"customer_id": v.pick("customer_id", rng), "items": []}),
        ("place_order", {"customer_id": v.pick("customer_id", rng), "items": [{"sku": sku, "quantity": 0}]}),
        ("place_order", {"customer_id": v.pick("customer_id", rng), "items": [{"sku": sku, "quantity": 99}]}),
        ("place_order", {"customer_id": rng.randint(100, 999), "items": [{"sku": sku, "quantity": 1}]}),
        ("restock_product", {"sku": sku, "quantity": rng.choice((0, -5, 1000, "ten"))}),
        ("refund_order", {"order_id": v.pick("order_id", rng)}),
        ("list_orders", {"status": rng.choice(("open", "complete", "SHIPPED"))}),
        ("cancel_order", {"order_id": rng.randint(100, 999)}),
    ]
    if v.values.get("shipped_order"):
        options.append(("cancel_order", {"order_id": v.values["shipped_order"][0]}))
    if v.values.get("open_order"):
        options.append(("refund_order", {"order_id": v.values["open_order"][0], "reason": "changed my mind"}))
    return rng.choice(options)


def entities(data: dict[str, list[dict[str, Any]]], rng: random.Random) -> dict[str, list[Any]]:
    return {"sku": sorted(rng.sample([p["sku"] for p in data["products"]], 6)),
            "order_id": sorted(rng.sample([o["id"] for o in data["orders"]], 6)),
            "customer_id": sorted(rng.sample([c["id"] for c in data["customers"]], 4)),
            "shipped_order": [o["id"] for o in data["orders"] if o["status"] in ("shipped", "delivered")][:2],
            "open_order": [o["id"] for o in data["orders"] if o["status"] in ("pending", "paid")][:2]}
