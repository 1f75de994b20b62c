"""Agora: the real web application of the `web` domain (a small shop with a community forum).

A Flask 3 app over one SQLite file: log in/out, product search with category filter and
pagination, product pages with ordering and reviews, a forum with search, threads and replies,
order history with cancellation, and an account page (display name, email, password).
Jinja2 autoescaping renders user input as text; every response carries a Content-Security-Policy
that forbids scripts, and the app itself ships no JavaScript. All POSTs answer with a redirect
(post/redirect/get), validation errors come back as flashed `Error: ...` messages. The app's clock
is fixed: each write is stamped `CLOCK_START + n minutes` from a counter in the database, so
episodes are reproducible.

`AppServer` runs the app on 127.0.0.1 (a free port) in a werkzeug server thread.
"""

from __future__ import annotations

import math
import re
import secrets
import sqlite3
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from flask import Flask, abort, flash, g, redirect, render_template, request, session
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from agentworld.domains.web.seed import CLOCK_START, hash_password, price

PRODUCTS_PER_PAGE = 6
THREADS_PER_PAGE = 5
MAX_TEXT = 2000
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
CSP = "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"


def create_app(db_path: str | Path) -> Flask:
    app = Flask(__name__, template_folder=str(Path(__file__).with_name("templates")))
    # A fresh signing key per app: a key in the source would let anyone who can set a cookie be
    # any user. Episodes stay reproducible (the agent never sees the cookie).
    app.config.update(SECRET_KEY=secrets.token_hex(32), DB_PATH=str(db_path),
                      SESSION_COOKIE_SAMESITE="Lax")

    # ------------------------------------------------------------------ plumbing
    def db() -> sqlite3.Connection:
        if "db" not in g:
            g.db = sqlite3.connect(app.config["DB_PATH"])
            g.db.row_factory = sqlite3.Row
        return g.db

    @app.teardown_appcontext
    def _close_db(_exc: BaseException | None) -> None:
        conn = g.pop("db", None)
        if conn is not None:
            conn.close()

    def now() -> str:
        """The app's fixed clock: one minute per write, from CLOCK_START."""
        conn = db()
        tick = int(conn.execute("SELECT value FROM meta WHERE key='clock'").fetchone()[0])
        conn.execute("UPDATE meta SET value=? WHERE key='clock'", (str(tick + 1),))
        return (datetime.strptime(CLOCK_START, "%Y-%m-%d %H:%M") + timedelta(minutes=tick)).strftime("%Y-%m-%d %H:%M")

    def current_user() -> sqlite3.Row | None:
        uid = session.get("uid")
        if uid is None:
            return None
        return db().execute("SELECT * FROM users WHERE id=?", (uid,)).fetchone()

    def require_login() -> sqlite3.Row:
        user = current_user()
        if user is None:
            flash("Please log in first.", "error")
            back = request.path if request.method == "GET" else request.referrer_path  # type: ignore[attr-defined]
            abort(redirect(f"/login?{urlencode({'next': back or '/'})}"))
        return user

    @app.before_request
    def _referrer_path() -> None:
        ref = request.referrer or ""
        m = re.match(r"^https?://[^/]+(/[^#]*)$", ref)
        request.referrer_path = m.group(1) if m and m.group(1).startswith("/") else "/"  # type: ignore[attr-defined]

    @app.context_processor
    def _inject() -> dict[str, Any]:
        return {"user": current_user(), "search_q": request.args.get("q", "") if request.path == "/products" else ""}

    @app.after_request
    def _headers(resp: Any) -> Any:
        resp.headers["Content-Security-Policy"] = CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Cache-Control"] = "no-store"
        return resp

    def back_to(path: str) -> Any:
        return redirect(path, code=303)

    def page_arg() -> int:
        page = request.args.get("page", 1, type=int)
        if page < 1:
            abort(404)
        return page

    # ------------------------------------------------------------------ pages
    @app.get("/")
    def home() -> str:
        categories = db().execute("SELECT c.name, COUNT(p.id) AS n FROM categories c LEFT JOIN products p "
                                  "ON p.category_id=c.id GROUP BY c.id ORDER BY c.name").fetchall()
        threads = db().execute("SELECT t.id, t.title, u.username FROM threads t JOIN users u ON u.id=t.user_id "
                               "ORDER BY t.created_at DESC, t.id DESC LIMIT 3").fetchall()
        return render_template("home.html", categories=categories, threads=threads)

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        nxt = request.args.get("next", "")
        if not nxt.startswith("/") or nxt.startswith("//"):
            nxt = ""
        if request.method == "POST":
            username = request.form.get("username", "").strip()
            password = request.form.get("password", "")
            user = db().execute("SELECT * FROM users WHERE username=?", (username,)).fetchone()
            if user is None or hash_password(password, user["salt"]) != user["password_hash"]:
                flash("Error: invalid username or password.", "error")
                return back_to(f"/login?{urlencode({'next': nxt})}" if nxt else "/login")
            session.clear()
            session["uid"] = user["id"]
            flash(f"Welcome back, {user['display_name']}!", "info")
            return back_to(nxt or "/")
        return render_template("login.html", next=nxt)

    @app.post("/logout")
    def logout() -> Any:
        session.clear()
        flash("You have been logged out.", "info")
        return back_to("/")

    @app.get("/products")
    def products() -> str:
        q = request.args.get("q", "").strip()
        category = request.args.get("category", "").strip()
        page = page_arg()
        where, args = [], []
        if q:
            where.append("p.name LIKE ? ESCAPE '\\'")
            args.append("%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        if category:
            where.append("c.name = ?")
            args.append(category)
        sql_where = f"WHERE {' AND '.join(where)}" if where else ""
        total = db().execute(f"SELECT COUNT(*) FROM products p JOIN categories c ON c.id=p.category_id {sql_where}",
                             args).fetchone()[0]
        pages = max(1, math.ceil(total / PRODUCTS_PER_PAGE))
        if page > pages:
            abort(404)
        rows = db().execute(
            "SELECT p.id, p.name, p.price_cents, c.name AS category, COUNT(r.id) AS n_reviews, AVG(r.rating) AS avg "
            f"FROM products p JOIN categories c ON c.id=p.category_id LEFT JOIN reviews r ON r.product_id=p.id {sql_where} "
            "GROUP BY p.id ORDER BY p.name LIMIT ? OFFSET ?", [*args, PRODUCTS_PER_PAGE, (page - 1) * PRODUCTS_PER_PAGE],
        ).fetchall()
        items = [{"id": r["id"], "name": r["name"], "price": price(r["price_cents"]), "category": r["category"],
                  "n_reviews": r["n_reviews"], "avg": f"{r['avg']:.1f}" if r["avg"] is not None else ""} for r in rows]
        cats = db().execute("SELECT name FROM categories ORDER BY name").fetchall()

        def page_url(n: int) -> str:
            params = {k: v for k, v in (("q", q), ("category", category)) if v}
            return f"/products?{urlencode({**params, 'page': n})}"

        return render_template("products.html", products=items, categories=cats, category=category, total=total,
                               page=page, pages=pages, page_url=page_url)

    def product_row(product_id: int) -> sqlite3.Row:
        row = db().execute("SELECT p.*, c.name AS category FROM products p JOIN categories c ON c.id=p.category_id "
                           "WHERE p.id=?", (product_id,)).fetchone()
        if row is None:
            abort(404)
        return row

    @app.get("/products/<int:product_id>")
    def product(product_id: int) -> str:
        row = product_row(product_id)
        reviews = db().execute("SELECT r.*, u.display_name FROM reviews r JOIN users u ON u.id=r.user_id "
                               "WHERE r.product_id=? ORDER BY r.created_at DESC, r.id DESC", (product_id,)).fetchall()
        item = {**dict(row), "price": price(row["price_cents"])}
        return render_template("product.html", product=item, reviews=reviews)

    @app.post("/products/<int:product_id>/order")
    def order_product(product_id: int) -> Any:
        row = product_row(product_id)
        user = require_login()
        raw = request.form.get("quantity", "").strip()
        if not re.fullmatch(r"\d{1,2}", raw) or not 1 <= int(raw) <= 99:
            flash(f"Error: quantity must be a whole number from 1 to 99, got \"{raw}\".", "error")
            return back_to(f"/products/{product_id}")
        quantity = int(raw)
        if quantity > row["stock"]:
            flash(f"Error: only {row['stock']} of {row['name']} left in stock.", "error")
            return back_to(f"/products/{product_id}")
        conn = db()
        stamp = now()
        cur = conn.execute("INSERT INTO orders (user_id, product_id, quantity, status, created_at) VALUES (?, ?, ?, 'placed', ?)",
                           (user["id"], product_id, quantity, stamp))
        conn.execute("UPDATE products SET stock=stock-? WHERE id=?", (quantity, product_id))
        conn.commit()
        flash(f"Order #{cur.lastrowid} placed: {quantity} x {row['name']}.", "info")
        return back_to(f"/orders/{cur.lastrowid}")

    @app.post("/products/<int:product_id>/review")
    def review_product(product_id: int) -> Any:
        product_row(product_id)
        user = require_login()
        rating = request.form.get("rating", "")
        body = request.form.get("body", "")
        if rating not in {"1", "2", "3", "4", "5"}:
            flash("Error: choose a rating from 1 to 5 stars.", "error")
        elif not body.strip():
            flash("Error: the review text cannot be empty.", "error")
        elif len(body) > MAX_TEXT:
            flash(f"Error: the review is longer than {MAX_TEXT} characters.", "error")
        else:
            conn = db()
            conn.execute("INSERT INTO reviews (product_id, user_id, rating, body, created_at) VALUES (?, ?, ?, ?, ?)",
                         (product_id, user["id"], int(rating), body, now()))
            conn.commit()
            flash("Thank you, your review was posted.", "info")
        return back_to(f"/products/{product_id}")

    @app.get("/forum")
    def forum() -> str:
        q = request.args.get("q", "").strip()
        page = page_arg()
        where, args = ("WHERE t.title LIKE ?", ["%" + q + "%"]) if q else ("", [])
        total = db().execute(f"SELECT COUNT(*) FROM threads t {where}", args).fetchone()[0]
        pages = max(1, math.ceil(total / THREADS_PER_PAGE))
        if page > pages:
            abort(404)
        threads = db().execute(
            "SELECT t.id, t.title, u.username, COUNT(p.id) AS n_posts, MAX(p.created_at) AS last FROM threads t "
            f"JOIN users u ON u.id=t.user_id LEFT JOIN posts p ON p.thread_id=t.id {where} GROUP BY t.id "
            "ORDER BY last DESC, t.id DESC LIMIT ? OFFSET ?", [*args, THREADS_PER_PAGE, (page - 1) * THREADS_PER_PAGE],
        ).fetchall()

        def page_url(n: int) -> str:
            return f"/forum?{urlencode({**({'q': q} if q else {}), 'page': n})}"

        return render_template("forum.html", threads=threads, total=total, page=page, pages=pages, forum_q=q,
                               page_url=page_url)

    @app.route("/forum/new", methods=["GET", "POST"])
    def new_thread() -> Any:
        user = require_login()
        if request.method == "GET":
            return render_template("new_thread.html")
        title = request.form.get("title", "").strip()
        body = request.form.get("body", "")
        if not 5 <= len(title) <= 120:
            flash("Error: the title must be 5 to 120 characters long.", "error")
        elif db().execute("SELECT 1 FROM threads WHERE title=?", (title,)).fetchone():
            flash(f"Error: a thread titled \"{title}\" already exists.", "error")
        elif not body.strip():
            flash("Error: the message cannot be empty.", "error")
        elif len(body) > MAX_TEXT:
            flash(f"Error: the message is longer than {MAX_TEXT} characters.", "error")
        else:
            conn = db()
            stamp = now()
            cur = conn.execute("INSERT INTO threads (title, user_id, created_at) VALUES (?, ?, ?)", (title, user["id"], stamp))
            conn.execute("INSERT INTO posts (thread_id, user_id, body, created_at) VALUES (?, ?, ?, ?)",
                         (cur.lastrowid, user["id"], body, stamp))
            conn.commit()
            flash("Your thread was created.", "info")
            return back_to(f"/forum/{cur.lastrowid}")
        return back_to("/forum/new")

    @app.get("/forum/<int:thread_id>")
    def thread(thread_id: int) -> str:
        row = db().execute("SELECT t.*, u.username FROM threads t JOIN users u ON u.id=t.user_id WHERE t.id=?",
                           (thread_id,)).fetchone()
        if row is None:
            abort(404)
        posts = db().execute("SELECT p.*, u.username, u.display_name FROM posts p JOIN users u ON u.id=p.user_id "
                             "WHERE p.thread_id=? ORDER BY p.created_at, p.id", (thread_id,)).fetchall()
        return render_template("thread.html", thread=row, posts=posts)

    @app.post("/forum/<int:thread_id>/reply")
    def reply(thread_id: int) -> Any:
        if db().execute("SELECT 1 FROM threads WHERE id=?", (thread_id,)).fetchone() is None:
            abort(404)
        user = require_login()
        body = request.form.get("body", "")
        if not body.strip():
            flash("Error: the reply cannot be empty.", "error")
        elif len(body) > MAX_TEXT:
            flash(f"Error: the reply is longer than {MAX_TEXT} characters.", "error")
        else:
            conn = db()
            conn.execute("INSERT INTO posts (thread_id, user_id, body, created_at) VALUES (?, ?, ?, ?)",
                         (thread_id, user["id"], body, now()))
            conn.commit()
            flash("Your reply was posted.", "info")
        return back_to(f"/forum/{thread_id}")

    def own_order(order_id: int, user: sqlite3.Row) -> sqlite3.Row:
        row = db().execute("SELECT o.*, p.name AS product, p.price_cents FROM orders o JOIN products p ON p.id=o.product_id "
                           "WHERE o.id=? AND o.user_id=?", (order_id, user["id"])).fetchone()
        if row is None:
            abort(404)
        return row

    @app.get("/orders")
    def orders() -> str:
        user = require_login()
        rows = db().execute("SELECT o.*, p.name AS product FROM orders o JOIN products p ON p.id=o.product_id "
                            "WHERE o.user_id=? ORDER BY o.id DESC", (user["id"],)).fetchall()
        return render_template("orders.html", orders=rows)

    @app.get("/orders/<int:order_id>")
    def order(order_id: int) -> str:
        row = own_order(order_id, require_login())
        item = {**dict(row), "total": price(row["price_cents"] * row["quantity"])}
        return render_template("order.html", order=item)

    @app.post("/orders/<int:order_id>/cancel")
    def cancel(order_id: int) -> Any:
        row = own_order(order_id, require_login())
        if row["status"] != "placed":
            flash(f"Error: order #{order_id} is {row['status']} and can no longer be cancelled.", "error")
        else:
            conn = db()
            conn.execute("UPDATE orders SET status='cancelled' WHERE id=?", (order_id,))
            conn.execute("UPDATE products SET stock=stock+? WHERE id=?", (row["quantity"], row["product_id"]))
            conn.commit()
            flash(f"Order #{order_id} was cancelled.", "info")
        return back_to(f"/orders/{order_id}")

    @app.get("/account")
    def account() -> str:
        require_login()
        return render_template("account.html")

    @app.post("/account/profile")
    def profile() -> Any:
        user = require_login()
        name = request.form.get("display_name", "").strip()
        email = request.form.get("email", "").strip()
        if not 1 <= len(name) <= 60:
            flash("Error: the display name must be 1 to 60 characters long.", "error")
        elif not EMAIL_RE.match(email):
            flash(f"Error: \"{email}\" is not a valid email address.", "error")
        else:
            conn = db()
            conn.execute("UPDATE users SET display_name=?, email=? WHERE id=?", (name, email, user["id"]))
            conn.commit()
            flash("Your profile was saved.", "info")
        return back_to("/account")

    @app.post("/account/password")
    def password() -> Any:
        user = require_login()
        current, new = request.form.get("current", ""), request.form.get("new", "")
        if hash_password(current, user["salt"]) != user["password_hash"]:
            flash("Error: the current password is wrong.", "error")
        elif len(new) < 8:
            flash("Error: the new password must be at least 8 characters long.", "error")
        else:
            conn = db()
            conn.execute("UPDATE users SET password_hash=? WHERE id=?", (hash_password(new, user["salt"]), user["id"]))
            conn.commit()
            flash("Your password was changed.", "info")
        return back_to("/account")

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # no per-request lines on stderr
        pass


class AppServer:
    """The app served on 127.0.0.1 by a werkzeug server in a daemon thread."""

    def __init__(self, db_path: str | Path) -> None:
        self.app = create_app(db_path)
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        self._server = make_server("127.0.0.1", 0, self.app, threaded=False, request_handler=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="agora-web", daemon=True)
        self._thread.start()
        return self.origin

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_port)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
