"""The `web` domain: Agora, a real Flask shop + forum over SQLite, driven by headless Chromium.

Modules: `app` (the web application and its server thread), `seed` (the seeded database),
`tasks` (task templates, solutions and database checkers), `browser` (Playwright/Chromium and the
page-to-text snapshot), `env` (the TextEnv, probe, factory, behaviour policies). Importing this
package is light: Playwright and Flask are imported by the modules that need them.
"""
