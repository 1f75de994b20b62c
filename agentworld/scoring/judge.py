"""Judges: score a predicted observation against the real one on five dimensions.

A judge sees the context of one transition (domain, task instruction, history of
(action, observation) pairs, the current action), the world model's raw generation and the
ground-truth observation (the reference), and scores the generation on

- format: the chat layout (`<think>...</think>` closed, `**Environment Observation:**` present)
  and the domain's observation shape (JSON tool result for mcp, ranked list for search, ...);
- factuality: deterministic content (numbers, paths, error types, JSON fields, URLs, element
  ids) matches the reference; pre-existing environment prose need only be plausible;
- consistency: no contradiction with the history (created files still exist, missing files
  stay missing, the working directory, entities carried over from earlier turns);
- realism: length and character distribution close to the reference, no degenerate repetition;
- quality: overall closeness to the reference (token F1 and edit similarity) and to what the
  action changed since the previous observation.

Each dimension is an integer 1-5 (`JudgeScores`); `normalised()` maps them to 0-100 and
`overall` is their mean. Two backends share the `Judge.score(batch)` interface: `LocalJudge`
(deterministic rules, an approximation) and `OpenAIJudge` (an LLM behind any OpenAI-compatible
endpoint, with our rubric prompts). `rank_agreement` compares two judges' rankings.
"""

from __future__ import annotations

import abc
import difflib
import json
import math
import re
import shlex
import string
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agentworld.data.prompts import OBSERVATION_MARKER, parse_observation
from agentworld.domains import Domain, find_domain
from agentworld.scoring.metrics import normalise, token_f1
from agentworld.validation.domains import action_verb

DIMENSIONS: tuple[str, ...] = ("format", "factuality", "consistency", "realism", "quality")


# --------------------------------------------------------------------------------------------
# Inputs and scores
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeInput:
    """One judged transition. `generation` is the model's raw assistant text (think block,
    marker, observation); `reference` is the real observation (no marker)."""

    domain: str
    generation: str
    reference: str
    action: str = ""
    history: tuple[tuple[str, str], ...] = ()
    instruction: str = ""

    def __post_init__(self) -> None:  # datasets columns turn tuples into lists
        object.__setattr__(self, "history", tuple((str(a), str(o)) for a, o in (self.history or ())))

    @property
    def observation(self) -> str:
        return parse_observation(self.generation)[0]

    @classmethod
    def from_example(cls, example: Any, generation: str) -> JudgeInput:
        """From a `WorldModelExample` (its system prompt ends with "The agent's task: ...")."""
        instruction = example.system.split("The agent's task: ", 1)[-1] if "The agent's task: " in example.system else ""
        return cls(domain=example.domain, generation=generation, reference=example.observation,
                   action=example.action, history=tuple(example.history), instruction=instruction)


@dataclass(frozen=True)
class JudgeScores:
    """Five scores 1-5 and a short reason. A dimension with nothing to measure on this input
    (no deterministic facts on either side, no context to stay consistent with) is `None`:
    not applicable, left out of `overall` rather than scored 5, as the official scorer leaves
    out a dimension whose score fails to parse."""

    format: int | None
    factuality: int | None
    consistency: int | None
    realism: int | None
    quality: int | None
    reason: str = ""

    def __post_init__(self) -> None:
        for dim in DIMENSIONS:
            value = getattr(self, dim)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 5:
                raise ValueError(f"judge score {dim!r} must be an integer 1-5 or None (not applicable), got {value!r}")
        if all(getattr(self, dim) is None for dim in DIMENSIONS):
            raise ValueError("judge scores need at least one applicable dimension")

    def as_dict(self) -> dict[str, int | None]:
        return {dim: getattr(self, dim) for dim in DIMENSIONS}

    def normalised(self) -> dict[str, float | None]:
        """Each dimension on 0-100 (1 -> 0, 5 -> 100); None where not applicable."""
        return {dim: None if (v := getattr(self, dim)) is None else (v - 1) * 25.0 for dim in DIMENSIONS}

    def applicable(self) -> dict[str, float]:
        """The normalised dimensions that apply to this input."""
        return {dim: v for dim, v in self.normalised().items() if v is not None}

    @property
    def overall(self) -> float:
        """Mean of the applicable normalised dimensions, 0-100."""
        values = self.applicable().values()
        return sum(values) / len(values)


class Judge(abc.ABC):
    """Scores a batch of predicted observations against their references."""

    name: str = "judge"

    @abc.abstractmethod
    def score(self, batch: Sequence[JudgeInput]) -> list[JudgeScores]:
        """One `JudgeScores` per input, in input order."""


