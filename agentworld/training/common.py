"""What every training stage shares: Trainer arguments (CPU or DeepSpeed), resumable
checkpoint folders, and the result record a stage reports.

One function builds the `TrainingArguments` keywords for CPT, SFT and GRPO alike, so the switch
between this CPU and a GPU cluster (`distributed.compute: cluster` -> DeepSpeed ZeRO config
from params.yaml) lives in one place.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mlflow
import torch
from transformers.trainer_utils import get_last_checkpoint

from agentworld.config import DistributedParams, TrainParams
from agentworld.data.io import claim_directory
from agentworld.training.distributed import deepspeed_config, trainer_overrides, write_deepspeed_config

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a training stage reports: budget reached, losses, held-out metrics, and whether it resumed."""

    global_step: int
    train_loss: float
    train_runtime_s: float
    tokens_seen: int
    resumed_from: str | None
    loss_curve: list[tuple[int, float]]
    eval_metrics: dict[str, float] = field(default_factory=dict)
    #: (step, training seconds, token F1, exact match) on held-out turns, when measured.
    held_out_curve: list[tuple[int, float, float, float]] | None = None

    @classmethod
    def from_trainer(cls, trainer: Any, output: Any, resumed_from: str | None, eval_metrics: dict[str, float],
                     curve: list[tuple[int, float]] | None = None) -> "TrainResult":
        """From a finished `Trainer` and the `TrainOutput` its `train()` returned."""
        return cls(
            global_step=trainer.state.global_step,
            train_loss=float(output.training_loss),
            train_runtime_s=float(output.metrics.get("train_runtime", 0.0)),
            tokens_seen=int(getattr(trainer.state, "num_input_tokens_seen", 0) or 0),
            resumed_from=resumed_from,
            loss_curve=curve if curve is not None else loss_curve(trainer.state.log_history),
            eval_metrics=eval_metrics,
        )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("loss_curve")
        out.pop("held_out_curve")
        return out


def trainer_kwargs(stage: TrainParams, output_dir: Path, dist: DistributedParams) -> dict[str, Any]:
    """`TrainingArguments` keywords of one stage; DeepSpeed ZeRO when `compute: cluster`."""
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir),
        max_steps=stage.max_steps,
        per_device_train_batch_size=stage.batch_size,
        per_device_eval_batch_size=stage.batch_size,
        learning_rate=stage.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=int(stage.warmup_ratio * stage.max_steps),
        weight_decay=stage.weight_decay,
        logging_steps=stage.logging_steps,
        save_steps=stage.save_steps,
        save_total_limit=2,
        seed=stage.seed,
        data_seed=stage.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        fp16=False,
        dataloader_num_workers=0,
        report_to=["mlflow"] if mlflow.active_run() else [],
        disable_tqdm=False,
        save_only_model=False,
        include_num_input_tokens_seen="non_padding",
    )
    if dist.compute == "cluster":
        config_path = write_deepspeed_config(output_dir / "deepspeed.json", deepspeed_config(dist, stage))
        kwargs.update(trainer_overrides(dist, config_path))
    return kwargs


def prepare_checkpoints(checkpoints: Path, fingerprint: dict[str, Any], max_steps: int) -> str | None:
    """Keep checkpoints only when they belong to this exact data and configuration; return the
    latest one to resume from (None: start fresh).

    A checkpoint at `max_steps` is a finished run whose outputs DVC has since removed: the
    Trainer would take one more step from it, so the stage starts fresh (same seed, same model).
    """
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.exists() else None
    finished = last is not None and int(Path(last).name.rsplit("-", 1)[1]) >= max_steps
    existed = checkpoints.exists()
    if not claim_directory(checkpoints, fingerprint, discard=finished) and existed:
        log.info("checkpoints in %s belong to other data or settings, or to a finished run; starting fresh", checkpoints)
    return get_last_checkpoint(str(checkpoints))


def loss_curve(log_history: list[dict[str, Any]]) -> list[tuple[int, float]]:
    return [(int(e["step"]), float(e["loss"])) for e in log_history if "loss" in e and "step" in e]



def set_threads(stage: TrainParams) -> None:
    torch.set_num_threads(stage.threads)
