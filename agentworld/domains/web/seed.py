"""The web shop-and-forum's data: a world drawn from a seed, written into a fresh SQLite file.

Everything is a pure function of the seed (names, prices, stock, posts, orders, timestamps), so
the same seed gives byte-identical pages. Passwords are stored as salted PBKDF2 hashes with a
deliberately small iteration count: the database is throwaway, and seeding must take milliseconds.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_DAY = "2024-05-"          # seeded rows are dated in May 2024
CLOCK_START = "2024-06-01 09:00"  # writes during an episode get the app's fixed clock (see app.py)
PBKDF2_ITERATIONS = 1000

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, display_name TEXT NOT NULL,
                    email TEXT NOT NULL, salt TEXT NOT NULL, password_hash TEXT NOT NULL);
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, category_id INTEGER NOT NULL,
                       price_cents INTEGER NOT NULL, stock INTEGER NOT NULL, description TEXT NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL, user_id INTEGER NOT NULL,
                      rating INTEGER NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE threads (id INTEGER PRIMARY KEY, title TEXT UNIQUE NOT NULL, user_id INTEGER NOT NULL,
                      created_at TEXT NOT NULL);
CREATE TABLE posts (id INTEGER PRIMARY KEY, thread_id INTEGER NOT NULL, user_id INTEGER NOT NULL,
                    body TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, product_id INTEGER NOT NULL,
                     quantity INTEGER NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL);
"""

USERNAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar")
SURNAMES = ("Moreau", "Okafor", "Lindqvist", "Tanaka", "Rossi", "Novak", "Haddad", "Silva", "Kowalski", "Byrne")
CATEGORIES = ("Kitchen", "Garden", "Office", "Outdoor")
COLOURS = ("Blue", "Red", "Green", "Black", "White", "Yellow", "Grey", "Orange")
MATERIALS = {
    "Kitchen": ("Ceramic", "Steel", "Bamboo", "Glass"),
    "Garden": ("Copper", "Rubber", "Cedar", "Zinc"),
    "Office": ("Leather", "Paper", "Oak", "Felt"),
    "Outdoor": ("Nylon", "Canvas", "Titanium", "Wool"),
}
NOUNS = {
    "Kitchen": ("Mug", "Kettle", "Teapot", "Colander", "Skillet", "Whisk"),
    "Garden": ("Trowel", "Hose", "Planter", "Rake", "Sprinkler", "Shears"),
    "Office": ("Notebook", "Stapler", "Desk Lamp", "Organizer", "Binder", "Pen Case"),
    "Outdoor": ("Tent", "Backpack", "Lantern", "Hammock", "Water Bottle", "Sleeping Bag"),
}
ADJECTIVES = ("sturdy", "lightweight", "compact", "classic", "durable", "handy", "elegant", "practical")
USES = ("everyday use", "small spaces", "weekend trips", "gifts", "beginners", "long days")
REVIEW_LINES = ("Works as described.", "Good value for the price.", "Arrived quickly, well packed.",
                "A bit smaller than I expected.", "Would buy again.", "Not great, not terrible.",
                "The colour is lovely.", "Broke after two weeks.", "Exactly what I needed.")
THREAD_TOPICS = ("How do you clean a {p}?", "Is the {p} worth it?", "Best way to store a {p}",
                 "Looking for a {p} recommendation", "My {p} review after a month", "{p} vs the cheaper ones")
POST_LINES = ("I had the same question last week.", "Mine has been fine for a year now.",
              "Check the size before you order.", "Warm water and a soft brush work for me.",
              "Thanks, that helped a lot.", "I returned mine, it was too heavy.",
              "The shop answered my email within a day.", "Agreed, good value overall.")
ORDER_STATUSES = ("placed", "placed", "shipped", "delivered", "cancelled")


@dataclass
class World:
    """All rows of one seeded database, as plain dicts (what the tasks pick their targets from)."""

    seed: int
    users: list[dict[str, Any]] = field(default_factory=list)
    categories: list[dict[str, Any]] = field(default_factory=list)
    products: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    threads: list[dict[str, Any]] = field(default_factory=list)
    posts: list[dict[str, Any]] = field(default_factory=list)
    orders: list[dict[str, Any]] = field(default_factory=list)

    def user(self, user_id: int) -> dict[str, Any]:
        return next(u for u in self.users if u["id"] == user_id)

    def product(self, product_id: int) -> dict[str, Any]:
        return next(p for p in self.products if p["id"] == product_id)


def hash_password(password: str, salt: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), PBKDF2_ITERATIONS).hex()


def _stamp(rng: random.Random) -> str:
    return f"{BASE_DAY}{rng.randint(1, 28):02d} {rng.randint(8, 21):02d}:{rng.choice((0, 10, 20, 30, 40, 50)):02d}"


