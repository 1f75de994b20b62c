"""ScienceWorld domain: the real ScienceWorld simulator (Scala/JVM, driven over py4j).

One Java server per env instance, started lazily on the first `reset` and reused across
episodes (measured on 2 busy cores: start-up ~1.2-2 s; reset ~0.4-0.6 s as it loads the task
and its gold path; a step ~2-5 ms, ~30 ms with the valid-action count in `info`, which
`valid_actions=False` drops). `reset(seed)` deterministically picks one of a curated list of
short task types (gold paths of 2-17 steps over sampled train variations) and one of that task's *train* variations,
loads it and returns the task description followed by the initial `look around`.

Rewards: ScienceWorld scores run 0..100 (-100 when the agent fails, e.g. focuses on the
wrong object). The reward of a step is the score delta divided by 100, so a solved episode's
rewards sum to 1.0 and a failure can yield a negative reward. `terminated` is True when the
task is completed or failed (score < 0). The step limit is Gymnasium's `TimeLimit` (the domain's
registered `max_episode_steps`), not the env's.
Invalid actions get the simulator's own refusal ("No known action matches that input.") and
reward 0; ambiguous ones get its numbered disambiguation prompt, answered by a number next step.

Determinism: the seed fixes the task type, the variation, the instruction and the world. Stock
ScienceWorld iterates JVM identity-hash sets, so the order in which it lists a room's objects
and which of several equivalent objects its gold path picks (e.g. which animal in find-animal)
vary from load to load. With `deterministic=True` (default) the JVM runs with a constant
identity hash code (`-XX:hashCode=2`, DETERMINISTIC_JAVAOPTS), which makes those orders
insertion orders: the same seed gives the same observations and gold path on every load and in
every process, at ~30% more CPU per load. `deterministic=False` runs the stock JVM.

`close()` shuts the Java server down and waits for the process to exit (kills it after a
timeout), so no `java` process outlives the env.
"""

from __future__ import annotations

import functools
import random
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any

from agentworld.envs.base import Task, TextEnv
from agentworld.envs.behaviour import Policy, behaviour_policy

DOMAIN = "scienceworld"
INSTALL_HINT = "install Java (apt-get install default-jre-headless) and the Python package (pip install scienceworld)"

# Task types whose gold paths are short over all train variations (measured with
# scienceworld 1.2.3: min-max gold length over a sample of train variations).
TASK_TYPES: tuple[str, ...] = (
    "find-animal",                                   # 10-16
    "find-living-thing",                             # 10-16
    "find-non-living-thing",                         # 5-9
    "find-plant",                                    # 10-14
    "lifespan-longest-lived",                        # 2-8
    "lifespan-shortest-lived",                       # 2-8
    "lifespan-longest-lived-then-shortest-lived",    # 3-9
    "power-component",                               # 9-15
    "identify-life-stages-2",                        # 10-17
)
REFUSAL = "No known action matches that input."
AMBIGUOUS_PREFIX = "Ambiguous request"
_TASK_ID_RE = re.compile(r"^(?P<name>[a-z0-9-]+)-v(?P<variation>\d+)$")


def _java_path() -> str | None:
    return shutil.which("java")