def _clamp(value: float, low: int = 1, high: int = 5) -> int:
    return int(max(low, min(high, round(value))))


def _band(value: float, thresholds: tuple[float, float, float, float]) -> int:
    """5 if value >= t[0], 4 if >= t[1], 3 if >= t[2], 2 if >= t[3], else 1."""
    for score, threshold in zip((5, 4, 3, 2), thresholds):
        if value >= threshold:
            return score
    return 1


# --------------------------------------------------------------------------------------------
# Shared rules (also used by agentworld.training.rewards)
# --------------------------------------------------------------------------------------------


LAYOUT_PENALTIES: dict[str, int] = {
    "observation marker missing": 3, "think block not closed": 2, "unbalanced think tags": 2,
    "text before the marker": 1, "text before the think block": 1,
    "marker or think tag repeated inside the observation": 1,
}


def layout_problems(generation: str) -> list[str]:
    """What is wrong with the chat layout of a generation (empty list: none)."""
    problems = []
    opened, closed = generation.count("<think>"), generation.count("</think>")
    if opened != closed or opened > 1:
        problems.append("think block not closed" if opened > closed else "unbalanced think tags")
    after_think = generation.split("</think>", 1)[1] if "</think>" in generation else generation
    if OBSERVATION_MARKER not in after_think:
        problems.append("observation marker missing")
    else:
        before = after_think.split(OBSERVATION_MARKER, 1)[0]
        if before.strip() and not problems:  # an unclosed think block already explains the text
            problems.append("text before the marker")
        if "<think>" in generation and not generation.lstrip().startswith("<think>"):
            problems.append("text before the think block")
        obs = after_think.split(OBSERVATION_MARKER, 1)[1]
        if OBSERVATION_MARKER in obs or "<think>" in obs:
            problems.append("marker or think tag repeated inside the observation")
    return problems


def parse_json(text: str) -> Any:
    """The JSON value of a whole observation, or None when it is not JSON (objects/arrays only)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def shape_problems(domain: str, action: str, observation: str, reference: str | None = None) -> list[str]:
    """Where an observation breaks its domain's shape: the domain's `shape_rules` (the rules the
    validation suite applies to collected rows), plus: when the reference is JSON the observation
    must be JSON too, and when the reference says something the observation must not be empty."""
    if reference is not None and reference.strip() and not observation.strip():
        return ["empty observation where the environment answered"]
    verb = action_verb(action)
    declared = find_domain(domain)
    rules = [rule for rule in (declared.shape_rules if declared else ()) if rule.applies(verb)]
    problems = [f"{domain}: {rule.why}" for rule in rules if not rule.holds(observation)]
    json_checked = any(rule.kind == "json" for rule in rules)
    if (reference is not None and not json_checked and parse_json(reference) is not None
            and parse_json(observation) is None):
        problems.append("the reference is JSON but the observation is not")
    return problems


# Runtime metadata: only needs to be well-formed, so it is masked before facts are compared.
_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
RUNTIME_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("datetime", re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b")),
    ("lsdate", re.compile(rf"\b(?:{_MONTHS})\s+\d{{1,2}}\s+(?:\d{{1,2}}:\d{{2}}|\d{{4}})\b")),
    ("clock", re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b")),
    ("duration", re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b")),
    ("pid", re.compile(r"\b(?:pid|PID)[ =:]*\d+\b")),
    ("address", re.compile(r"\b0x[0-9a-fA-F]{4,}\b")),
)
RUNTIME_JSON_KEY = re.compile(r"(?:^|_)(?:at|time|timestamp|date|created|updated|duration|elapsed|pid|uptime)$", re.I)

ERROR_PHRASES: tuple[str, ...] = (
    "No such file or directory", "command not found", "Permission denied", "Is a directory", "Not a directory",
    "File exists", "Directory not empty", "Traceback", "Operation not permitted", "invalid option",
    "missing operand", "syntax error", "not found", "No results for", "Error:", "error:", "FAILED", "timed out",
)
_ERROR_NAME = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b")
_TESTS_FAILED = re.compile(r"\b\d+ (?:failed|errors?)\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_EXTENSIONS = ("py|pyc|txt|md|rst|json|jsonl|yaml|yml|toml|cfg|ini|conf|sh|log|csv|tsv|c|h|cpp|js|ts|html|css|"
               "service|timer|rs|go|java|xml|sql|db|lock|gz|tar|zip|pem|env|bak|out")
_FILENAME = re.compile(rf"(?<![\w/.-])[\w.-]*[\w-]\.(?:{_EXTENSIONS})\b")
_PATH = re.compile(r"(?<![\w:])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*|(?<![\w:/])/[\w.-]+")
_URL = re.compile(r"https?://\S+|^URL: (\S+)", re.M)
_ELEMENT_ID = re.compile(r"\[(\d+)\]")
_DOC_ID = re.compile(r"\[([a-z]+:[^\]\s]+)\]")
_QUOTED = re.compile(r"\"([^\"\n]{2,80})\"|'([^'\n]{2,80})'")


def mask_runtime(text: str) -> tuple[str, set[str]]:
    """The text with runtime metadata replaced by `<kind>`, and the kinds found."""
    kinds = set()
    for kind, pattern in RUNTIME_PATTERNS:
        text, n = pattern.subn(f"<{kind}>", text)
        if n:
            kinds.add(kind)
    return text, kinds


def error_types(text: str) -> set[str]:
    """Error signatures of an observation: known phrases, `...Error` names, JSON `isError`,
    pytest's `N failed` / `N errors`."""
    found = {f"err:{phrase.lower()}" for phrase in ERROR_PHRASES if phrase in text}
    found |= {f"err:{name}" for name in _ERROR_NAME.findall(text)}
    if _TESTS_FAILED.search(text):  # pytest's summary: failing tests are an error outcome
        found.add("err:tests failed")
    value = parse_json(text)
    if isinstance(value, dict) and isinstance(value.get("isError"), bool):
        found.add(f"isError:{str(value['isError']).lower()}")
        found.discard("err:error:")
        found.discard("err:not found")
        if value["isError"] and isinstance(value.get("error"), str):
            found |= {f"err:{name}" for name in _ERROR_NAME.findall(value["error"])}
    return found


