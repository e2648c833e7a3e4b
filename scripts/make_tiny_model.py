"""Build a tiny Qwen3 model and its tokenizer locally, for real vLLM runs without a model hub.

Run with the vLLM environment's interpreter (it needs torch, transformers, tokenizers):
    .venv-vllm-cpu/bin/python scripts/make_tiny_model.py .cache/tiny-qwen3

A byte-level BPE tokenizer (about 2,000 tokens) is trained on the standard library's own .py files,
saved with a chat template, and a 2-layer Qwen3 (hidden 256, 4 heads, 2 KV heads, head_dim 64) with
random bf16 weights is saved as safetensors. The model's vocabulary equals the tokenizer's size
rounded up to 64 (padding ids decode to nothing, so generated text stays readable). Deterministic
for a given seed and Python version; about 3 MB.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from collections.abc import Iterator
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus(limit_bytes: int = 4_000_000) -> Iterator[str]:
    """Text to train on: the standard library's sources, in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    total = 0
    for path in sorted(root.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        total += len(text)
        yield text
        if total > limit_bytes:
            return


def build_tokenizer(out: Path, vocab_size: int) -> tuple[int, int, int]:
    """Train and save the tokenizer; (size, eos id, pad id)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
        unk_token=None, model_max_length=32768,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return len(fast), fast.convert_tokens_to_ids("<|im_end|>"), fast.convert_tokens_to_ids("<|endoftext|>")


def build_model(out: Path, vocab: int, eos: int, pad: int, seed: int) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=256, intermediate_size=768, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=32768,
        rope_theta=1_000_000.0, tie_word_embeddings=True, dtype="bfloat16",
        eos_token_id=eos, pad_token_id=pad,
    )
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--vocab-size", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    n_tokens, eos, pad = build_tokenizer(a.out, a.vocab_size)
    vocab = (n_tokens + 63) // 64 * 64
    build_model(a.out, vocab, eos, pad, a.seed)
    cfg = json.loads((a.out / "config.json").read_text())
    print(f"tiny Qwen3 model at {a.out} (tokenizer {n_tokens} tokens, vocab {cfg['vocab_size']})")


if __name__ == "__main__":
    main()
