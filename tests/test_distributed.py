"""DeepSpeed config and launcher for the GPU-cluster path, checked against DeepSpeed itself on CPU."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from agentworld.config import TrainParams, load_params
from agentworld.training.distributed import (
    DistributedError,
    DistributedParams,
    deepspeed_config,
    launch_command,
    parse_hostfile,
    resolve_auto,
    trainer_overrides,
    write_deepspeed_config,
)

PROJECT = Path(__file__).resolve().parents[1]
TRAIN = TrainParams(batch_size=4, learning_rate=1e-3, weight_decay=0.01)


def cluster(**kw) -> DistributedParams:
    return DistributedParams(compute="cluster", **kw)


def ds_config(config: dict):
    """DeepSpeed's own parse of a config (pydantic, extra='forbid' on the ZeRO block): no process group."""
    from deepspeed.runtime.config import DeepSpeedConfig

    return DeepSpeedConfig(config)


# --------------------------------------------------------------------------- params


def test_defaults_are_local_and_valid():
    dist = DistributedParams()
    assert dist.compute == "local" and dist.zero_stage == 2 and dist.offload_optimizer == "none"


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        (dict(zero_stage=2, offload_params="cpu"), "offload_params 'cpu' needs zero_stage 3"),
        (dict(zero_stage=0, offload_optimizer="cpu"), "offload_optimizer 'cpu' needs zero_stage 2 or 3"),
        (dict(zero_stage=3, offload_params="nvme"), "needs nvme_path"),
        (dict(nvme_path="/nvme"), "nvme_path is set but"),
        (dict(compute="local", num_nodes=2), "num_nodes 2 needs compute 'cluster'"),
    ],
)
def test_invalid_combinations_rejected(kw, needle):
    kw.setdefault("compute", "cluster")
    with pytest.raises(ValidationError, match=needle):
        DistributedParams(**kw)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(zero_stage=1), "zero_stage"),
        (dict(offload_optimizer="gpu"), "offload_optimizer"),
        (dict(gradient_accumulation_steps=0), "gradient_accumulation_steps"),
        (dict(master_port=80), "master_port"),
        (dict(launcher="torchrun"), "launcher"),
        (dict(zero_stages=3), "zero_stages"),
    ],
)
def test_bad_values_name_the_key(kw, field):
    with pytest.raises(ValidationError) as err:
        DistributedParams(**kw)
    assert [e["loc"][0] for e in err.value.errors()] == [field]


# --------------------------------------------------------------------------- DeepSpeed config


def test_stage2_config_has_autos_and_parses_in_deepspeed():
    dist = cluster(zero_stage=2, bf16=True, gradient_accumulation_steps=4)
    config = deepspeed_config(dist, TRAIN)
    zero = config["zero_optimization"]
    assert zero["stage"] == 2 and zero["reduce_bucket_size"] == "auto"
    assert "offload_optimizer" not in zero and "offload_param" not in zero
    assert not any(k.startswith("stage3_") for k in zero)
    for key in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping"):
        assert config[key] == "auto"
    assert config["optimizer"] == {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}}
    assert config["bf16"] == {"enabled": "auto"} and "scheduler" not in config  # the Trainer's cosine schedule

    assert resolve_auto(config, TRAIN, dist, world_size=8, hidden_size=64)["train_batch_size"] == 8 * 4 * 4
    # DeepSpeedConfig checks train_batch_size against the live world size: 1 without a process group
    parsed = ds_config(resolve_auto(config, TRAIN, dist, world_size=1, hidden_size=64))
    assert parsed.zero_optimization_stage == 2
    assert parsed.train_batch_size == 4 * 4
    assert parsed.train_micro_batch_size_per_gpu == 4 and parsed.gradient_accumulation_steps == 4
    assert parsed.optimizer_name == "adamw" and parsed.optimizer_params["lr"] == 1e-3
    assert parsed.zero_config.reduce_bucket_size == 64 * 64
    assert parsed.zero_config.offload_optimizer is None and parsed.zero_config.offload_param is None
    assert parsed.bfloat16_config.enabled is True