def build_world(seed: int) -> World:
    """The seeded contents of the shop and forum (deterministic in `seed`)."""
    rng = random.Random(f"web-world:{seed}")
    world = World(seed=seed)
    names = rng.sample(USERNAMES, 8)
    for i, username in enumerate(sorted(names), start=1):
        salt = f"{rng.getrandbits(48):012x}"
        password = f"{rng.choice(('sun', 'oak', 'sky', 'fox', 'elm', 'ivy'))}-{rng.randint(1000, 9999)}"
        world.users.append({"id": i, "username": username, "password": password, "salt": salt,
                            "display_name": f"{username.capitalize()} {rng.choice(SURNAMES)}",
                            "email": f"{username}@example.org", "password_hash": hash_password(password, salt)})
    world.categories = [{"id": i, "name": name} for i, name in enumerate(CATEGORIES, start=1)]
    seen: set[str] = set()
    products = []
    while len(products) < 24:
        category = world.categories[len(products) % len(CATEGORIES)]
        cat = category["name"]
        name = f"{rng.choice(COLOURS)} {rng.choice(MATERIALS[cat])} {rng.choice(NOUNS[cat])}"
        if name in seen:
            continue
        seen.add(name)
        products.append({"name": name, "category_id": category["id"],
                         "price_cents": rng.randint(3, 120) * 100 + rng.choice((0, 49, 50, 95, 99)),
                         "stock": rng.randint(2, 40),
                         "description": f"A {rng.choice(ADJECTIVES)} {name.split(' ', 2)[2].lower()} "
                                        f"in {name.split()[1].lower()}, made for {rng.choice(USES)}."})
    products.sort(key=lambda p: p["name"])
    for i, product in enumerate(products, start=1):
        product["id"] = i
    world.products = products
    review_id = 0
    for product in products:
        reviewers = rng.sample(world.users, rng.randint(0, 3))
        for user in sorted(reviewers, key=lambda u: u["id"]):
            review_id += 1
            world.reviews.append({"id": review_id, "product_id": product["id"], "user_id": user["id"],
                                  "rating": rng.randint(1, 5), "body": rng.choice(REVIEW_LINES), "created_at": _stamp(rng)})
    titles: list[str] = []
    while len(titles) < 12:
        title = rng.choice(THREAD_TOPICS).format(p=rng.choice(products)["name"].split(" ", 1)[1])
        if title not in titles:
            titles.append(title)
    post_id = 0
    for i, title in enumerate(titles, start=1):
        author = rng.choice(world.users)
        created = _stamp(rng)
        world.threads.append({"id": i, "title": title, "user_id": author["id"], "created_at": created})
        posters = [author] + [rng.choice(world.users) for _ in range(rng.randint(0, 3))]
        for n, user in enumerate(posters):
            post_id += 1
            body = f"{title} Any advice welcome." if n == 0 else rng.choice(POST_LINES)
            world.posts.append({"id": post_id, "thread_id": i, "user_id": user["id"], "body": body,
                                "created_at": f"{created[:11]}{min(23, int(created[11:13]) + n):02d}{created[13:]}"})
    order_id = 0
    for user in world.users:
        for _ in range(rng.randint(1, 3)):
            order_id += 1
            product = rng.choice(products)
            world.orders.append({"id": order_id, "user_id": user["id"], "product_id": product["id"],
                                 "quantity": rng.randint(1, 3), "status": rng.choice(ORDER_STATUSES),
                                 "created_at": _stamp(rng)})
    return world


def write_db(world: World, path: str | Path) -> None:
    """Write `world` into a new SQLite file at `path`, replacing any file there atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    if tmp.exists():
        tmp.unlink()
    conn = sqlite3.connect(tmp)
    try:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("seed", str(world.seed)), ("clock", "0"),
                                                               ("seeded_orders", str(len(world.orders)))])
        conn.executemany("INSERT INTO users VALUES (:id, :username, :display_name, :email, :salt, :password_hash)",
                         world.users)
        conn.executemany("INSERT INTO categories VALUES (:id, :name)", world.categories)
        conn.executemany("INSERT INTO products VALUES (:id, :name, :category_id, :price_cents, :stock, :description)",
                         world.products)
        conn.executemany("INSERT INTO reviews VALUES (:id, :product_id, :user_id, :rating, :body, :created_at)",
                         world.reviews)
        conn.executemany("INSERT INTO threads VALUES (:id, :title, :user_id, :created_at)", world.threads)
        conn.executemany("INSERT INTO posts VALUES (:id, :thread_id, :user_id, :body, :created_at)", world.posts)
        conn.executemany("INSERT INTO orders VALUES (:id, :user_id, :product_id, :quantity, :status, :created_at)",
                         world.orders)
        conn.commit()
    finally:
        conn.close()
    os.replace(tmp, path)


def price(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"
