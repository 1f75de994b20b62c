"""CPT training throughput on this CPU: packed vs unpacked batches, and an MFU estimate.

    .venv/bin/python bench/train_throughput.py [--steps 12] [--warmup 3] [--params params.yaml] [--threads N]

What is measured, in one run, on the same model and the same documents:

* Throughput with and without packing. CPT trains through TRL's SFTTrainer exactly as
  `agentworld/training/cpt.py` does (`cpt_config` -> `SFTTrainer`, a fresh copy of the same
  initial model per variant). Packed (`wrapped`): documents are concatenated and cut into full
  `max_seq_len` blocks, so every token of a batch is a real token. Unpacked: each document is
  truncated to `max_seq_len` and the batch is padded to its longest row; the attention and MLP
  work done on padding is wasted. The two trainers run in two threads that take optimizer steps
  strictly in turn, so background load on this shared machine hits both alike. Per variant,
  `--warmup` steps are dropped, then the median over `--steps` timed steps (on_step_begin ->
  on_step_end: forward, backward, optimizer; collating the batch, a few ms, is outside) of real
  (non-padding) tokens/s and optimizer steps/s; the padding share is padded / all tokens of the
  timed batches (packed: only the dataset's last, shorter block is padded).
* Model FLOPs utilisation (MFU), an estimate of how far a tiny model on a few cores is from the
  machine's peak. Model FLOPs per real token (forward + backward, the 6N rule of Kaplan et al.
  plus the attention term of PaLM's appendix B):

      6 * N_active + 12 * L * T * d_attn

  N_active counts the weights a token is multiplied by: per layer the attention projections
  (q, k, v, o), the router, and `num_experts_per_tok` of the `num_experts` expert MLPs
  (gate/up/down, i.e. expert tensors * k / E); norms are left out (no matmul). The input
  embedding is a lookup and is not counted, but the (tied) output projection `lm_head` is a
  real d x V matmul per token and is counted: in a model this small it is a large part of the
  work (its share is printed). L = layers, d_attn = heads x head_dim, and T = the context the
  token's sequence has: `max_seq_len` packed, the mean real row length unpacked.
  Achieved FLOP/s = FLOPs/token x real tokens/s (padding does not count as useful work).
  Peak is (a) measured: the best of a few fp32 `torch.matmul` of `--matmul-size` square
  matrices at the same torch thread count (before and after training), and (b) theoretical:
  cores used x clock (lscpu's max MHz, else /proc/cpuinfo's MHz) x fp32 FLOPs/cycle/core,
  ASSUMED 64 with AVX-512 (16 lanes x 2 for FMA x 2 FMA units), 32 with AVX2 (8 x 2 x 2),
  8 otherwise (override: --flops-per-cycle).
  Both MFUs are estimates: virtual-CPU clocks, turbo and AVX frequency licences are unknown.

Also printed: the model's total and active parameter counts and tokens per optimizer step.
Documents: the CPT trajectory streams of data/sft/train.jsonl (plus the corpora by `cpt.mix`
when data/corpora holds them); without that file, synthetic episodes (tests/helpers.py) built
into a temp dir. Results also go to reports/bench/train_throughput.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

T0 = time.perf_counter()  # the bench runtime includes the (slow) imports below
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from datasets import Dataset, disable_progress_bars  # noqa: E402
from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from transformers.trainer_utils import SaveStrategy  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402
from trl import SFTTrainer  # noqa: E402

from agentworld.config import load_params  # noqa: E402
from agentworld.data.build import load_examples  # noqa: E402
from agentworld.models.factory import build_model  # noqa: E402
from agentworld.training.cpt import cpt_config, mix_documents, tokenizer_texts, trajectory_streams  # noqa: E402


# --------------------------------------------------------------------------- documents

def load_documents(params, data_path: Path) -> tuple[list, list[str], str]:
    """(examples, CPT documents, description of the source)."""
    if data_path.is_file():
        examples, source = load_examples(data_path), f"real: {data_path}"
    else:
        sys.path.insert(0, str(ROOT / "tests"))
        from helpers import make_transitions  # noqa: PLC0415

        from agentworld.data.build import build_datasets  # noqa: PLC0415

        with tempfile.TemporaryDirectory() as tmp:
            build_datasets(make_transitions(240, turns=8), params.build, Path(tmp))
            examples = load_examples(Path(tmp) / "sft" / "train.jsonl")
        source = f"synthetic: tests/helpers.make_transitions ({data_path} missing)"
    docs = trajectory_streams(examples)
    corpora_dir = ROOT / "data" / "corpora"
    if all((corpora_dir / f"{s}.jsonl").is_file() for s in params.corpora.sources) and params.corpora.sources:
        from agentworld.data.corpora import load_corpora  # noqa: PLC0415

        corpus = [d.text for d in load_corpora(corpora_dir, params.corpora.sources)]
        docs = mix_documents(docs, corpus, params.cpt.mix.trajectories, params.cpt.seed)
        source += f" + corpora ({params.cpt.mix.trajectories:.0%} trajectories by characters)"
    else:
        source += " (trajectory streams only; no data/corpora)"
    return examples, docs, source


# --------------------------------------------------------------------------- model FLOPs

def parameter_counts(model: torch.nn.Module) -> dict[str, int]:
    """Total parameters, and the weights one token is multiplied by (see the module docstring)."""
    cfg = model.config
    k, experts = cfg.num_experts_per_tok, cfg.num_experts
    attention = router = expert_total = norms = 0
    for name, p in model.named_parameters():
        n = p.numel()
        if ".self_attn." in name and name.endswith("proj.weight"):
            attention += n
        elif ".mlp.experts." in name:
            expert_total += n
        elif ".mlp.gate." in name:
            router += n
        elif "norm" in name:
            norms += n
    embedding = model.get_input_embeddings().weight.numel()
    lm_head = model.get_output_embeddings().weight.numel()
    total = sum(p.numel() for p in model.parameters())  # tied lm_head counted once
    expert_active = expert_total * k // experts
    return {
        "total": total,
        "embedding": embedding,
        "lm_head": lm_head,
        "tied_embeddings": bool(cfg.tie_word_embeddings),
        "attention": attention,
        "router": router,
        "experts_total": expert_total,
        "experts_active": expert_active,
        "norms": norms,
        "active_non_embedding": attention + router + expert_active,
        "active_matmul": attention + router + expert_active + lm_head,
    }


def flops_per_token(counts: dict[str, int], cfg, context: float) -> dict[str, float]:
    d_attn = cfg.num_attention_heads * cfg.head_dim
    dense = 6 * counts["active_matmul"]
    attention = 12 * cfg.num_hidden_layers * context * d_attn
    return {"dense": dense, "attention_scores": attention, "total": dense + attention,
            "lm_head_share": 6 * counts["lm_head"] / (dense + attention)}


# --------------------------------------------------------------------------- peak FLOP/s

def measured_peak(size: int, repeats: int) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.matmul(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def theoretical_peak(cores: int, flops_per_cycle: float | None) -> dict:
    mhz, mhz_source = None, None
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        m = re.search(r"CPU max MHz:\s*([\d.]+)", lscpu)
        if m:
            mhz, mhz_source = float(m.group(1)), "lscpu CPU max MHz"
    except (OSError, subprocess.SubprocessError):
        pass
    flags = ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^flags\s*:\s*(.*)$", cpuinfo, re.M)
        flags = m.group(1) if m else ""
        if mhz is None:
            values = [float(v) for v in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.M)]
            if values:
                mhz, mhz_source = max(values), "/proc/cpuinfo cpu MHz (no max MHz reported)"
    except OSError:
        pass
    if flops_per_cycle is not None:
        fpc, assumption = flops_per_cycle, f"{flops_per_cycle:g} fp32 FLOPs/cycle/core (--flops-per-cycle)"
    elif "avx512f" in flags.split():
        fpc, assumption = 64, "AVX-512: 16 fp32 lanes x 2 (FMA) x 2 FMA units = 64 FLOPs/cycle/core (assumed; 32 with one FMA unit)"
    elif "avx2" in flags.split():
        fpc, assumption = 32, "AVX2: 8 fp32 lanes x 2 (FMA) x 2 FMA units = 32 FLOPs/cycle/core (assumed)"
    else:
        fpc, assumption = 8, "no AVX2: 8 fp32 FLOPs/cycle/core (assumed)"
    peak = cores * mhz * 1e6 * fpc if mhz else None
    return {"flops_per_s": peak, "cores": cores, "mhz": mhz, "mhz_source": mhz_source,
            "flops_per_cycle_per_core": fpc, "assumption": assumption}


# --------------------------------------------------------------------------- training

class Baton:
    """Lets two trainers, each in its own thread, take optimizer steps strictly in turn.

    The machine is shared: whatever else runs slows both variants alike when their steps
    alternate, instead of whichever variant happened to run during a busy minute.
    """

    def __init__(self, players: int) -> None:
        self.cond = threading.Condition()
        self.turn = 0
        self.done = [False] * players

    def take(self, player: int) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.turn == player)

    def pass_on(self, player: int, finished: bool = False) -> None:
        with self.cond:
            self.done[player] = self.done[player] or finished
            others = [(player + i) % len(self.done) for i in range(1, len(self.done) + 1)]
            self.turn = next((p for p in others if not self.done[p]), player)
            self.cond.notify_all()


class StepTimer(TrainerCallback):
    """Wall time of each optimizer step (forward, backward, optimizer; taken while holding the baton)."""

    def __init__(self, baton: Baton, player: int) -> None:
        self.baton, self.player = baton, player
        self.begin: dict[int, float] = {}
        self.end: dict[int, float] = {}

    def on_step_begin(self, args, state, control, **kwargs):
        self.baton.take(self.player)
        self.begin[state.global_step + 1] = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.end[state.global_step] = time.perf_counter()
        self.baton.pass_on(self.player)

    def seconds(self, step: int) -> float:
        return self.end[step] - self.begin[step]


class CountingSFTTrainer(SFTTrainer):
    """SFTTrainer that records, per optimizer step, all and real tokens of the batches it trains on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch_tokens: dict[int, list[int]] = {}

    def training_step(self, model, inputs, *args, **kwargs):
        ids = inputs["input_ids"]
        real = int(inputs["attention_mask"].sum()) if "attention_mask" in inputs else ids.numel()
        counts = self.batch_tokens.setdefault(self.state.global_step + 1, [0, 0, 0])
        counts[0] += ids.numel()
        counts[1] += real
        counts[2] += ids.shape[0]
        return super().training_step(model, inputs, *args, **kwargs)