def test_stage2_cpu_offload_optimizer():
    dist = cluster(zero_stage=2, offload_optimizer="cpu")
    config = deepspeed_config(dist, TRAIN)
    assert config["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert "zero_force_ds_cpu_optimizer" not in config  # DeepSpeed's CPUAdam on the cluster
    parsed = ds_config(resolve_auto(config, TRAIN, dist, hidden_size=64))
    assert parsed.zero_config.offload_optimizer.device == "cpu"
    assert parsed.zero_config.offload_param is None
    # with torch's AdamW, DeepSpeed must be told not to insist on its CPUAdam
    assert deepspeed_config(dist, TRAIN, torch_adam=True)["zero_force_ds_cpu_optimizer"] is False


def test_stage3_config_without_offload():
    dist = cluster(zero_stage=3)
    config = deepspeed_config(dist, TRAIN)
    zero = config["zero_optimization"]
    assert zero["stage3_prefetch_bucket_size"] == "auto" and zero["stage3_param_persistence_threshold"] == "auto"
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    parsed = ds_config(resolve_auto(config, TRAIN, dist, hidden_size=64)).zero_config
    assert parsed.stage == 3
    # the stage3_* names are DeepSpeed aliases; these are the fields it actually reads
    assert parsed.prefetch_bucket_size == int(0.9 * 64 * 64)
    assert parsed.param_persistence_threshold == 640
    assert parsed.max_live_parameters == 10**9 and parsed.max_reuse_distance == 10**9
    assert parsed.gather_16bit_weights_on_model_save is True
    assert parsed.offload_optimizer is None and parsed.offload_param is None


def test_stage3_config_with_cpu_and_nvme_offload():
    dist = cluster(zero_stage=3, offload_optimizer="nvme", offload_params="cpu", nvme_path="/local_nvme")
    config = deepspeed_config(dist, TRAIN)
    zero = config["zero_optimization"]
    assert zero["offload_optimizer"] == {"device": "nvme", "nvme_path": "/local_nvme", "pin_memory": True}
    assert zero["offload_param"] == {"device": "cpu", "pin_memory": True}
    parsed = ds_config(resolve_auto(config, TRAIN, dist, hidden_size=64)).zero_config
    assert parsed.offload_optimizer.device == "nvme" and str(parsed.offload_optimizer.nvme_path) == "/local_nvme"
    assert parsed.offload_param.device == "cpu"


def test_hf_trainer_fills_every_auto_like_resolve_auto():
    """The Trainer integration's own fill (HfTrainerDeepSpeedConfig) leaves no "auto" and agrees with resolve_auto."""
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig, unset_hf_deepspeed_config

    class Tiny:
        class config:
            hidden_size = 64

    dist = cluster(zero_stage=3, offload_optimizer="cpu", bf16=False, gradient_accumulation_steps=2)
    config = deepspeed_config(dist, TRAIN)
    args = TrainingArguments(
        output_dir="unused", per_device_train_batch_size=TRAIN.batch_size, learning_rate=TRAIN.learning_rate,
        weight_decay=TRAIN.weight_decay, gradient_accumulation_steps=dist.gradient_accumulation_steps,
        use_cpu=True, bf16=False, report_to=[],
    )
    try:
        hf = HfTrainerDeepSpeedConfig(json.loads(json.dumps(config)))
        hf.trainer_config_process(args)
        hf.trainer_config_finalize(args, Tiny(), num_training_steps=10)
        filled = hf.config
    finally:
        unset_hf_deepspeed_config()  # the stage-3 flag is process-global in transformers
    assert "auto" not in json.dumps(filled)
    assert filled == resolve_auto(config, TRAIN, dist, world_size=args.world_size, hidden_size=64)
    overrides = trainer_overrides(dist, "ds.json")
    assert overrides["gradient_accumulation_steps"] == 2 and overrides["bf16"] is False


def test_resolve_auto_reports_unfillable_auto():
    dist = cluster()
    config = deepspeed_config(dist, TRAIN) | {"something_new": "auto"}
    with pytest.raises(DistributedError, match="something_new"):
        resolve_auto(config, TRAIN, dist, hidden_size=64)


def test_write_deepspeed_config_round_trips(tmp_path):
    config = deepspeed_config(cluster(zero_stage=3), TRAIN)
    path = write_deepspeed_config(tmp_path / "run" / "ds_config.json", config)
    assert json.loads(path.read_text()) == config


# --------------------------------------------------------------------------- launcher


@pytest.fixture()
def hostfile(tmp_path) -> Path:
    path = tmp_path / "hostfile"
    path.write_text("# cluster\nworker-0 slots=8\nworker-1 slots=8\n\n")
    return path


def test_deepspeed_launch_argv_parses_in_deepspeed_runner(hostfile):
    from deepspeed.launcher.runner import parse_args

    dist = cluster(hostfile=str(hostfile), num_nodes=2, gpus_per_node=8, master_addr="worker-0", master_port=29600)
    argv = launch_command(dist, ["stage", "train", "--params", "params.yaml"])
    assert argv[:1] == ["deepspeed"]
    args = parse_args(argv[1:])
    assert (args.hostfile, args.num_nodes, args.num_gpus) == (str(hostfile), 2, 8)
    assert (args.master_addr, args.master_port) == ("worker-0", 29600)
    assert args.module and args.no_local_rank
    assert args.user_script == "agentworld.cli"
    assert args.user_args == ["stage", "train", "--params", "params.yaml"]
    assert parse_hostfile(hostfile) == {"worker-0": 8, "worker-1": 8}


def test_accelerate_launch_argv_parses_in_accelerate(hostfile, tmp_path):
    from accelerate.commands.launch import launch_command_parser

    dist = cluster(launcher="accelerate", hostfile=str(hostfile), num_nodes=2, gpus_per_node=4, zero_stage=3)
    config_path = write_deepspeed_config(tmp_path / "ds.json", deepspeed_config(dist, TRAIN))
    argv = launch_command(dist, ["stage", "train"], deepspeed_config_path=config_path)
    assert argv[:2] == ["accelerate", "launch"]
    args = launch_command_parser().parse_args(argv[2:])
    assert (args.num_machines, args.num_processes, args.machine_rank) == (2, 8, 0)
    assert args.use_deepspeed and args.deepspeed_config_file == str(config_path)
    assert args.main_process_ip == "worker-0" and args.main_process_port == 29500  # first host by default
    assert args.deepspeed_hostfile == str(hostfile) and args.deepspeed_multinode_launcher == "pdsh"
    assert args.module and args.training_script == "agentworld.cli"
    assert args.training_script_args == ["stage", "train"]


def test_single_node_deepspeed_launch_needs_no_hostfile():
    argv = launch_command(cluster(gpus_per_node=2), ["stage", "train"])
    assert "--hostfile" not in argv and argv[argv.index("--num_gpus") + 1] == "2"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("worker-0 gpus=8\n", r"line 1 'worker-0 gpus=8' is not in the form 'host slots=N'"),
        ("# nothing\n\n", "lists no hosts"),
        ("a slots=2\na slots=2\n", "lists host 'a' twice"),
        ("a slots=0\n", "slots must be at least 1"),
    ],
)
def test_bad_hostfile_rejected(tmp_path, text, needle):
    path = tmp_path / "hostfile"
    path.write_text(text)
    with pytest.raises(DistributedError, match=f"distributed.hostfile: .*{needle}"):
        launch_command(cluster(hostfile=str(path)), ["stage", "train"])


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        (dict(hostfile="/no/such/hostfile"), "distributed.hostfile: /no/such/hostfile does not exist"),
        (dict(num_nodes=3), "distributed.num_nodes: 3 nodes asked for, but distributed.hostfile"),
        (dict(gpus_per_node=16), "distributed.gpus_per_node: 16 GPUs per node"),
    ],
)
def test_hostfile_mismatch_rejected(hostfile, kw, needle):
    kw.setdefault("hostfile", str(hostfile))
    with pytest.raises(DistributedError, match=needle):
        launch_command(cluster(**kw), ["stage", "train"])


