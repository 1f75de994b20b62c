"""World-model configurations at equal wall clock: which model to train on these cores?

    .venv/bin/python bench/world_model_configs.py [--budget-s 240] [--examples 120] [--configs a b ...]

Each configuration trains SFT from its starting point on the built training split
(`data/sft/train.jsonl`, run `agentworld stage build` first) until `--budget-s` seconds of
training wall clock have passed (or `--max-steps`), then predicts a fixed seeded sample of
held-out turns (`data/sft/test.jsonl`) greedily. Printed side by side, with the floors on the
same sample (retrieval, episode_retrieval, the ranked memory's first candidate alone, copy_previous):
held-out token F1 and exact match (each with a 95% bootstrap interval over
records), steps reached and training/inference seconds. Configurations:

- `moe-1m`: the demo's tiny Qwen3-MoE (4 experts, hidden 128, 2 layers) with retrieval memory;
- `moe-1m-nomem`: the same without retrieval memory (what the memory is worth);
- `dense-4m`: one expert (a dense MLP), hidden 256, 4 layers, with memory;
- `smollm2-lora`: SmolLM2-135M-Instruct from its GGUF file, LoRA r=8, with memory.

The machine is shared and noisy: compare ratios within one run. Results also go to
reports/bench/world_model_configs.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import TrainerCallback  # noqa: E402

from agentworld.config import DistributedParams, ModelParams, SftParams  # noqa: E402
from agentworld.data.build import load_examples  # noqa: E402
from agentworld.evaluation.baselines import RetrievalBaseline, copy_previous, episode_first  # noqa: E402
from agentworld.experiments.stats import bootstrap_ci  # noqa: E402
from agentworld.models.factory import build_model, count_parameters, merged, with_lora  # noqa: E402
from agentworld.models.predict import predict_observations  # noqa: E402
from agentworld.scoring.metrics import exact_match, token_f1  # noqa: E402
from agentworld.training.sft import train_sft  # noqa: E402

CONFIGS: dict[str, dict] = {
    "moe-1m": {"model": {}, "memory": True, "lr": 3e-3},
    "moe-1m-nomem": {"model": {}, "memory": False, "lr": 3e-3},
    "dense-4m": {"model": {"hidden_size": 256, "num_layers": 4, "num_experts": 1, "num_experts_per_tok": 1,
                           "moe_intermediate_size": 512}, "memory": True, "lr": 2e-3},
    "smollm2-lora": {"model": {"source": "gguf", "lora_r": 8, "lora_alpha": 16}, "memory": True, "lr": 1e-3},
}


WARMUP_STEPS = 20


class WallClockBudget(TrainerCallback):
    """Stops training once `seconds` of training wall clock have passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.start >= self.seconds:
            control.should_training_stop = True


def scores(predictions: list[str], references: list[str]) -> dict[str, list[float]]:
    return {"token_f1": [token_f1(p, r) for p, r in zip(predictions, references)],
            "exact_match": [exact_match(p, r) for p, r in zip(predictions, references)]}


def summarise(values: dict[str, list[float]]) -> dict[str, tuple[float, float, float]]:
    return {m: (sum(v) / len(v), *bootstrap_ci(v)) for m, v in values.items()}


def run_config(name: str, train, test, args) -> dict:
    spec = CONFIGS[name]
    params = ModelParams(max_seq_len=args.max_seq_len, **spec["model"])
    if not spec["memory"]:
        train, test = [replace(e, memory=None) for e in train], [replace(e, memory=None) for e in test]
    texts = [e.system for e in train[:200]] + [f"{e.action}\n{e.observation}" for e in train]
    model, tokenizer = build_model(params, texts, seed=0)
    model = with_lora(model, params)
    # Warm-up is a step count: a ratio of --max-steps (100,000 when the wall clock decides) would
    # keep the learning rate near zero for the whole budget.
    sft = SftParams(max_steps=args.max_steps, batch_size=args.batch_size, learning_rate=spec["lr"],
                    warmup_ratio=min(0.5, WARMUP_STEPS / args.max_steps), save_steps=10**6, logging_steps=10,
                    threads=2, reasoning=False)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        result = train_sft(model, tokenizer, train, sft, params, DistributedParams(), Path(out),
                           callbacks=[WallClockBudget(args.budget_s)])
    train_s = time.monotonic() - started
    model = merged(model)
    started = time.monotonic()
    predictions, _ = predict_observations(model, tokenizer, test, args.max_new_tokens, batch_size=16,
                                          max_seq_len=params.max_seq_len, progress=False)
    return {"parameters": count_parameters(model), "steps": result.global_step, "train_s": round(train_s, 1),
            "infer_s": round(time.monotonic() - started, 1),
            **summarise(scores(predictions, [e.observation for e in test]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/sft"))
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--examples", type=int, default=120)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    args = parser.parse_args()

    train, test = load_examples(args.data / "train.jsonl"), load_examples(args.data / "test.jsonl")
    test = sorted(random.Random(0).sample(test, min(args.examples, len(test))), key=lambda e: e.id)
    references = [e.observation for e in test]
    lookup = RetrievalBaseline(train).predict(test)
    rows = {"retrieval": summarise(scores(lookup, references)),
            "episode_retrieval": summarise(scores(episode_first(test, lookup), references)),
            "copy_previous": summarise(scores(copy_previous(test), references))}
    if all(e.retrieved is not None for e in test):  # built with retrieval memory (ranked when build.rerank)
        rows["ranked_memory"] = summarise(scores([(e.retrieved or [""])[0] for e in test], references))
    for name in args.configs:
        print(f"training {name} for {args.budget_s:.0f} s ...", flush=True)
        rows[name] = run_config(name, train, test, args)

    print(f"\n{len(test)} held-out turns, {args.budget_s:.0f} s of training each (95% bootstrap intervals)\n")
    print(f"| system | parameters | steps | train s | infer s | token F1 | exact match |")
    print("|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        f1, em = row["token_f1"], row["exact_match"]
        print(f"| {name} | {row.get('parameters', '-'):,} | {row.get('steps', '-')} | {row.get('train_s', '-')} | "
              f"{row.get('infer_s', '-')} | {f1[0]:.3f} [{f1[1]:.3f}, {f1[2]:.3f}] | "
              f"{em[0]:.3f} [{em[1]:.3f}, {em[2]:.3f}] |" if "parameters" in row else
              f"| {name} | - | - | - | - | {f1[0]:.3f} [{f1[1]:.3f}, {f1[2]:.3f}] | {em[0]:.3f} [{em[1]:.3f}, {em[2]:.3f}] |")
    out = Path("reports/bench/world_model_configs.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"budget_s": args.budget_s, "examples": len(test), "rows": rows}, indent=2))
    print(f"\nwritten {out}")


if __name__ == "__main__":
    main()