def make_trainer(model, tokenizer, docs: list[str], params, packing: bool, steps: int, out: Path,
                 timer: StepTimer) -> CountingSFTTrainer:
    """The CPT trainer (`cpt_config` -> SFTTrainer), with no checkpoints, logging or reporting."""
    never = 10 * steps + 1000
    stage = params.cpt.model_copy(update={"max_steps": steps, "save_steps": never, "logging_steps": never})
    config = cpt_config(stage, params.model, params.distributed, out, packing=packing)
    config.report_to = []
    config.disable_tqdm = True
    config.save_strategy = SaveStrategy.NO  # no checkpoint, not even the one at max_steps
    trainer = CountingSFTTrainer(model=model, args=config, train_dataset=Dataset.from_dict({"text": docs}),
                                 processing_class=tokenizer, callbacks=[timer])
    trainer.remove_callback(PrinterCallback)  # no end-of-training metrics dump
    return trainer


def run_variants(model, tokenizer, docs: list[str], params, warmup: int, steps: int) -> dict[str, dict]:
    """Train packed and unpacked copies of `model` side by side, alternating optimizer steps."""
    names = {"packed": True, "unpacked": False}
    baton = Baton(len(names))
    timers = {name: StepTimer(baton, i) for i, name in enumerate(names)}
    walls: dict[str, float] = {}
    errors: list[BaseException] = []
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {name: make_trainer(copy.deepcopy(model), tokenizer, docs, params, packing, warmup + steps,
                                       Path(tmp) / name, timers[name]) for name, packing in names.items()}

        def train(name: str) -> None:
            try:
                start = time.perf_counter()
                trainers[name].train()
                walls[name] = time.perf_counter() - start
            except BaseException as err:  # noqa: BLE001 - reraised in the main thread
                errors.append(err)
            finally:
                baton.pass_on(timers[name].player, finished=True)

        threads = [threading.Thread(target=train, args=(name,), name=f"bench-{name}") for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]

    results = {}
    timed = range(warmup + 1, warmup + steps + 1)
    for name, packing in names.items():
        trainer, timer = trainers[name], timers[name]
        secs = [timer.seconds(s) for s in timed]
        total, real, rows = ([trainer.batch_tokens[s][i] for s in timed] for i in range(3))
        results[name] = {
            "packing": packing,
            "timed_steps": steps,
            "warmup_steps": warmup,
            "train_wall_s_interleaved": walls[name],
            "step_s_median": statistics.median(secs),
            "step_s_min": min(secs),
            "step_s_max": max(secs),
            "steps_per_s": 1 / statistics.median(secs),
            "real_tokens_per_s": statistics.median(r / s for r, s in zip(real, secs)),
            "all_tokens_per_s": statistics.median(t / s for t, s in zip(total, secs)),
            "real_tokens_per_step": statistics.mean(real),
            "all_tokens_per_step": statistics.mean(total),
            "padding_share": 1 - sum(real) / sum(total),
            "mean_real_row_len": sum(real) / sum(rows),
            "tokens_seen_non_padding": int(trainer.state.num_input_tokens_seen or 0),
        }
    return results