def json_leaves(value: Any, path: str = "$") -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def json_facts(value: Any) -> set[str]:
    """`path=value` for every scalar leaf; runtime keys (`*_at`, `timestamp`, ...) and long prose
    strings only by type."""
    facts = set()
    for path, leaf in json_leaves(value):
        key = re.split(r"[.\[]", path)[-1].rstrip("]")
        if RUNTIME_JSON_KEY.search(key) or (isinstance(leaf, str) and len(leaf) > 80):
            facts.add(f"json:{path}:{type(leaf).__name__}")
        else:
            facts.add(f"json:{path}={json.dumps(leaf)}")
    return facts


def deterministic_facts(text: str) -> set[str]:
    """Content a faithful world model must reproduce exactly: error types, numbers, file names
    and paths, URLs, element ids, search doc ids, JSON leaves; runtime metadata only by kind."""
    value = parse_json(text)
    facts = error_types(text)
    if value is not None:
        facts |= json_facts(value)
        return facts
    masked, kinds = mask_runtime(text)
    facts |= {f"runtime:{kind}" for kind in kinds}
    facts |= {f"num:{n}" for n in _NUMBER.findall(masked)}
    facts |= {f"file:{f}" for f in _FILENAME.findall(masked)}
    facts |= {f"path:{p}" for p in _PATH.findall(masked) if len(p) > 1}
    facts |= {f"url:{m.group(1) or m.group(0)}" for m in _URL.finditer(masked)}
    facts |= {f"eid:{i}" for i in _ELEMENT_ID.findall(masked)}
    facts |= {f"doc:{d}" for d in _DOC_ID.findall(masked)}
    return facts