def test_launch_errors_name_the_setting(tmp_path):
    with pytest.raises(DistributedError, match="distributed.compute"):
        launch_command(DistributedParams(), ["stage", "train"])
    with pytest.raises(DistributedError, match="distributed.hostfile: needed for num_nodes 2"):
        launch_command(cluster(num_nodes=2), ["stage", "train"])
    with pytest.raises(DistributedError, match="needs deepspeed_config_path"):
        launch_command(cluster(launcher="accelerate"), ["stage", "train"])
    with pytest.raises(DistributedError, match="distributed.master_addr: needed"):
        launch_command(cluster(launcher="accelerate", num_nodes=2), ["stage", "train"], deepspeed_config_path="x.json")


# --------------------------------------------------------------------------- one real ZeRO-2 step


ONE_STEP = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.time()
    import torch, deepspeed
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig
    from agentworld.config import TrainParams
    from agentworld.training.distributed import DistributedParams, deepspeed_config, resolve_auto

    torch.manual_seed(0)
    torch.set_num_threads(1)
    cfg = Qwen3MoeConfig(vocab_size=128, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         num_experts=2, num_experts_per_tok=1, max_position_embeddings=64, pad_token_id=0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    train = TrainParams(batch_size=2, learning_rate=1e-2)
    dist = DistributedParams(compute="cluster", zero_stage=2, bf16=False)
    config = resolve_auto(deepspeed_config(dist, train, torch_adam=True), train, dist, world_size=1,
                          hidden_size=cfg.hidden_size)
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    before = [p.detach().clone() for p in model.parameters()]
    ids = torch.randint(1, 128, (2, 16))
    loss = engine(input_ids=ids, labels=ids).loss
    engine.backward(loss)
    engine.step()
    changed = sum(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters()))
    print("RESULT " + json.dumps({
        "loss": float(loss), "global_steps": engine.global_steps, "zero_stage": engine.zero_optimization_stage(),
        "optimizer": type(optimizer).__name__, "basic_optimizer": type(engine.basic_optimizer).__name__,
        "changed": changed, "params": len(before), "seconds": time.time() - t0,
    }))
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow  # ~20 s with the comm op cached in ~/.cache/torch_extensions; ~125 s when gcc builds it first
def test_one_real_deepspeed_zero2_step_on_cpu(tmp_path):
    env = {
        **os.environ,
        "DS_ACCELERATOR": "cpu", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
    }
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", ONE_STEP], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.time() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    print(f"one-step ZeRO-2 subprocess: {elapsed:.1f}s wall, {result}")
    assert result["zero_stage"] == 2 and result["global_steps"] == 1
    assert result["optimizer"] == "DeepSpeedZeroOptimizer" and result["basic_optimizer"] == "AdamW"
    assert result["loss"] > 0 and result["changed"] == result["params"]