# --------------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12, help="timed optimizer steps per variant")
    parser.add_argument("--warmup", type=int, default=3, help="untimed optimizer steps per variant")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: params cpt.threads)")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "sft" / "train.jsonl")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--matmul-repeats", type=int, default=5)
    parser.add_argument("--flops-per-cycle", type=float, default=None, help="override the assumed fp32 FLOPs/cycle/core")
    parser.add_argument("--out", type=Path, default=Path("reports/bench/train_throughput.json"))
    args = parser.parse_args()

    disable_progress_bars()
    hf_logging.set_verbosity_error()
    params = load_params(args.params)
    threads = args.threads or params.cpt.threads
    torch.set_num_threads(threads)

    examples, docs, source = load_documents(params, args.data)
    model, tokenizer = build_model(params.model, tokenizer_texts(examples, docs), seed=params.cpt.seed)
    counts = parameter_counts(model)
    cfg = model.config
    print(f"documents: {len(docs)} ({source}); model: {params.model.source}, {cfg.num_hidden_layers} layers, "
          f"d={cfg.hidden_size}, {cfg.num_experts} experts (top-{cfg.num_experts_per_tok}), vocab {cfg.vocab_size}, "
          f"max_seq_len {params.model.max_seq_len}, batch {params.cpt.batch_size}; torch threads {threads}")

    measured = measured_peak(args.matmul_size, args.matmul_repeats)
    load_before = os.getloadavg()[0]
    variants = run_variants(model, tokenizer, docs, params, args.warmup, args.steps)
    load_after = os.getloadavg()[0]
    print(f"trained {args.warmup}+{args.steps} steps per variant, alternating steps, in "
          f"{max(v['train_wall_s_interleaved'] for v in variants.values()):.0f} s; "
          f"1-min load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs")

    measured = max(measured, measured_peak(args.matmul_size, args.matmul_repeats))
    theory = theoretical_peak(min(threads, os.cpu_count() or threads), args.flops_per_cycle)
    for name, v in variants.items():
        context = params.model.max_seq_len if v["packing"] else v["mean_real_row_len"]
        v["model_flops_per_token"] = flops_per_token(counts, cfg, context)
        v["achieved_flops_per_s"] = v["model_flops_per_token"]["total"] * v["real_tokens_per_s"]
        v["mfu_vs_measured_matmul"] = v["achieved_flops_per_s"] / measured
        v["mfu_vs_theoretical"] = (v["achieved_flops_per_s"] / theory["flops_per_s"]) if theory["flops_per_s"] else None

    p, u = variants["packed"], variants["unpacked"]
    rows = [
        ("real tokens / s", f"{p['real_tokens_per_s']:,.0f}", f"{u['real_tokens_per_s']:,.0f}",
         f"{p['real_tokens_per_s'] / u['real_tokens_per_s']:.2f}x"),
        ("all tokens / s (incl. padding)", f"{p['all_tokens_per_s']:,.0f}", f"{u['all_tokens_per_s']:,.0f}",
         f"{p['all_tokens_per_s'] / u['all_tokens_per_s']:.2f}x"),
        ("optimizer steps / s", f"{p['steps_per_s']:.3f}", f"{u['steps_per_s']:.3f}",
         f"{p['steps_per_s'] / u['steps_per_s']:.2f}x"),
        ("real tokens / step", f"{p['real_tokens_per_step']:,.0f}", f"{u['real_tokens_per_step']:,.0f}",
         f"{p['real_tokens_per_step'] / u['real_tokens_per_step']:.2f}x"),
        ("all tokens / step", f"{p['all_tokens_per_step']:,.0f}", f"{u['all_tokens_per_step']:,.0f}", ""),
        ("padding share", f"{p['padding_share']:.1%}", f"{u['padding_share']:.1%}", ""),
        ("context T for attention FLOPs", f"{params.model.max_seq_len}", f"{u['mean_real_row_len']:.0f}", ""),
        ("model FLOPs / real token", f"{p['model_flops_per_token']['total'] / 1e6:.2f} M",
         f"{u['model_flops_per_token']['total'] / 1e6:.2f} M", ""),
        ("achieved GFLOP/s (est.)", f"{p['achieved_flops_per_s'] / 1e9:.2f}", f"{u['achieved_flops_per_s'] / 1e9:.2f}",
         f"{p['achieved_flops_per_s'] / u['achieved_flops_per_s']:.2f}x"),
        ("MFU vs measured matmul (est.)", f"{p['mfu_vs_measured_matmul']:.1%}", f"{u['mfu_vs_measured_matmul']:.1%}", ""),
    ]
    if theory["flops_per_s"]:
        rows.append(("MFU vs theoretical peak (est.)", f"{p['mfu_vs_theoretical']:.1%}", f"{u['mfu_vs_theoretical']:.1%}", ""))
    width = max(len(r[0]) for r in rows)
    print(f"\nmedian over {args.steps} timed steps after {args.warmup} warm-up steps (per variant)")
    print(f"{'':{width}s} {'packed':>12s} {'unpacked':>12s} {'packed/unpacked':>16s}")
    for label, a, b, ratio in rows:
        print(f"{label:{width}s} {a:>12s} {b:>12s} {ratio:>16s}")

    print(f"\nparameters: total {counts['total']:,} (embedding {counts['embedding']:,}"
          f"{', tied to lm_head' if counts['tied_embeddings'] else ''}); active per token: "
          f"{counts['active_non_embedding']:,} non-embedding (attention {counts['attention']:,}, router {counts['router']:,}, "
          f"experts {counts['experts_active']:,} of {counts['experts_total']:,}) + lm_head {counts['lm_head']:,}")
    print(f"FLOPs/token = 6 x {counts['active_matmul']:,} + 12 x L x T x d_attn; lm_head share "
          f"{p['model_flops_per_token']['lm_head_share']:.0%} (packed)")
    print(f"peak (a) measured: {measured / 1e9:.1f} GFLOP/s, best fp32 matmul {args.matmul_size}^2 "
          f"of {args.matmul_repeats} before and {args.matmul_repeats} after training, {threads} threads")
    if theory["flops_per_s"]:
        print(f"peak (b) theoretical: {theory['flops_per_s'] / 1e9:.1f} GFLOP/s = {theory['cores']} cores x "
              f"{theory['mhz']:.0f} MHz ({theory['mhz_source']}) x {theory['flops_per_cycle_per_core']:g}; "
              f"assumption: {theory['assumption']}")
    else:
        print("peak (b) theoretical: clock not found in lscpu or /proc/cpuinfo")
    runtime = time.perf_counter() - T0
    print(f"all figures are estimates on a shared machine; bench runtime {runtime:.0f} s")

    report = {
        "documents": {"count": len(docs), "source": source},
        "model": {"layers": cfg.num_hidden_layers, "hidden_size": cfg.hidden_size, "num_experts": cfg.num_experts,
                  "num_experts_per_tok": cfg.num_experts_per_tok, "vocab_size": cfg.vocab_size,
                  "max_seq_len": params.model.max_seq_len, "batch_size": params.cpt.batch_size},
        "parameters": counts,
        "threads": threads,
        "load_average_1min": {"before": load_before, "after": load_after},
        "variants": variants,
        "ratios_packed_over_unpacked": {
            "real_tokens_per_s": p["real_tokens_per_s"] / u["real_tokens_per_s"],
            "steps_per_s": p["steps_per_s"] / u["steps_per_s"],
        },
        "peak": {"measured_matmul_flops_per_s": measured, "matmul_size": args.matmul_size, "theoretical": theory},
        "machine": {"cpu_count": os.cpu_count(), "processor": platform.processor(), "torch": torch.__version__},
        "runtime_s": runtime,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