def set_f1(pred: set[str], ref: set[str]) -> float | None:
    """F1 of two sets; None when both are empty (nothing to compare, not a perfect score)."""
    if not pred and not ref:
        return None
    common = len(pred & ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def fact_match(observation: str, reference: str, previous: str | None = None) -> tuple[float | None, bool]:
    """F1 of the deterministic facts (None when neither side has any), and whether the error
    signatures agree.

    With the `previous` observation, the facts the action changed count as much as all facts:
    the F1 is the mean of the F1 over all facts and the F1 over the facts that differ from the
    previous observation (added or gone), so repeating the last page, which shares most of its
    facts with the next one, does not pass for predicting what the action did."""
    pred, ref = deterministic_facts(observation), deterministic_facts(reference)
    errors_agree = {f for f in pred if f.startswith(("err:", "isError:"))} == \
        {f for f in ref if f.startswith(("err:", "isError:"))}
    overall = set_f1(pred, ref)
    if previous is None or overall is None:
        return overall, errors_agree
    before = deterministic_facts(previous)
    changed = set_f1(pred ^ before, ref ^ before)
    return (overall if changed is None else (overall + changed) / 2), errors_agree


def line_changes(text: str, previous: str) -> Counter[str]:
    """The tokens of the lines `text` adds to `previous` (prefixed "+") and of the lines it
    drops (prefixed "-"): what an action changed, as a multiset."""
    now, before = Counter(normalise(text).splitlines()), Counter(normalise(previous).splitlines())
    tokens: Counter[str] = Counter()
    for sign, lines in (("+", now - before), ("-", before - now)):
        for line, count in lines.items():
            for token in line.split():
                tokens[sign + token] += count
    return tokens


def change_f1(observation: str, reference: str, previous: str) -> float | None:
    """Token F1 of the changes the prediction and the reference make to the previous
    observation; None when neither changes anything (nothing to compare)."""
    pred, ref = line_changes(observation, previous), line_changes(reference, previous)
    if not pred and not ref:
        return None
    common = sum((pred & ref).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(pred.values()), common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


def edit_similarity(prediction: str, reference: str, max_chars: int = 6000) -> float:
    """Normalised edit similarity in [0, 1] (difflib's ratio, 2*matches/total; a close, fast
    stand-in for 1 - Levenshtein/len, on the first `max_chars` characters to bound its quadratic
    worst case); two empty texts agree perfectly."""
    a, b = normalise(prediction)[:max_chars], normalise(reference)[:max_chars]
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


_CHAR_CLASSES = ("lower", "upper", "digit", "space", "punct", "other")


def char_distribution(text: str) -> dict[str, float]:
    counts = Counter()
    for ch in text:
        if ch.islower():
            counts["lower"] += 1
        elif ch.isupper():
            counts["upper"] += 1
        elif ch.isdigit():
            counts["digit"] += 1
        elif ch.isspace():
            counts["space"] += 1
        elif ch in string.punctuation:
            counts["punct"] += 1
        else:
            counts["other"] += 1
    total = sum(counts.values()) or 1
    return {c: counts[c] / total for c in _CHAR_CLASSES}


def repetition(text: str) -> float:
    """Share of degenerate repetition: the larger of the duplicate-line share (among lines of
    4+ chars) and the share of word 4-grams that repeat an earlier one."""
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 4]
    line_dup = 1 - len(set(lines)) / len(lines) if len(lines) >= 4 else 0.0
    words = text.split()
    grams = [tuple(words[i:i + 4]) for i in range(len(words) - 3)]
    gram_dup = 1 - len(set(grams)) / len(grams) if len(grams) >= 8 else 0.0
    return max(line_dup, gram_dup)


# --------------------------------------------------------------------------------------------
# Consistency with the history (filesystem-like state, cwd, carried-over entities)
# --------------------------------------------------------------------------------------------

_MISSING = re.compile(r"([^\s:'\"`]+)'?:? No such file or directory|cannot access '([^']+)'")
_SEPARATORS = re.compile(r"&&|\|\||;|\|")


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def action_effects(action: str) -> tuple[set[str], set[str], str | None]:
    """(names created, names removed, new cwd or None) of a shell-like action. Basenames."""
    created, removed, cwd = set(), set(), None
    for target in re.findall(r">>?\s*([^\s;&|]+)", action):
        created.add(_basename(target))
    for part in _SEPARATORS.split(re.sub(r">>?\s*[^\s;&|]+", " ", action)):
        words = _words(part.strip())
        if not words:
            continue
        verb, args = words[0], [w for w in words[1:] if not w.startswith("-")]
        if verb in ("mkdir", "touch", "tee") and args:
            created |= {_basename(a) for a in args}
        elif verb in ("cp", "mv", "ln") and len(args) >= 2:
            created.add(_basename(args[-1]))
            if verb == "mv":
                removed |= {_basename(a) for a in args[:-1]}
        elif verb in ("rm", "rmdir", "unlink") and args:
            removed |= {_basename(a) for a in args}
        elif verb == "cd":
            cwd = args[0] if args else "~"
    if action.lstrip().startswith(("edit ", "create ")):  # swe edit {"path": ...}
        match = re.search(r'"path"\s*:\s*"([^"]+)"', action)
        if match:
            created.add(_basename(match.group(1)))
    return created, removed - created, cwd


def _resolve(cwd: str | None, target: str) -> str | None:
    if target.startswith("/"):
        base, rest = "/", target
    elif cwd is None:
        return None
    else:
        base, rest = cwd, target
    parts = [] if base == "/" else [p for p in base.split("/") if p]
    for piece in rest.split("/"):
        if piece in ("", "."):
            continue
        if piece == "..":
            parts = parts[:-1]
        else:
            parts.append(piece)
    return "/" + "/".join(parts)


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(p in line for p in ERROR_PHRASES)]


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


