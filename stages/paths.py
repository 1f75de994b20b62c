"""Where each stage reads and writes, relative to a workspace root.

DVC runs use the project root (the paths match dvc.yaml); Airflow runs use a folder per DAG
run, so a retried task overwrites only its own outputs (idempotent) and runs never collide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class StagePaths:
    root: Path

    @property
    def trajectories(self) -> Path:
        return self.root / "data" / "trajectories"

    def domain_trajectories(self, domain: str) -> Path:
        return self.trajectories / f"{domain}.jsonl"

    @property
    def collect_parts(self) -> Path:
        """Finished collection shards of an interrupted run (not a DVC output: DVC deletes outs before a run)."""
        return self.root / "data" / ".collect-parts"

    def clean(self, domain: str) -> Path:
        return self.root / "data" / "clean" / f"{domain}.jsonl"

    def quarantine(self, domain: str) -> Path:
        return self.root / "data" / "quarantine" / f"{domain}.jsonl"

    def validation_docs(self, domain: str) -> Path:
        return self.root / "reports" / "validation" / domain

    @property
    def sft_dir(self) -> Path:
        return self.root / "data"

    @property
    def sft_train(self) -> Path:
        return self.root / "data" / "sft" / "train.jsonl"

    @property
    def sft_test(self) -> Path:
        return self.root / "data" / "sft" / "test.jsonl"

    @property
    def agentworldbench(self) -> Path:
        return self.root / "data" / "agentworldbench"

    @property
    def corpora(self) -> Path:
        return self.root / "data" / "corpora"

    @property
    def tokenizer(self) -> Path:
        """The world model's tokenizer (the tokenizer stage's output), shared by every stage."""
        return self.root / "models" / "tokenizer"

    def stage_model(self, stage: str) -> Path:
        """The model a training stage (cpt, sft, rl) hands to the next one."""
        return self.root / "models" / stage

    def checkpoints(self, stage: str) -> Path:
        """Periodic checkpoints of a training stage (kept across runs: resume after a kill)."""
        return self.root / "models" / "checkpoints" / stage

    def train_report(self, stage: str) -> Path:
        return self.root / "reports" / "train" / f"{stage}.json"

    def synthetic(self, domain: str, kind: str = "raw") -> Path:
        """Synthetic trajectories of a domain: raw, clean (validated) or quarantine."""
        base = self.root / "data" / "synthetic"
        return base / f"{domain}.jsonl" if kind == "raw" else base / kind / f"{domain}.jsonl"

    @property
    def eval_dir(self) -> Path:
        """Predictions, judged rows, rollouts, summary and plots of the evaluate stage."""
        return self.root / "reports" / "eval"

    def report(self, name: str) -> Path:
        return self.root / "reports" / name

    def write_plot(self, name: str, header: list[str], rows: list[tuple[Any, ...]]) -> Path:
        """A CSV under reports/plots/ that `dvc plots show` renders."""
        path = self.root / "reports" / "plots" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
        path.write_text("\n".join(lines) + "\n")
        return path

    def write_report(self, name: str, data: Any) -> Path:
        """A JSON report (DVC metrics file) under reports/."""
        path = self.report(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, default=str))
        return path