def probe() -> tuple[bool, str]:
    """Whether ScienceWorld can run here: needs a `java` on PATH and the `scienceworld` package."""
    try:
        import scienceworld  # noqa: F401
    except ImportError as exc:
        return False, f"python package 'scienceworld' is missing ({exc}); {INSTALL_HINT}"
    java = _java_path()
    if java is None:
        return False, f"no 'java' executable on PATH; {INSTALL_HINT}"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"'java -version' failed ({exc}); {INSTALL_HINT}"
    if out.returncode != 0:
        return False, f"'java -version' exited {out.returncode}; {INSTALL_HINT}"
    version = (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "java"
    return True, f"ok ({version.strip()})"


# With a constant identity hash code, the JVM's hash sets iterate in insertion order, so the
# simulator lists objects and picks gold-path objects the same way on every load and run.
DETERMINISTIC_JAVAOPTS = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
_LAUNCH_LOCK = threading.Lock()


def _launch_deterministic(launch: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    kwargs["javaopts"] = [*kwargs.get("javaopts", []), *DETERMINISTIC_JAVAOPTS]
    return launch(*args, **kwargs)


def task_id_for(task_name: str, variation: int) -> str:
    return f"{task_name}-v{variation}"


def parse_task_id(task_id: str) -> tuple[str, int]:
    match = _TASK_ID_RE.match(task_id)
    if match is None:
        raise ValueError(f"not a scienceworld task id: {task_id!r} (expected '<task-name>-v<variation>')")
    return match["name"], int(match["variation"])


class ScienceWorldTextEnv(TextEnv):
    """Gymnasium-style text env over a real ScienceWorld server (see module docstring)."""

    domain = DOMAIN
    env_version = "1"

    def __init__(self, sandbox_params: Any = None, *, task_types: Sequence[str] | None = None,
                 valid_actions: bool = True, deterministic: bool = True,
                 close_timeout_s: float = 10.0) -> None:
        super().__init__()
        self.sandbox_params = sandbox_params  # accepted for the registry's factory signature; unused
        self.task_types = tuple(task_types or TASK_TYPES)
        if not self.task_types:
            raise ValueError("task_types must not be empty")
        self.valid_actions = valid_actions
        self.deterministic = deterministic
        self.close_timeout_s = close_timeout_s
        self._sw: Any = None  # scienceworld.ScienceWorldEnv, started lazily
        self._train_variations: dict[str, list[int]] = {}
        self._done = True
        self._steps = 0
        self._score = 0

    # ----------------------------------------------------------------- server
    @property
    def server_running(self) -> bool:
        proc = self.java_process
        return proc is not None and proc.poll() is None

    @property
    def java_process(self) -> subprocess.Popen | None:
        if self._sw is None:
            return None
        return getattr(self._sw._gateway, "java_process", None)

    def _server(self) -> Any:
        if self._sw is None:
            ok, reason = probe()
            if not ok:
                raise RuntimeError(f"ScienceWorld is unavailable: {reason}")
            import scienceworld.scienceworld as sw_module
            # No step limit inside ScienceWorld: Gymnasium's TimeLimit is the one.
            with _LAUNCH_LOCK:
                original = sw_module.launch_gateway
                if self.deterministic:
                    sw_module.launch_gateway = functools.partial(_launch_deterministic, original)
                try:
                    self._sw = sw_module.ScienceWorldEnv("", envStepLimit=10**9)
                finally:
                    sw_module.launch_gateway = original
        return self._sw

    def train_variations(self, task_name: str) -> list[int]:
        if task_name not in self._train_variations:
            sw = self._server()
            sw.load(task_name, 0, "", generateGoldPath=False)
            self._train_variations[task_name] = sorted(int(v) for v in sw.get_variations_train())
        return self._train_variations[task_name]

    # ----------------------------------------------------------------- protocol
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        task_name, variation = self._choose(seed, options)
        sw = self._server()
        sw.load(task_name, variation, "", generateGoldPath=True)
        gold = [str(a) for a in sw.get_gold_action_sequence()]
        sw.server.reset()
        sw.lastStepScore = 0
        description = str(sw.server.getTaskDescription())
        look = str(sw.server.freeActionLook())  # "free": consumes no move
        self.task = Task(task_id=task_id_for(task_name, variation), domain=DOMAIN, instruction=description,
                         setup={"task_name": task_name, "variation": variation, "simplifications": ""},
                         solution=gold)
        self._done, self._steps, self._score = False, 0, 0
        observation = f"{description}\n\n{look}"
        info = {"task_id": self.task.task_id, "task_name": task_name, "variation": variation, "seed": seed,
                "score": 0, "moves": 0, "gold_length": len(gold)}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self._sw is None or self.task is None:
            raise RuntimeError("episode is over (or never started); call reset() first")
        sw = self._sw
        self._steps += 1
        observation = str(sw.server.step(action))
        score = int(round(100 * float(sw.server.getScore())))
        completed = bool(sw.server.getCompleted())
        failed = score < 0
        reward = (score - self._score) / 100.0
        self._score = score
        terminated = completed or failed
        self._done = terminated
        info: dict[str, Any] = {"task_id": self.task.task_id, "step": self._steps, "score": score,
                                "moves": int(sw.get_num_moves()), "completed": completed and not failed,
                                "failed": failed, "valid": observation.strip() != REFUSAL,
                                "ambiguous": observation.startswith(AMBIGUOUS_PREFIX)}
        if self.valid_actions:
            info["valid_action_count"] = len(sw.server.getValidActionObjectCombinations())
        return observation, reward, terminated, False, info

    def close(self) -> None:
        """Shut the Java server down and wait for it to exit (kill it if it does not)."""
        self._done = True
        sw, self._sw = self._sw, None
        if sw is None:
            return
        proc = getattr(sw._gateway, "java_process", None)
        try:
            sw.close()
        except Exception:  # noqa: BLE001 - the gateway may already be gone; the process is handled below
            pass
        if proc is not None:
            try:
                proc.wait(timeout=self.close_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=self.close_timeout_s)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        # The wrapper's __del__ calls close() again; make that a no-op on a dead gateway.
        sw.close = lambda: None  # type: ignore[method-assign]
        tempdir = getattr(sw, "_obj_tree_tempdir", None)
        if tempdir is not None:
            tempdir.cleanup()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # ----------------------------------------------------------------- helpers
    def _choose(self, seed: int | None, options: dict[str, Any]) -> tuple[str, int]:
        task = options.get("task")
        if task is not None:
            if not isinstance(task, Task) or task.domain != DOMAIN:
                raise ValueError(f"options['task'] must be a scienceworld Task, got {task!r}")
            if "task_name" in task.setup and "variation" in task.setup:
                return str(task.setup["task_name"]), int(task.setup["variation"])
            return parse_task_id(task.task_id)
        if "task_name" in options:
            name = str(options["task_name"])
            variation = options.get("variation")
            if variation is None:
                rng = random.Random(f"scienceworld:{seed}")
                variation = rng.choice(self.train_variations(name))
            return name, int(variation)
        task_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        rng = random.Random(f"scienceworld:{task_seed}")
        name = self.task_types[rng.randrange(len(self.task_types))]
        return name, rng.choice(self.train_variations(name))


# --------------------------------------------------------------------- behaviour policies
_ONE_ARG_VERBS = ("focus on", "pick up", "put down", "look at", "look in", "activate", "deactivate", "disconnect",
                  "open", "close", "eat", "read", "mix", "flush", "go to")
_TWO_ARG = re.compile(r"^(move|connect|pour|dunk|use) (.+?) (to|in|on) (.+)$")
_ARTICLE = re.compile(r"^(a substance called |an |a |the )", re.I)
_DOOR = re.compile(r"door to (?:the )?([a-z][a-z ]*?)(?: \(|$)", re.I)
_GENERIC = ("look around", "inventory", "task", "wait1", "look around", "inventory")
_BAD_VERBS = ("grab", "take", "walk to", "use", "get", "climb", "search", "check", "talk to", "drop", "throw",
              "run to", "enter", "inspect", "turn on", "leave", "exit", "help", "north", "go north")
_GHOSTS = ("unicorn", "laptop", "dragon", "spaceship", "bicycle", "elephant", "microscope", "banana peel",
           "magic wand", "basement", "attic", "garage", "toaster", "robot")
_TYPO_VERBS = (("look around", "lok around"), ("look around", "look arond"), ("inventory", "inventroy"),
               ("open", "opne"), ("go to", "got to"), ("pick up", "pcik up"), ("look at", "loo at"),
               ("focus on", "focsu on"), ("move", "mvoe"), ("connect", "conect"), ("wait1", "wiat1"))


def _noun(phrase: str) -> str:
    phrase = phrase.strip().rstrip(".")
    phrase = _ARTICLE.sub("", phrase)
    phrase = phrase.split(" (", 1)[0].split(". ", 1)[0].split(",", 1)[0].split(" which ", 1)[0]
    return phrase.strip()


class _SWVocabulary:
    """Objects and locations an agent could plausibly type in this episode (ScienceWorld's DomainActions)."""

    done_action = "look around"

    def __init__(self, task: Task) -> None:
        objects: list[str] = []
        locations: list[str] = []
        for action in task.solution:
            action = action.strip()
            if action.startswith("go to "):
                locations.append(action[len("go to "):])
                continue
            door = _DOOR.search(action)
            if door:
                locations.append(door.group(1).strip())
            two = _TWO_ARG.match(action)
            if two:
                objects += [two.group(2), two.group(4)]
                continue
            for verb in _ONE_ARG_VERBS:
                if action.startswith(verb + " "):
                    objects.append(action[len(verb) + 1:])
                    break
        words = re.findall(r"\b[a-z]{3,}\b", task.instruction.lower())
        self.objects = list(dict.fromkeys(o for o in objects if o and not o.startswith("door to"))) or ["agent"]
        self.locations = list(dict.fromkeys(locations)) or ["kitchen", "hallway"]
        self.words = sorted(set(words) - {"your", "task", "the", "first", "then", "and", "focus", "that", "this"}) or ["thing"]
        self.seen: list[str] = []

    def observe(self, observation: str) -> None:
        for line in observation[:4000].splitlines():
            if not line.startswith("\t"):
                continue
            text = line.strip()
            door = _DOOR.search(text)
            if door and text.lower().startswith("a door"):
                location = door.group(1).strip()
                if location not in self.locations:
                    self.locations.append(location)
                continue
            noun = _noun(text)
            if noun and noun not in self.objects and noun not in self.seen and len(noun) < 60:
                self.seen.append(noun)
        del self.seen[:-40]

    def obj(self, rng: random.Random) -> str:
        return rng.choice(self.objects + self.seen)

    def location(self, rng: random.Random) -> str:
        return rng.choice(self.locations)

    def inspect(self, rng: random.Random) -> str:
        # `inventory` consumes no move; `look around` is already in gold paths, so neither
        # perturbs time-dependent tasks such as plant life stages.
        return rng.choice(("look around", "inventory"))

    def explore(self, rng: random.Random) -> str:
        return _exploratory_action(self, rng)

    def mistake(self, rng: random.Random) -> str:
        return _erroneous_action(self, rng)

    def reply(self, observation: str, rng: random.Random, policy: str) -> str | None:
        """The simulator's numbered "which did you mean" prompt: explorers pick an option,
        erroneous agents mostly answer it wrongly."""
        if policy == "erroneous":
            if observation.startswith(AMBIGUOUS_PREFIX) and rng.random() < 0.7:
                return rng.choice(("0", "1", "9", "yes", "the first one"))
            return None
        return _ambiguity_answer(observation, rng)


def _ambiguity_answer(observation: str, rng: random.Random) -> str | None:
    """An agent answers the simulator's numbered disambiguation prompt with one of the numbers."""
    if not observation.startswith(AMBIGUOUS_PREFIX):
        return None
    options = re.findall(r"^(\d+):", observation, flags=re.M)
    return rng.choice(options) if options else "0"


def _exploratory_action(vocab: _SWVocabulary, rng: random.Random) -> str:
    o, p, loc = vocab.obj(rng), vocab.obj(rng), vocab.location(rng)
    templates = (f"look at {o}", f"look at {o}", f"look in {o}", f"pick up {o}", f"open {o}", f"close {o}",
                 f"open door to {loc}", f"go to {loc}", f"open door to {loc}", f"go to {loc}", f"read {o}",
                 f"move {o} to {p}", f"activate {o}", f"deactivate {o}", f"put down {o}", f"mix {o}")
    return rng.choice(templates + _GENERIC)


def _erroneous_action(vocab: _SWVocabulary, rng: random.Random) -> str:
    o, loc, w = vocab.obj(rng), vocab.location(rng), rng.choice(vocab.words)
    kind = rng.randrange(5)
    if kind == 0:  # a verb ScienceWorld does not know
        return f"{rng.choice(_BAD_VERBS)} {rng.choice((o, loc, w))}"
    if kind == 1:  # an object that is not there
        ghost = rng.choice(_GHOSTS)
        return rng.choice((f"pick up {ghost}", f"look at {ghost}", f"go to {ghost}", f"open door to {ghost}",
                           f"move {ghost} to {o}", f"focus on {ghost}", f"open {ghost}"))
    if kind == 2:  # a typo in the verb or the object
        right, wrong = rng.choice(_TYPO_VERBS)
        if right in ("look around", "inventory", "wait1"):
            return wrong
        target = o if right not in ("go to",) else loc
        if len(target) > 3 and rng.random() < 0.5:
            i = rng.randrange(len(target) - 1)
            target = target[:i] + target[i + 1] + target[i] + target[i + 2:]
            return f"{right} {target}"
        return f"{wrong} {target}"
    if kind == 3:  # incomplete or malformed commands (never blank: a transition's action is not empty)
        return rng.choice(("pick up", "look at", "go to", "open", "move to", f"move {o}", f"connect {o}",
                           f"{o}", "hmm", "please help", "what do I do?", f"go to the {loc} now", "42"))
    return rng.choice((f"go {rng.choice(('north', 'south', 'east', 'west', 'up'))}", f"{w}", f"focus {o}",
                       f"look {o}", f"walk {loc}", f"open the {loc}", "look around everywhere", "inventory all"))


def scienceworld_policy(name: str, task: Task) -> Policy:
    """A fresh behaviour policy for one episode of `task`."""
    return behaviour_policy(name, task, _SWVocabulary)


def factory(sandbox_params: Any = None) -> TextEnv:
    return ScienceWorldTextEnv(sandbox_params)