def context_entities(inp: JudgeInput) -> set[str]:
    """Entities of the context (history and current action): paths, file names, quoted strings,
    element/doc ids and JSON string values of 3+ characters."""
    texts = [inp.action] + [t for pair in inp.history for t in pair]
    found: set[str] = set()
    for text in texts:
        found |= set(_FILENAME.findall(text)) | {p for p in _PATH.findall(text) if len(p) > 2}
        found |= {a or b for a, b in _QUOTED.findall(text)}
        found |= {f"[{d}]" for d in _DOC_ID.findall(text)}
        for start in [m.start() for m in re.finditer(r"\{", text)][:3]:
            try:
                value, _ = json.JSONDecoder().raw_decode(text[start:])
            except ValueError:
                continue
            found |= {leaf for _, leaf in json_leaves(value) if isinstance(leaf, str) and 3 <= len(leaf) <= 80}
            break
    return {e for e in found if len(e) >= 3}


def consistency_issues(inp: JudgeInput, observation: str) -> tuple[list[str], float | None, bool]:
    """Hard contradictions with the history; the recall of context entities the reference
    carries over (None when it carries none); and whether any rule has something to check,
    which depends on the context and the reference only, never on the prediction (a name
    created, removed or shown missing earlier, an entity carried over, a `pwd` with a known
    directory). With nothing to check, consistency is not applicable.

    Hard contradictions (each rule is skipped when the reference shows the same thing, so a gap
    in our state tracking never penalises a faithful prediction):
    - a name an earlier turn showed missing (`No such file or directory`), and not created since,
      appears in the prediction outside an error line;
    - a name created by an earlier (or the current) action, not removed since, is reported missing;
    - `pwd` prints something else than the directory the `cd` actions lead to.
    """
    issues = []
    state: dict[str, str] = {}
    declared = find_domain(inp.domain)
    cwd = declared.start_cwd if declared is not None else None
    steps = list(inp.history) + [(inp.action, None)]
    for action, obs in steps:
        created, removed, new_cwd = action_effects(action)
        for name in created:
            state[name] = "exists"
        for name in removed:
            state[name] = "missing"
        if new_cwd is not None:
            cwd = None if new_cwd in ("~", "-") else _resolve(cwd, new_cwd)
        if obs is not None:
            for a, b in _MISSING.findall(obs):  # the observation follows the action: it is the truth
                state[_basename(a or b)] = "missing"
    error_lines = set(_error_lines(observation))
    pred_body = "\n".join(line for line in observation.splitlines() if line not in error_lines)
    pred_missing = {_basename(a or b) for a, b in _MISSING.findall(observation)}
    ref_missing = {_basename(a or b) for a, b in _MISSING.findall(inp.reference)}
    for name, status in sorted(state.items()):
        if status == "missing" and _mentions(pred_body, name) and not _mentions(inp.reference, name):
            issues.append(f"{name!r} was missing earlier but is shown present")
        if status == "exists" and name in pred_missing and name not in ref_missing:
            issues.append(f"{name!r} was created earlier but is reported missing")
    pwd_known = action_verb(inp.action) == "pwd" and cwd is not None and normalise(inp.reference) == cwd
    if pwd_known:
        if normalise(observation) != cwd:
            issues.append(f"pwd should print {cwd}")
    carried = {e for e in context_entities(inp) if e in inp.reference}
    recall = sum(e in observation for e in carried) / len(carried) if carried else None
    return issues, recall, bool(state) or pwd_known or bool(carried)


# --------------------------------------------------------------------------------------------
# LocalJudge
# --------------------------------------------------------------------------------------------


