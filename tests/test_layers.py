"""The layers of ARCHITECTURE.md, checked on the source: the library (agentworld/) never imports
the stage layer (stages/) or the Airflow layer (dags/), except the command line, which sits on
top of both; and training, simulation, agents, data, models and scoring do not depend on
evaluation (it depends on them)."""

from __future__ import annotations

import ast
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "agentworld"
#: The application layer inside the package: the console script dispatches stages.
APP_MODULES = {"cli.py"}
BELOW_EVALUATION = ("training", "simulation", "agents", "data", "models", "scoring", "envs", "domains",
                    "validation", "tracking")


def imports(path: Path, root: Path = LIBRARY.parent) -> set[str]:
    """Every module `path` imports anywhere in it (also inside functions), as absolute names;
    a relative import is resolved against `path`'s package under `root`."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            names.add(".".join([*base, *([node.module] if node.module else [])]))
    return names


def library_modules() -> list[Path]:
    return sorted(p for p in LIBRARY.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_library_never_imports_the_stage_or_airflow_layer():
    offenders = {}
    for path in library_modules():
        if str(path.relative_to(LIBRARY)) in APP_MODULES:
            continue
        bad = sorted(n for n in imports(path) if n.split(".")[0] in ("stages", "dags", "agentworld_dags"))
        if bad:
            offenders[str(path.relative_to(LIBRARY.parent))] = bad
    assert not offenders, f"library modules importing the stage/Airflow layer: {offenders}"


def test_lower_layers_do_not_import_evaluation():
    offenders = {}
    for path in library_modules():
        if path.relative_to(LIBRARY).parts[0] not in BELOW_EVALUATION:
            continue
        bad = sorted(n for n in imports(path) if n.startswith("agentworld.evaluation"))
        if bad:
            offenders[str(path.relative_to(LIBRARY.parent))] = bad
    assert not offenders, f"modules below evaluation importing it: {offenders}"


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The checks must be able to fail: an import inside a function counts, and a relative
    import is resolved to the module it names."""
    module = tmp_path / "agentworld" / "training" / "probe.py"
    module.parent.mkdir(parents=True)
    module.write_text("import json\n\ndef f():\n    import stages.cpt\n    from ..evaluation import run\n"
                      "    from . import cpt\n")
    assert imports(module, tmp_path) == {"json", "stages.cpt", "agentworld.evaluation", "agentworld.training"}
