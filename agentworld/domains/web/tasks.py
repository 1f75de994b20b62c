"""Web tasks: eleven templates parametrised by the episode seed, checked on the app's database.

The seed draws the world (seed.build_world) and the template; the template draws its targets
from that world. Each task carries its exact solution: element ids are deterministic because the
site's layout is fixed (the navigation bar is always ids 1-8, each page's form follows it),
see the `NAV_*`/page constants below; tests replay every template's solution.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from typing import Any

from agentworld.domains.web.seed import World, build_world, hash_password, price
from agentworld.envs.base import Task

DOMAIN = "web"
# Navigation bar (every page but the server's error pages).
NAV_HOME, NAV_PRODUCTS, NAV_FORUM, NAV_ORDERS, NAV_ACCOUNT, NAV_LOGIN, NAV_SEARCH, NAV_SEARCH_BUTTON = range(1, 9)
# Page-specific elements after the navigation bar.
LOGIN_USER, LOGIN_PASSWORD, LOGIN_BUTTON = 9, 10, 11
RESULTS_FIRST = 11                                  # /products: combobox 9, Filter 10, first product 11
PRODUCT_QTY, PRODUCT_ORDER, PRODUCT_RATING, PRODUCT_REVIEW, PRODUCT_REVIEW_BUTTON = 9, 10, 11, 12, 13
FORUM_SEARCH, FORUM_SEARCH_BUTTON, FORUM_NEW, FORUM_FIRST = 9, 10, 11, 12
THREAD_REPLY, THREAD_REPLY_BUTTON = 9, 10
NEW_TITLE, NEW_MESSAGE, NEW_BUTTON = 9, 10, 11
ORDERS_FIRST = 9                                    # /orders: order links, newest first
ORDER_CANCEL = 9
ACCOUNT_NAME, ACCOUNT_EMAIL, ACCOUNT_SAVE, ACCOUNT_CURRENT, ACCOUNT_NEW, ACCOUNT_PW_BUTTON = 9, 10, 11, 12, 13, 14

REPLIES = ("Thanks for the tips, this helped me a lot.", "I agree with the advice above.",
           "Has anyone tried the larger size?", "Mine arrived yesterday and it works well.")
REVIEWS = ("Solid and well made.", "Does the job, nothing more.", "Great gift, my sister loved it.",
           "Too expensive for what it is.", "Better than I expected.")
NAMES = ("Sunny Days", "The Gardener", "Night Owl", "Coffee Fan", "Trail Runner")
THREAD_TITLES = ("Weekend project ideas", "Favourite shop finds this month", "Packing list for a hike",
                 "Organising a tiny kitchen", "Desk setup questions")


def _login(user: dict[str, Any]) -> list[str]:
    return ["goto /login", f'type [{LOGIN_USER}] "{user["username"]}"',
            f'type [{LOGIN_PASSWORD}] "{user["password"]}"', f"click [{LOGIN_BUTTON}]"]


def _find_product(product: dict[str, Any]) -> list[str]:
    return [f'type [{NAV_SEARCH}] "{product["name"]}"', f"click [{NAV_SEARCH_BUTTON}]", f"click [{RESULTS_FIRST}]"]


def _find_thread(thread: dict[str, Any]) -> list[str]:
    return [f"click [{NAV_FORUM}]", f'type [{FORUM_SEARCH}] "{thread["title"]}"', f"click [{FORUM_SEARCH_BUTTON}]",
            f"click [{FORUM_FIRST}]"]


def _creds(user: dict[str, Any]) -> str:
    return f'Log in as {user["username"]} (password "{user["password"]}")'


# Each template: (world, rng) -> (instruction, params for the checker, solution).
def _place_order(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    user, product = rng.choice(w.users), rng.choice(w.products)
    qty = rng.randint(1, min(3, product["stock"]))
    return (f'{_creds(user)} and order {qty} x "{product["name"]}".',
            {"user_id": user["id"], "product_id": product["id"], "quantity": qty},
            _login(user) + _find_product(product) + [f'type [{PRODUCT_QTY}] "{qty}"', f"click [{PRODUCT_ORDER}]"])


def _add_review(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    user, product = rng.choice(w.users), rng.choice(w.products)
    rating, text = rng.randint(1, 5), rng.choice(REVIEWS)
    stars = f"{rating} star{'s' if rating != 1 else ''}"
    return (f'{_creds(user)} and review "{product["name"]}" with {stars} and the text "{text}".',
            {"user_id": user["id"], "product_id": product["id"], "rating": rating, "body": text},
            _login(user) + _find_product(product) + [f'select [{PRODUCT_RATING}] "{stars}"',
                                                     f'type [{PRODUCT_REVIEW}] "{text}"', f"click [{PRODUCT_REVIEW_BUTTON}]"])


def _post_reply(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    user, thread, text = rng.choice(w.users), rng.choice(w.threads), rng.choice(REPLIES)
    return (f'{_creds(user)} and reply to the forum thread "{thread["title"]}" with "{text}".',
            {"user_id": user["id"], "thread_id": thread["id"], "body": text},
            _login(user) + _find_thread(thread) + [f'type [{THREAD_REPLY}] "{text}"', f"click [{THREAD_REPLY_BUTTON}]"])


def _new_thread(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    user, title = rng.choice(w.users), rng.choice(THREAD_TITLES)
    body = f"Hi all, {rng.choice(('any ideas', 'what do you think', 'share your tips'))}?"
    return (f'{_creds(user)} and start a forum thread titled "{title}" with the message "{body}".',
            {"user_id": user["id"], "title": title, "body": body},
            _login(user) + [f"click [{NAV_FORUM}]", f"click [{FORUM_NEW}]", f'type [{NEW_TITLE}] "{title}"',
                            f'type [{NEW_MESSAGE}] "{body}"', f"click [{NEW_BUTTON}]"])


def _change_email(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    user = rng.choice(w.users)
    email = f"{user['username']}.{rng.choice(('shop', 'mail', 'home', 'work'))}{rng.randint(1, 99)}@example.net"
    return (f"{_creds(user)} and change your account email to {email}.",
            {"user_id": user["id"], "email": email},
            _login(user) + [f"click [{NAV_ACCOUNT}]", f'type [{ACCOUNT_EMAIL}] "{email}"', f"click [{ACCOUNT_SAVE}]"])


def _change_name(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    user, name = rng.choice(w.users), rng.choice(NAMES)
    return (f'{_creds(user)} and change your display name to "{name}".',
            {"user_id": user["id"], "display_name": name},
            _login(user) + [f"click [{NAV_ACCOUNT}]", f'type [{ACCOUNT_NAME}] "{name}"', f"click [{ACCOUNT_SAVE}]"])


def _change_password(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    user = rng.choice(w.users)
    new = f"{rng.choice(('Maple', 'River', 'Stone', 'Cloud'))}-{rng.randint(10000, 99999)}"
    return (f'{_creds(user)} and change your password to "{new}".',
            {"user_id": user["id"], "password": new},
            _login(user) + [f"click [{NAV_ACCOUNT}]", f'type [{ACCOUNT_CURRENT}] "{user["password"]}"',
                            f'type [{ACCOUNT_NEW}] "{new}"', f"click [{ACCOUNT_PW_BUTTON}]"])


def _cancel_order(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    placed = [o for o in w.orders if o["status"] == "placed"]
    if not placed:  # every seeded world has some, but stay total
        return _place_order(w, rng)
    order = rng.choice(placed)
    user = w.user(order["user_id"])
    mine = sorted((o["id"] for o in w.orders if o["user_id"] == user["id"]), reverse=True)
    product = w.product(order["product_id"])
    return (f'{_creds(user)} and cancel your order #{order["id"]} ({order["quantity"]} x "{product["name"]}").',
            {"user_id": user["id"], "order_id": order["id"]},
            _login(user) + [f"click [{NAV_ORDERS}]", f"click [{ORDERS_FIRST + mine.index(order['id'])}]",
                            f"click [{ORDER_CANCEL}]"])


def _info_price(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    product = rng.choice(w.products)
    answer = price(product["price_cents"])
    return (f'What does "{product["name"]}" cost in the Agora shop? Answer with stop "<price>", e.g. stop "$9.99".',
            {"answer": answer}, _find_product(product) + [f'stop "{answer}"'])


def _info_stock(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    product = rng.choice(w.products)
    return (f'How many units of "{product["name"]}" are in stock in the Agora shop? Answer with stop "<number>".',
            {"answer": str(product["stock"])}, _find_product(product) + [f'stop "{product["stock"]}"'])


def _info_author(w: World, rng: random.Random) -> tuple[str, dict[str, Any], list[str]]:
    thread = rng.choice(w.threads)
    author = w.user(thread["user_id"])["username"]
    return (f'Who started the forum thread "{thread["title"]}"? Answer with stop "<username>".',
            {"answer": author}, _find_thread(thread) + [f'stop "{author}"'])


TEMPLATES: dict[str, Callable[[World, random.Random], tuple[str, dict[str, Any], list[str]]]] = {
    "place_order": _place_order, "add_review": _add_review, "post_reply": _post_reply, "new_thread": _new_thread,
    "change_email": _change_email, "change_name": _change_name, "change_password": _change_password,
    "cancel_order": _cancel_order, "info_price": _info_price, "info_stock": _info_stock, "info_author": _info_author,
}
INFO_TEMPLATES = frozenset({"info_price", "info_stock", "info_author"})


def generate_task(seed: int, template: str | None = None) -> Task:
    """The task of episode `seed` (template chosen by the seed unless given)."""
    names = sorted(TEMPLATES)
    if template is None:
        template = names[seed % len(names)]
    if template not in TEMPLATES:
        raise ValueError(f"unknown web task template {template!r}; choose from {', '.join(names)}")
    world = build_world(seed)
    instruction, params, solution = TEMPLATES[template](world, random.Random(f"web-task:{template}:{seed}"))
    task_id = f"web-{template}-s{seed}"
    return Task(task_id=task_id, domain=DOMAIN, instruction=instruction,
                setup={"template": template, "db_seed": seed, "params": params, "info": template in INFO_TEMPLATES,
                       "users": [u["username"] for u in world.users],
                       "products": [p["name"] for p in world.products],
                       "threads": [t["title"] for t in world.threads]},
                solution=solution)


def normalise_answer(text: str) -> str:
    return " ".join(text.strip().strip('"').lower().split())


def check(task: Task, conn: sqlite3.Connection, answer: str | None = None) -> bool:
    """Whether the app's database (or the agent's final answer) shows the task done."""
    setup, p = task.setup, task.setup["params"]
    template = setup["template"]
    if template in INFO_TEMPLATES:
        if answer is None:
            return False
        want, got = normalise_answer(p["answer"]), normalise_answer(answer)
        return got == want or (template == "info_price" and got == want.lstrip("$"))
    one = lambda sql, *args: conn.execute(sql, args).fetchone()  # noqa: E731
    if template == "place_order":
        return one("SELECT 1 FROM orders WHERE user_id=? AND product_id=? AND quantity=? AND status='placed' AND id>?",
                   p["user_id"], p["product_id"], p["quantity"], _seeded_max(conn, "orders")) is not None
    if template == "add_review":
        return one("SELECT 1 FROM reviews WHERE user_id=? AND product_id=? AND rating=? AND body=?",
                   p["user_id"], p["product_id"], p["rating"], p["body"]) is not None
    if template == "post_reply":
        return one("SELECT 1 FROM posts WHERE user_id=? AND thread_id=? AND body=?",
                   p["user_id"], p["thread_id"], p["body"]) is not None
    if template == "new_thread":
        return one("SELECT 1 FROM threads t JOIN posts p ON p.thread_id=t.id WHERE t.user_id=? AND t.title=? AND p.body=?",
                   p["user_id"], p["title"], p["body"]) is not None
    if template == "change_email":
        return one("SELECT 1 FROM users WHERE id=? AND email=?", p["user_id"], p["email"]) is not None
    if template == "change_name":
        return one("SELECT 1 FROM users WHERE id=? AND display_name=?", p["user_id"], p["display_name"]) is not None
    if template == "change_password":
        row = one("SELECT salt, password_hash FROM users WHERE id=?", p["user_id"])
        return row is not None and hash_password(p["password"], row[0]) == row[1]
    if template == "cancel_order":
        return one("SELECT 1 FROM orders WHERE id=? AND user_id=? AND status='cancelled'",
                   p["order_id"], p["user_id"]) is not None
    raise ValueError(f"unknown web task template {template!r}")


def _seeded_max(conn: sqlite3.Connection, table: str) -> int:
    """Rows above the seeded ids were written during the episode (ids are assigned in order)."""
    return int(conn.execute("SELECT value FROM meta WHERE key=?", (f"seeded_{table}",)).fetchone()[0])
