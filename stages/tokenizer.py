"""Stage `tokenizer`: the world model's vocabulary, an artifact of its own (`models/tokenizer/`).

From scratch (`model.source: scratch`) a byte-level BPE of `model.vocab_size` is trained on what
the model will read: the CPT documents (training episodes as streams, mixed with the corpora),
the system prompts and the rationales. A pretrained base (`local`, `gguf`) brings its own
tokenizer, which is copied here so every later stage reads the same place. The cpt stage and a
from-scratch SFT (`sft.init: scratch`, the SFT-only ablation) build their model on it, so the
vocabulary is trained once per data version and DVC reruns it only when its inputs change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.data.build import load_examples
from agentworld.models.factory import load_gguf_tokenizer, load_local_tokenizer
from agentworld.models.tokenizer import train_tokenizer
from agentworld.tracking.runs import file_md5, stage_run
from agentworld.training.cpt import tokenizer_texts
from stages.cpt import cpt_documents
from stages.paths import StagePaths
from stages.training import StageInputs, tokenizer_md5


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    if not paths.sft_train.exists():
        raise FileNotFoundError(f"{paths.sft_train}: missing; run the build stage first (agentworld stage build)")
    inputs = StageInputs(load_examples(paths.sft_train), [], file_md5(paths.sft_train))
    with stage_run("tokenizer", params, params.model, parent_run_id, root=root):
        texts: list[str] = []
        if params.model.source == "scratch":
            texts = tokenizer_texts(inputs.train, cpt_documents(params, paths, inputs))
            tokenizer = train_tokenizer(texts, params.model.vocab_size)
        elif params.model.source == "local":
            tokenizer = load_local_tokenizer(params.model.path or "")
        else:
            tokenizer = load_gguf_tokenizer(params.model.path)
        paths.tokenizer.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(paths.tokenizer)
        summary = {"source": params.model.source, "vocab_size": len(tokenizer), "texts": len(texts),
                   "characters": sum(len(t) for t in texts),
                   "tokenizer_md5": tokenizer_md5(paths)}
        mlflow.log_metrics({"vocab_size": summary["vocab_size"], "texts": summary["texts"]})
        mlflow.set_tag("tokenizer_md5", summary["tokenizer_md5"])
    paths.write_report("tokenizer.json", summary)
    return summary