class LocalJudge(Judge):
    """Deterministic rule-based judge: an explicit, reproducible APPROXIMATION of a rubric judge.

    Every dimension starts at 5 and loses points by these rules (then clamped to 1-5):

    format       `LAYOUT_PENALTIES`: -3 observation marker missing; -2 think block unclosed/unbalanced;
                 -1 stray text before the marker or the think block, or a marker/think tag inside the
                 observation (these -1s add up); -2 the observation
                 breaks its domain's shape (`shape_problems`: mcp JSON object with boolean isError,
                 search ranked list / page / error, swe pytest summary after run_tests, web `URL:`
                 page or `Error:` line, os end-of-episode prints nothing, JSON when the reference is,
                 not empty when the reference is not).
    factuality   banded F1 of `deterministic_facts` (error types, numbers, file names, paths, URLs,
                 element ids, doc ids, JSON path=value; runtime metadata such as timestamps, pids
                 and durations only by kind; prose is ignored, so pre-existing content need only
                 be plausible), averaged with the F1 over the facts that differ from the previous
                 observation (what the action changed): 5 >= .95, 4 >= .8, 3 >= .6, 2 >= .35, else 1; capped at 2 when the
                 error signatures differ (an error where none happened, or another error type);
                 not applicable when neither side has a deterministic fact.
    consistency  -2 per hard contradiction with the history (`consistency_issues`: a name shown
                 missing earlier reappears, a created name is reported missing, wrong `pwd`); -1 if
                 the prediction drops >10% of the context entities (from the history and the
                 action) the reference carries over, -2 if it drops >= 50%; not applicable when
                 no rule has anything to check (no name tracked from earlier turns, no entity
                 carried over, no `pwd` with a known directory).
    realism      1 for an empty prediction where the reference is not empty; otherwise
                 -1/-2/-3 when the length ratio (chars, min/max) is < .8/.5/.25; -1/-2 when the
                 character-class distribution's total-variation distance to the reference is
                 > .15/.3; -2 for degenerate repetition (repetition share > .5 and .3 above the
                 reference's).
    quality      banded mean of token F1 and edit similarity, averaged with the token F1 of the
                 line changes against the previous observation (`change_f1`, when either side
                 changes anything): 5 >= .9, 4 >= .7, 3 >= .5, 2 >= .25. Repeating the last
                 observation therefore earns at most half the quality credit.
    """

    name = "local"

    def score(self, batch: Sequence[JudgeInput]) -> list[JudgeScores]:
        return [self.score_one(inp) for inp in batch]

    def score_one(self, inp: JudgeInput) -> JudgeScores:
        obs, _ = parse_observation(inp.generation)
        reasons: list[str] = []

        fmt = 5
        layout = layout_problems(inp.generation)
        fmt -= sum(LAYOUT_PENALTIES[p] for p in layout)
        shape = shape_problems(inp.domain, inp.action, obs, inp.reference)
        if shape:
            fmt -= 2
        reasons += layout + shape

        previous = inp.history[-1][1] if inp.history else None
        f1, errors_agree = fact_match(obs, inp.reference, previous)
        fact: int | None = None if f1 is None else _band(f1, (0.95, 0.8, 0.6, 0.35))
        if not errors_agree:
            fact = min(fact or 5, 2)
            reasons.append("error signature differs from the reference")
        reasons.append("no deterministic facts on either side" if f1 is None else f"fact F1 {f1:.2f}")

        issues, recall, checkable = consistency_issues(inp, obs)
        cons: int | None = None
        if checkable:
            cons = 5 - 2 * len(issues) - (0 if recall is None else 2 if recall < 0.5 else 1 if recall < 0.9 else 0)
        reasons += issues
        if recall is not None and recall < 0.9:
            reasons.append(f"context recall {recall:.2f}")

        real = 5
        lp, lr = len(normalise(obs)), len(normalise(inp.reference))
        ratio = 1.0 if lp == lr == 0 else min(lp, lr) / max(lp, lr)
        if lp == 0 and lr > 0:
            real = 1  # saying nothing where the environment printed something is the least realistic answer
        real -= 3 if ratio < 0.25 else 2 if ratio < 0.5 else 1 if ratio < 0.8 else 0
        dp, dr = char_distribution(normalise(obs)), char_distribution(normalise(inp.reference))
        tvd = 0.5 * sum(abs(dp[c] - dr[c]) for c in _CHAR_CLASSES) if lp and lr else 0.0
        real -= 2 if tvd > 0.3 else 1 if tvd > 0.15 else 0
        rep_p, rep_r = repetition(obs), repetition(inp.reference)
        if rep_p > 0.5 and rep_p - rep_r > 0.3:
            real -= 2
            reasons.append(f"degenerate repetition {rep_p:.2f}")
        reasons.append(f"length ratio {ratio:.2f}, char TVD {tvd:.2f}")

        q = (token_f1(obs, inp.reference) + edit_similarity(obs, inp.reference)) / 2
        changed = None if previous is None else change_f1(obs, inp.reference, previous)
        if changed is not None:  # what the action changed weighs as much as the whole text
            q = (q + changed) / 2
            reasons.append(f"change F1 {changed:.2f}")
        qual = _band(q, (0.9, 0.7, 0.5, 0.25))

        return JudgeScores(format=_clamp(fmt), factuality=None if fact is None else _clamp(fact),
                           consistency=None if cons is None else _clamp(cons),
                           realism=_clamp(real), quality=_clamp(qual), reason="; ".join(reasons))


# --------------------------------------------------------------------------------------------
# OpenAIJudge
# --------------------------------------------------------------------------------------------

