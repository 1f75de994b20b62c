"""Step 2 of evaluation, judge: five 1-5 scores per prediction, from one or two judges.

Judged rows go to one JSONL file per (system, judge), written batch by batch like the
predictions, so an LLM judge interrupted mid-file resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agentworld.data.awbench import BenchRecord
from agentworld.evaluation.infer import append_durably, read_done, rewrite_clean
from agentworld.scoring.judge import Judge, JudgeInput, LocalJudge, OpenAIJudge


def make_judges(kind: str, base_url: str | None = None, model: str | None = None) -> dict[str, Judge]:
    """`local`, `openai` or `both`, by the names reports use (local, llm)."""
    judges: dict[str, Judge] = {}
    if kind in ("local", "both"):
        judges["local"] = LocalJudge()
    if kind in ("openai", "both"):
        if not (base_url and model):
            raise ValueError(f"judge {kind!r} needs --judge-base-url and --judge-model (evaluate.judge_base_url, judge_model)")
        judges["llm"] = OpenAIJudge(model=model, base_url=base_url)
    if not judges:
        raise ValueError(f"judge {kind!r}: one of local, openai, both")
    return judges


def judge_input(record: BenchRecord, generation: str) -> JudgeInput:
    return JudgeInput(domain=record.domain, generation=generation, reference=record.reference,
                      action=record.current_prompt, history=tuple(record.history), instruction=record.instruction)


def judge_predictions(judge: Judge, records: Sequence[BenchRecord], predictions: Sequence[dict[str, Any]],
                      out_file: Path, batch_size: int = 16, progress: bool = True, desc: str = "judge") -> list[dict[str, Any]]:
    """Scores (1-5 per dimension, and the 0-100 overall) of each prediction, resuming from `out_file`."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    done = read_done(out_file)
    rewrite_clean(out_file, done)
    pairs = [(r, p) for r, p in zip(records, predictions) if r.key not in done]
    with out_file.open("a", encoding="utf-8") as fh, tqdm(
        total=len(records), initial=len(records) - len(pairs), desc=desc, unit="rec", disable=not progress
    ) as bar:
        for start in range(0, len(pairs), batch_size):
            batch = pairs[start: start + batch_size]
            scores = judge.score([judge_input(r, p["generation"]) for r, p in batch])
            append_durably(fh, [{"id": record.key, **s.as_dict(), "overall": s.overall, "reason": s.reason}
                                for (record, _), s in zip(batch, scores)], done)
            bar.update(len(batch))
    return [done[r.key] for r in records]
