"""GPU-cluster training: the `distributed` section of params.yaml, DeepSpeed config and launcher argv.

`compute: local` is the default CPU path (no DeepSpeed). `compute: cluster` trains with DeepSpeed
ZeRO through the Hugging Face Trainer integration: `deepspeed_config` writes a JSON config whose
batch/optimizer/precision values are "auto" (the Trainer fills them from `TrainingArguments`, see
`trainer_overrides`), and `launch_command` builds the multi-node `deepspeed` or `accelerate launch`
argv that runs `python -m agentworld.cli stage cpt|sft|rl ...` on every rank.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any


from agentworld.config import DistributedParams, Offload, TrainParams

__all__ = ["DistributedError", "DistributedParams", "deepspeed_config", "launch_command", "parse_hostfile",
           "resolve_auto", "trainer_overrides", "write_deepspeed_config"]


#: DeepSpeed's hostfile line format (deepspeed/launcher/runner.py `_parse_hostfile`): `host slots=N`.
_HOSTFILE_LINE = re.compile(r"^(\S+)\s+slots=(\d+)")


class DistributedError(ValueError):
    """A distributed setting (or the hostfile it names) cannot be used; the message names the key."""


# --------------------------------------------------------------------------- DeepSpeed config


def _offload(device: Offload, nvme_path: str | None) -> dict[str, Any]:
    block: dict[str, Any] = {"device": device, "pin_memory": True}
    if device == "nvme":
        block["nvme_path"] = nvme_path
    return block


def deepspeed_config(dist: DistributedParams, train: TrainParams, *, torch_adam: bool = False) -> dict[str, Any]:
    """A DeepSpeed config for `TrainingArguments(deepspeed=...)`.

    Values the HF Trainer fills from its arguments are "auto" (batch sizes, accumulation, clipping,
    optimizer hyper-parameters, fp16/bf16, bucket sizes from the model's hidden size); no
    `scheduler` block, so the Trainer's own cosine schedule with warmup is used. `torch_adam`
    selects torch's AdamW instead of DeepSpeed's FusedAdam / CPUAdam (which need a CUDA or a
    JIT-compiled op): use it on CPU. `train` is accepted so that values the Trainer does not fill
    can follow the train section; today only the seed-independent defaults are used.
    """
    del train  # every train-derived value is "auto" and comes through TrainingArguments
    optimizer_params: dict[str, Any] = {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}
    if torch_adam:
        optimizer_params["torch_adam"] = True
    config: dict[str, Any] = {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "optimizer": {"type": "AdamW", "params": optimizer_params},
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "steps_per_print": 2000,
        "wall_clock_breakdown": False,
    }
    zero: dict[str, Any] = {"stage": dist.zero_stage}
    if dist.zero_stage == 2:
        zero.update(
            allgather_partitions=True,
            allgather_bucket_size=200_000_000,
            overlap_comm=True,
            reduce_scatter=True,
            reduce_bucket_size="auto",
            contiguous_gradients=True,
        )
    elif dist.zero_stage == 3:
        zero.update(
            overlap_comm=True,
            contiguous_gradients=True,
            sub_group_size=1_000_000_000,
            reduce_bucket_size="auto",
            stage3_prefetch_bucket_size="auto",
            stage3_param_persistence_threshold="auto",
            stage3_max_live_parameters=1_000_000_000,
            stage3_max_reuse_distance=1_000_000_000,
            # a full (unsharded) checkpoint on save, so model dirs load with from_pretrained
            stage3_gather_16bit_weights_on_model_save=True,
        )
    if dist.offload_optimizer != "none":
        zero["offload_optimizer"] = _offload(dist.offload_optimizer, dist.nvme_path)
        if torch_adam:
            # DeepSpeed insists on its CPUAdam with ZeRO-Offload unless told otherwise
            config["zero_force_ds_cpu_optimizer"] = False
    if dist.offload_params != "none":
        zero["offload_param"] = _offload(dist.offload_params, dist.nvme_path)
    config["zero_optimization"] = zero
    return config


def write_deepspeed_config(path: str | Path, config: dict[str, Any]) -> Path:
    """Write `config` as JSON (the file `TrainingArguments(deepspeed=path)` / accelerate read)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return path


def trainer_overrides(dist: DistributedParams, config_path: str | Path) -> dict[str, Any]:
    """`TrainingArguments` keywords that go with the config (the source of its "auto" values)."""
    return {
        "deepspeed": str(config_path),
        "bf16": dist.bf16,
        "fp16": False,
        "use_cpu": False,
        "gradient_accumulation_steps": dist.gradient_accumulation_steps,
    }


def resolve_auto(
    config: dict[str, Any],
    train: TrainParams,
    dist: DistributedParams,
    *,
    world_size: int = 1,
    hidden_size: int,
    max_grad_norm: float = 1.0,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> dict[str, Any]:
    """A copy of `config` with every "auto" filled the way the HF Trainer fills it.

    For a direct `deepspeed.initialize` (no Trainer); defaults match `TrainingArguments`'.
    """
    micro = train.batch_size
    accum = dist.gradient_accumulation_steps
    values: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "train_batch_size": world_size * micro * accum,
        "gradient_clipping": max_grad_norm,
        "optimizer.params.lr": train.learning_rate,
        "optimizer.params.betas": list(betas),
        "optimizer.params.eps": eps,
        "optimizer.params.weight_decay": train.weight_decay,
        "bf16.enabled": dist.bf16,
        "fp16.enabled": False,
        "zero_optimization.reduce_bucket_size": hidden_size * hidden_size,
        "zero_optimization.stage3_prefetch_bucket_size": int(0.9 * hidden_size * hidden_size),
        "zero_optimization.stage3_param_persistence_threshold": 10 * hidden_size,
    }
    out = copy.deepcopy(config)
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(leaf) == "auto":
            node[leaf] = value
    left = [key for key in _walk(out) if key[1] == "auto"]
    if left:
        raise DistributedError(f"deepspeed config: no value to resolve 'auto' for {[k for k, _ in left]}")
    return out


def _walk(node: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in node.items():
        dotted = f"{prefix}.{key}" if prefix else key
        items += _walk(value, dotted) if isinstance(value, dict) else [(dotted, value)]
    return items


# --------------------------------------------------------------------------- launcher


def parse_hostfile(path: str | Path) -> dict[str, int]:
    """Hosts and their GPU slots from a DeepSpeed hostfile (`host slots=N`, `#` comments)."""
    path = Path(path)
    if not path.is_file():
        raise DistributedError(f"distributed.hostfile: {path} does not exist (a file of 'host slots=N' lines)")
    hosts: dict[str, int] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _HOSTFILE_LINE.match(line)
        if not match:
            raise DistributedError(
                f"distributed.hostfile: {path} line {number} {line!r} is not in the form 'host slots=N'"
            )
        host, slots = match.group(1), int(match.group(2))
        if host in hosts:
            raise DistributedError(f"distributed.hostfile: {path} lists host {host!r} twice (line {number})")
        if slots < 1:
            raise DistributedError(f"distributed.hostfile: {path} line {number}: slots must be at least 1")
        hosts[host] = slots
    if not hosts:
        raise DistributedError(f"distributed.hostfile: {path} lists no hosts ('host slots=N' lines)")
    return hosts


def _check_hosts(dist: DistributedParams) -> dict[str, int] | None:
    if dist.hostfile is None:
        return None
    hosts = parse_hostfile(dist.hostfile)
    if len(hosts) < dist.num_nodes:
        raise DistributedError(
            f"distributed.num_nodes: {dist.num_nodes} nodes asked for, but distributed.hostfile "
            f"{dist.hostfile} lists {len(hosts)} host(s)"
        )
    short = {host: slots for host, slots in list(hosts.items())[: dist.num_nodes] if slots < dist.gpus_per_node}
    if short:
        raise DistributedError(
            f"distributed.gpus_per_node: {dist.gpus_per_node} GPUs per node asked for, but distributed.hostfile "
            f"gives fewer slots on {short}"
        )
    return hosts


def launch_command(
    dist: DistributedParams,
    entry_args: list[str],
    *,
    deepspeed_config_path: str | Path | None = None,
    machine_rank: int = 0,
) -> list[str]:
    """The argv that starts `python -m agentworld.cli <entry_args>` on every rank of the cluster.

    `deepspeed`: run once on the head node; it reaches the other hosts of the hostfile over ssh/pdsh.
    `accelerate`: with a hostfile, likewise once (DeepSpeed's pdsh launcher); without one, run on
    each node with its `machine_rank`. `deepspeed_config_path` is needed by accelerate (the
    deepspeed launcher leaves the config to `TrainingArguments(deepspeed=...)`).
    """
    if dist.compute != "cluster":
        raise DistributedError("distributed.compute: is 'local'; set it to 'cluster' to launch on a cluster")
    if not entry_args:
        raise DistributedError("launch_command: entry_args is empty (e.g. ['stage', 'sft'])")
    hosts = _check_hosts(dist)
    if dist.num_nodes > 1 and hosts is None and dist.launcher == "deepspeed":
        raise DistributedError(
            f"distributed.hostfile: needed for num_nodes {dist.num_nodes} with launcher 'deepspeed'"
        )
    if dist.launcher == "deepspeed":
        argv = ["deepspeed"]
        if dist.hostfile is not None:
            argv += ["--hostfile", str(dist.hostfile)]
        argv += ["--num_nodes", str(dist.num_nodes), "--num_gpus", str(dist.gpus_per_node)]
        if dist.master_addr:
            argv += ["--master_addr", dist.master_addr]
        # --no_local_rank: the CLI takes no --local_rank argument; ranks read LOCAL_RANK from the env
        argv += ["--master_port", str(dist.master_port), "--no_local_rank", "--module", "agentworld.cli"]
        return argv + list(entry_args)

    if deepspeed_config_path is None:
        raise DistributedError("launch_command: launcher 'accelerate' needs deepspeed_config_path (the written config)")
    if not 0 <= machine_rank < dist.num_nodes:
        raise DistributedError(f"launch_command: machine_rank {machine_rank} is outside 0..{dist.num_nodes - 1}")
    argv = [
        "accelerate", "launch",
        "--num_machines", str(dist.num_nodes),
        "--num_processes", str(dist.num_nodes * dist.gpus_per_node),
        "--machine_rank", str(machine_rank),
        "--use_deepspeed",
        "--deepspeed_config_file", str(deepspeed_config_path),
        "--main_process_port", str(dist.master_port),
    ]
    master = dist.master_addr or (next(iter(hosts)) if hosts else None)
    if dist.num_nodes > 1 and not master:
        raise DistributedError(
            f"distributed.master_addr: needed for num_nodes {dist.num_nodes} with launcher 'accelerate' "
            "and no hostfile"
        )
    if master:
        argv += ["--main_process_ip", master]
    if dist.hostfile is not None:
        argv += ["--deepspeed_hostfile", str(dist.hostfile), "--deepspeed_multinode_launcher", "pdsh"]
    return argv + ["--module", "agentworld.cli", *entry_args]