JUDGE_SYSTEM_PROMPT = """You are a strict evaluator of world models of agent environments.
A world model predicts what the environment ({domain_title}) answers to an agent's action. You
get the context (the agent's task, earlier actions and observations, the current action), the
REFERENCE observation (the ground truth the real environment produced) and the model's raw
PREDICTION (its whole generation: an optional <think>...</think> block, then the line
"**Environment Observation:**" and the predicted observation).

Score the prediction against the reference on five dimensions, each an integer from 1 (worst) to 5 (best):
- format: the generation follows the layout (think block closed, the marker present, nothing else
  around it) and the observation has the shape the environment uses. {format_note}
- factuality: deterministic content must match the reference exactly: numbers, file names and
  paths, error types and messages, JSON keys and values, URLs, element ids. Content that existed
  in the environment before the episode (file contents, page text, documentation prose) need only
  be plausible, not identical. Runtime metadata (timestamps, pids, durations, memory addresses)
  need only be well-formed.
- consistency: nothing contradicts the history: state created or changed by earlier actions
  persists (files, records, logins, edits, the working directory), things shown missing stay
  missing unless created since, entities from earlier turns keep their names and ids.
- realism: it reads like the real environment's output: similar length, layout and style, no
  degenerate repetition, no commentary addressed to the agent.
- quality: overall closeness to the reference.

Domain notes: {domain_notes}

The reference is the ground truth: never score a prediction higher because it seems more
helpful than the reference. When a dimension has nothing to measure here (no deterministic
content on either side for factuality, no earlier state the answer could contradict for
consistency), give "n/a" for it instead of a number. An empty prediction where the reference
says something is never realistic. Answer with ONLY a JSON object, no other text:
{{"format": <1-5>, "factuality": <1-5>, "consistency": <1-5>, "realism": <1-5>, "quality": <1-5>, "reason": "<one or two sentences>"}}"""

class JudgeParseError(ValueError):
    """The judge's answer has no usable JSON object or lacks a score field."""


def _json_candidates(text: str) -> Iterable[Any]:
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
    for fenced in re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.S):
        try:
            yield json.loads(fenced)
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text[match.start():])
        except ValueError:
            continue
        yield value


def _as_score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return _clamp(value)
    if isinstance(value, str):
        match = re.match(r"\s*(-?\d+(?:\.\d+)?)", value)
        if match:
            return _clamp(float(match.group(1)))
    if isinstance(value, Mapping) and "score" in value:
        return _as_score(value["score"])
    return None


def parse_judge_response(text: str) -> JudgeScores:
    """Scores from a judge's answer: the first JSON object holding score fields (fenced or inline,
    think blocks ignored, nested under "scores" accepted, keys case-insensitive), each clamped to
    1-5 (numbers, numeric strings like "4" or "4/5"). A dimension that is missing, "n/a" or not a
    number is not applicable (left out of the mean, as the official scorer drops a dimension that
    fails to parse). Raises JudgeParseError when no dimension parses."""
    objects = [v for v in _json_candidates(text) if isinstance(v, dict)]
    if not objects:
        raise JudgeParseError(f"judge answer holds no JSON object: {text[:200]!r}")

    def fields(obj: dict) -> dict[str, Any]:
        flat = {str(k).strip().lower(): v for k, v in obj.items()}
        for key in ("scores", "score"):
            if isinstance(flat.get(key), dict):
                flat = {**{str(k).strip().lower(): v for k, v in flat[key].items()}, **flat}
        return flat

    best = max(objects, key=lambda o: sum(d in fields(o) for d in DIMENSIONS))
    flat = fields(best)
    scores = {dim: _as_score(flat.get(dim)) for dim in DIMENSIONS}
    if all(v is None for v in scores.values()):
        raise JudgeParseError(f"judge answer has no score field that parses ({', '.join(DIMENSIONS)}): "
                              f"{json.dumps(best)[:200]}")
    reason = flat.get("reason", flat.get("reasoning", ""))
    return JudgeScores(**scores, reason=str(reason)[:1000])


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n...[truncated {len(text) - limit} chars]"