def test_cluster_compute_gives_the_trainers_a_deepspeed_config(tmp_path):
    from agentworld.config import SftParams
    from agentworld.training.common import trainer_kwargs

    local = trainer_kwargs(SftParams(), tmp_path, DistributedParams())
    assert "deepspeed" not in local
    cluster = trainer_kwargs(SftParams(), tmp_path, DistributedParams(compute="cluster", zero_stage=3,
                                                                      offload_optimizer="cpu", offload_params="cpu"))
    written = json.loads(Path(cluster["deepspeed"]).read_text())
    assert written["zero_optimization"]["stage"] == 3
    assert written["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert cluster["bf16"] is True and cluster["use_cpu"] is False


def test_stage_command_launches_itself_through_deepspeed_launcher_mocked_cluster(tmp_path, monkeypatch):
    """No cluster here: subprocess.run is replaced to capture the launcher argv that `agentworld
    stage sft` (what `dvc repro` and every Airflow stage task run) starts on the head node."""
    from typer.testing import CliRunner

    from agentworld import cli
    from agentworld.config import parse_params
    from agentworld.profiles import write_profile
    from tests.conftest import SMOKE_PARAMS

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node-a slots=8\nnode-b slots=8\n")
    params_path = tmp_path / "params.yaml"
    write_profile(SMOKE_PARAMS, params_path)
    raw = yaml.safe_load(params_path.read_text())
    raw["distributed"].update(compute="cluster", num_nodes=2, gpus_per_node=8, hostfile=str(hostfile))
    parse_params(raw, "test")
    params_path.write_text(yaml.safe_dump(raw))
    calls = []

    def fake_run(argv, **kwargs):
        calls.append((argv, kwargs))
        report = tmp_path / "reports" / "train" / "sft.json"
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({"stage": "sft", "global_step": 6}))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    monkeypatch.setenv("AGENTWORLD_STAGE_SUMMARY", str(tmp_path / "summary.json"))
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    result = CliRunner().invoke(cli.app, ["stage", "sft", "--params", str(params_path), "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    argv, kwargs = calls[0]
    assert argv[:3] == ["deepspeed", "--hostfile", str(hostfile)]
    assert argv[argv.index("--num_nodes") + 1] == "2" and argv[argv.index("--num_gpus") + 1] == "8"
    assert argv[argv.index("--module") + 1] == "agentworld.cli"
    assert argv[argv.index("--module") + 2: argv.index("--module") + 4] == ["stage", "sft"] and "--root" in argv
    assert load_params(Path(argv[argv.index("--params") + 1])).distributed.compute == "cluster"
    assert json.loads((tmp_path / "summary.json").read_text())["global_step"] == 6
    # On a rank (the launcher sets LOCAL_RANK) the same command trains instead of launching again.
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert not cli._launch_on_cluster("sft", load_params(params_path), params_path, tmp_path) and len(calls) == 1

