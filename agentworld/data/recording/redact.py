"""Redaction: secrets in recorded traffic become typed placeholders before anything is written.

A recording of a user's real system must never carry its credentials to disk (trajectory files,
the DVC cache, MLflow artifacts are all copies of what the recorder writes). Three rules apply to
every string the recorder is about to write:

- a header or JSON field whose *name* says it holds a secret (Authorization, Cookie, api_key,
  password, ...) has its whole value replaced: `<REDACTED:authorization>`;
- a value that *looks* like a credential wherever it appears (a bearer token, an OpenAI/Stripe
  style `sk-...` key, a GitHub or Slack token, an AWS access key id, a JWT, a password in a URL,
  `api_key=...` in a query string) is replaced by the placeholder of its kind;
- the user's own patterns (`--redact NAME=REGEX`) are replaced the same way.

Placeholders keep the type of what was removed, so a world model trained on the recording learns
that a token goes there, not what it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Headers whose value is a credential, compared lower-case.
SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token",
    "x-access-token", "x-amz-security-token",
})

#: JSON field names whose value is a credential.
SECRET_FIELD = re.compile(
    r"^(?:api[_-]?key|apikey|access[_-]?token|refresh[_-]?token|auth[_-]?token|id[_-]?token|token|secret|"
    r"client[_-]?secret|password|passwd|private[_-]?key|authorization|cookie)$", re.IGNORECASE)

#: Credential-shaped values, by kind; the first group, when there is one, is kept (a key's name).
BUILTIN_PATTERNS: dict[str, str] = {
    "bearer_token": r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}",
    "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "api_key": r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9]+-)?[A-Za-z0-9_]{16,}",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    "slack_token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "url_password": r"(?<=://)([^/\s:@]+:)[^/\s@]+(?=@)",
    "query_secret": r"(?i)(\b(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|password)"
                    r"[\"']?\s*[=:]\s*[\"']?)[^\s\"'&,;}]{4,}",
}


def placeholder(kind: str) -> str:
    return f"<REDACTED:{kind}>"


@dataclass
class Redactor:
    """Replaces secrets in strings, headers and JSON values. `extra` adds the user's patterns."""

    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.patterns: list[tuple[str, re.Pattern[str]]] = []
        for kind, pattern in {**BUILTIN_PATTERNS, **dict(self.extra)}.items():
            if not re.fullmatch(r"[A-Za-z0-9_]+", kind):
                raise ValueError(f"redaction pattern name {kind!r}: use letters, digits and _ only")
            try:
                self.patterns.append((kind, re.compile(pattern)))
            except re.error as exc:
                raise ValueError(f"redaction pattern {kind}={pattern!r} is not a valid regex: {exc}") from exc

    @classmethod
    def from_options(cls, options: list[str] | None) -> Redactor:
        """From `NAME=REGEX` command-line options."""
        extra = {}
        for option in options or []:
            name, sep, pattern = option.partition("=")
            if not sep or not name or not pattern:
                raise ValueError(f"--redact {option!r}: expected NAME=REGEX")
            extra[name] = pattern
        return cls(extra)

    def text(self, value: str) -> str:
        """`value` with every credential-shaped part replaced."""
        for kind, pattern in self.patterns:
            value = pattern.sub(lambda m, kind=kind: (m.group(1) if m.re.groups else "") + placeholder(kind), value)
        return value

    def headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """Headers with secret ones blanked whole and the rest scanned."""
        return {name: placeholder(name.lower()) if name.lower() in SECRET_HEADERS else self.text(value)
                for name, value in headers.items()}

    def value(self, value: Any, *, key: str | None = None) -> Any:
        """A JSON value with secret fields blanked whole and every string scanned."""
        if key is not None and SECRET_FIELD.match(key) and isinstance(value, str | int | float) and value != "":
            return placeholder(key.lower().replace("-", "_"))
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v, key=str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value