def judge_messages(inp: JudgeInput, history_turns: int = 6, max_chars: int = 4000) -> list[dict[str, str]]:
    """The chat messages asking a judge to score one input (system rubric + user context)."""
    declared = find_domain(inp.domain)
    system = JUDGE_SYSTEM_PROMPT.format(
        domain_title=(declared.judge_title if declared else "") or inp.domain,
        format_note=declared.judge_format if declared else "",
        domain_notes=(declared.judge_notes if declared else Domain.judge_notes),
    )
    history = inp.history[-history_turns:] if history_turns else ()
    skipped = len(inp.history) - len(history)
    parts = [f"Domain: {inp.domain}", f"Agent's task: {inp.instruction or '(not given)'}"]
    if skipped:
        parts.append(f"({skipped} earlier turns omitted)")
    for i, (action, obs) in enumerate(history, skipped + 1):
        parts.append(f"### Turn {i} action\n{_clip(action, max_chars // 4)}\n### Turn {i} observation\n"
                     f"{_clip(obs, max_chars // 2)}")
    parts.append(f"### Current action\n{_clip(inp.action, max_chars // 2)}")
    parts.append(f"### REFERENCE observation (ground truth)\n<reference>\n{_clip(inp.reference, max_chars)}\n</reference>")
    parts.append(f"### PREDICTION (raw generation)\n<prediction>\n{_clip(inp.generation, max_chars)}\n</prediction>")
    parts.append("Score the prediction. Answer with the JSON object only.")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


class OpenAIJudge(Judge):
    """An LLM judge behind any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, OpenAI, ...).

    `timeout` and `max_retries` go to the `openai` client (which retries connection errors, 408,
    429 and 5xx with backoff); an answer that cannot be parsed is asked again up to
    `parse_retries` times, then raises JudgeParseError. `max_workers` requests run concurrently.
    """

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: float = 60.0, max_retries: int = 3, parse_retries: int = 1, temperature: float = 0.0,
                 max_tokens: int = 512, max_workers: int = 4, history_turns: int = 6, max_chars: int = 4000,
                 json_mode: bool = False, client: Any = None) -> None:
        if client is None:
            try:
                import openai
            except ImportError as exc:  # pragma: no cover - openai is in the venv
                raise ImportError("OpenAIJudge needs the `openai` package (pip install openai)") from exc
            client = openai.OpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout,
                                   max_retries=max_retries)
        self.client, self.model = client, model
        self.parse_retries, self.temperature, self.max_tokens = parse_retries, temperature, max_tokens
        self.max_workers, self.history_turns, self.max_chars, self.json_mode = max_workers, history_turns, max_chars, json_mode

    def score(self, batch: Sequence[JudgeInput]) -> list[JudgeScores]:
        if self.max_workers <= 1 or len(batch) <= 1:
            return [self.score_one(inp) for inp in batch]
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            return list(pool.map(self.score_one, batch))

    def score_one(self, inp: JudgeInput) -> JudgeScores:
        messages = judge_messages(inp, self.history_turns, self.max_chars)
        extra = {"response_format": {"type": "json_object"}} if self.json_mode else {}
        last_error: JudgeParseError | None = None
        for attempt in range(self.parse_retries + 1):
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens, **extra)
            content = response.choices[0].message.content or ""
            try:
                return parse_judge_response(content)
            except JudgeParseError as exc:
                last_error = exc
                if attempt < self.parse_retries:
                    time.sleep(0.1 * (attempt + 1))
        assert last_error is not None
        raise last_error


# --------------------------------------------------------------------------------------------
# Agreement between judges
# --------------------------------------------------------------------------------------------


def rank_agreement(a: Sequence[JudgeScores | float], b: Sequence[JudgeScores | float],
                   dimension: str | None = None) -> float:
    """Spearman rank correlation between two judges' scores of the same inputs (overall 0-100 by
    default, or one dimension, over the inputs where both judges found it applicable). NaN when
    either side is constant (no ranking to compare)."""
    from scipy.stats import spearmanr

    if len(a) != len(b):
        raise ValueError(f"rank_agreement needs scores of the same inputs, got {len(a)} and {len(b)}")
    if len(a) < 2:
        raise ValueError("rank_agreement needs at least two scored inputs")

    def values(scores: Sequence[JudgeScores | float]) -> list[float]:
        if dimension is not None:
            if dimension not in DIMENSIONS:
                raise ValueError(f"unknown dimension {dimension!r}; one of {DIMENSIONS}")
            raw = [getattr(s, dimension) if isinstance(s, JudgeScores) else s for s in scores]
            return [float("nan") if v is None else float(v) for v in raw]
        return [s.overall if isinstance(s, JudgeScores) else float(s) for s in scores]

    pairs = [(u, v) for u, v in zip(values(a), values(b)) if not (math.isnan(u) or math.isnan(v))]
    x, y = [u for u, _ in pairs], [v for _, v in pairs]
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return float("nan")
    return float(spearmanr(x, y).statistic)


__all__ = [
    "DIMENSIONS", "Judge", "JudgeInput", "JudgeParseError", "JudgeScores", "LocalJudge", "OpenAIJudge",
    "deterministic_facts", "fact_match", "judge_messages", "layout_problems", "parse_judge_response",
    "rank_agreement", "shape_problems",
]
