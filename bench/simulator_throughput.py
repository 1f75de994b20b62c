"""The world model as a simulator: simulated steps/s next to real-environment steps/s per domain,
and vLLM-engine tokens/s next to transformers `generate`, at the demo size and a larger size.

    .venv/bin/python bench/simulator_throughput.py [--domains terminal os mcp] [--batch 16] [--model models/rl]

Part 1, per domain: the same behaviour policies step a real environment (one episode at a
time, as collection does) and `--batch` WorldModelEnv episodes in lockstep through one batched
generation per step (a `TextVectorEnv` of WorldModelEnvs). Only `step` calls are timed (resets excluded on both sides);
figures are medians over `--repeats` runs, with the ratio simulated / real.

Part 2: tokens/s of greedy decoding that ignores end-of-turn (every sequence generates exactly
`--new-tokens`), on held-out AgentWorldBench prompts, for transformers `generate` (batched) and
vLLM's offline engine (float32 on CPU), at the demo model and a fresh ~80M-parameter Qwen3-MoE.
vLLM's start-up is reported separately. Results also go to reports/bench/simulator_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from agentworld.config import ModelParams  # noqa: E402
from agentworld.data.awbench import read_bench  # noqa: E402
from agentworld.domains import list_envs, make_env, make_policy  # noqa: E402
from agentworld.envs.vector import TextVectorEnv  # noqa: E402
from agentworld.models.backends import TransformersBackend  # noqa: E402
from agentworld.models.chat import fit_prompt  # noqa: E402
from agentworld.models.factory import build_model, count_parameters, load_local  # noqa: E402
from agentworld.simulation.env import RealTaskSource, WorldModelEnv  # noqa: E402

LARGE = ModelParams(vocab_size=4096, hidden_size=512, num_layers=6, num_heads=8, num_kv_heads=4, num_experts=8,
                    num_experts_per_tok=2, moe_intermediate_size=1024, max_seq_len=512)
POLICIES = ("scripted", "exploratory", "erroneous")


def real_steps_per_s(domain: str, episodes: int, max_steps: int) -> float:
    env = make_env(domain)
    steps, seconds = 0, 0.0
    try:
        for seed in range(episodes):
            observation, _ = env.reset(seed=seed)
            policy, rng, history = make_policy(domain, POLICIES[seed % 3], env.task), random.Random(seed), []
            for _ in range(max_steps):
                action = policy.act(observation, history, rng)
                start = time.perf_counter()
                observation, _, terminated, truncated, _ = env.step(action)
                seconds += time.perf_counter() - start
                steps += 1
                history.append((action, observation))
                if terminated or truncated:
                    break
    finally:
        env.close()
    return steps / seconds


def simulated_steps_per_s(domain: str, backend, batch: int, max_steps: int) -> float:
    tasks = RealTaskSource(domain)
    vector = TextVectorEnv([WorldModelEnv(domain, backend, tasks, retries=0) for _ in range(batch)])
    observations = list(vector.reset(seed=list(range(batch)))[0])
    tasks.close()  # every episode has its task and first observation; no action reaches a real env
    policies = [make_policy(domain, POLICIES[i % 3], env.task) for i, env in enumerate(vector.envs)]
    rngs, histories = [random.Random(i) for i in range(batch)], [[] for _ in range(batch)]
    steps, seconds = 0, 0.0
    for _ in range(max_steps):
        active = [int(i) for i in vector.running.nonzero()[0]]
        if not active:
            break
        actions = [""] * batch
        for i in active:
            actions[i] = policies[i].act(observations[i], histories[i], rngs[i])
        start = time.perf_counter()
        observations = list(vector.step(actions)[0])
        seconds += time.perf_counter() - start
        steps += len(active)
        for i in active:
            histories[i].append((actions[i], observations[i]))
    return steps / seconds


def prompts(tokenizer, n: int, budget: int) -> list[str]:
    records = read_bench(Path("data/agentworldbench"))
    picked = random.Random(0).sample(records, min(n, len(records)))
    return [tokenizer.apply_chat_template(fit_prompt(r.to_example(), tokenizer, budget), add_generation_prompt=True,
                                          tokenize=False) for r in picked]


@torch.inference_mode()
def transformers_tokens_per_s(model_dir: Path, n: int, new_tokens: int, batch: int) -> float:
    model, tokenizer = load_local(model_dir)
    model.config.output_router_logits = False
    texts = prompts(tokenizer, n, 512 - new_tokens)
    start, generated = time.perf_counter(), 0
    for i in range(0, len(texts), batch):
        enc = tokenizer(texts[i:i + batch], return_tensors="pt", padding=True, add_special_tokens=False)
        out = model.generate(**enc, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)
        generated += (out.shape[1] - enc["input_ids"].shape[1]) * out.shape[0]
    return generated / (time.perf_counter() - start)


def vllm_tokens_per_s(model_dir: Path, n: int, new_tokens: int) -> tuple[float, float]:
    from vllm import LLM, SamplingParams

    start = time.perf_counter()
    llm = LLM(model=str(model_dir), dtype="float32", max_model_len=512, gpu_memory_utilization=0.1,
              enforce_eager=True, seed=0)
    startup = time.perf_counter() - start
    texts = prompts(llm.get_tokenizer(), n, 512 - new_tokens)
    sampling = SamplingParams(temperature=0.0, max_tokens=new_tokens, ignore_eos=True)
    start = time.perf_counter()
    outputs = llm.generate(texts, sampling, use_tqdm=False)
    seconds = time.perf_counter() - start
    del llm
    return sum(len(o.outputs[0].token_ids) for o in outputs) / seconds, startup


def large_model_dir(out: Path) -> Path:
    if not (out / "config.json").exists():
        records = read_bench(Path("data/agentworldbench"))
        texts = [t for r in records[:400] for t in (r.system_str, *r.prompt, *r.response)]
        model, tokenizer = build_model(LARGE, texts)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", nargs="+", default=["terminal", "os", "mcp"])
    parser.add_argument("--model", type=Path, default=Path("models/rl"), help="the demo world model (make demo)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--no-vllm", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(2)
    if not (args.model / "config.json").exists():
        sys.exit(f"{args.model}: no world model here; run `make demo` first (or pass --model DIR)")
    available = {e.name for e in list_envs() if e.available}
    backend = TransformersBackend(args.model, max_new_tokens=64, batch_size=args.batch, max_seq_len=512)
    result: dict = {"simulator": {}, "generation": {}}

    print(f"{'domain':12s} {'real steps/s':>13s} {'sim x1':>8s} {'sim x' + str(args.batch):>9s} {'ratio':>7s}")
    for domain in args.domains:
        if domain not in available:
            print(f"{domain:12s} unavailable here")
            continue
        real, one, many = [], [], []
        for _ in range(args.repeats):
            real.append(real_steps_per_s(domain, args.episodes, args.max_steps))
            one.append(simulated_steps_per_s(domain, backend, 1, args.max_steps))
            many.append(simulated_steps_per_s(domain, backend, args.batch, args.max_steps))
        row = {"real": statistics.median(real), "sim_1": statistics.median(one), f"sim_{args.batch}": statistics.median(many)}
        row["ratio"] = row[f"sim_{args.batch}"] / row["real"]
        result["simulator"][domain] = row
        print(f"{domain:12s} {row['real']:13.1f} {row['sim_1']:8.1f} {row[f'sim_{args.batch}']:9.1f} {row['ratio']:7.2f}")

    print(f"\n{'model':26s} {'params':>9s} {'transformers tok/s':>19s} {'vLLM tok/s':>11s} {'ratio':>6s} {'vLLM start s':>12s}")
    for label, model_dir in (("demo", args.model), ("large (fresh)", large_model_dir(Path(".cache/bench/large-moe")))):
        params = count_parameters(load_local(model_dir)[0])
        hf = statistics.median(transformers_tokens_per_s(model_dir, args.prompts, args.new_tokens, 16)
                               for _ in range(args.repeats))
        vllm, startup = (float("nan"), float("nan")) if args.no_vllm else vllm_tokens_per_s(model_dir, args.prompts, args.new_tokens)
        result["generation"][label] = {"parameters": params, "transformers": hf, "vllm": vllm, "vllm_startup_s": startup}
        print(f"{label:26s} {params / 1e6:8.1f}M {hf:19.1f} {vllm:11.1f} {vllm / hf:6.2f} {startup:12.1f}")

    out = Path("reports/bench/simulator_throughput.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**result, "settings": {k: str(v) for k, v in vars(args).items()}}, indent=2))


if __name__ == "__main__":
    main()
