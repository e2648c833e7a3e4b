"""LOCAL: a dummy-weight model folder of another catalog shape, from the recipe's Qwen3-8B folder.

Copies `.gpu/model` (config.json + the one-word-per-token tokenizer of ../shared/gpu/make_model.py) and
rewrites the config's sizes from tuner.sim.catalog, so the simulator and the engine serve the same shape.
Only Qwen3 dense shapes (same tokenizer and vocabulary): a different vocabulary would not match the tokenizer.

    python scripts/h200/make_shape_model.py qwen3-14b .gpu/model .gpu/model-qwen3-14b
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tuner.sim.catalog import get_shape


def main(shape_name: str, src: Path, dest: Path) -> int:
    s = get_shape(shape_name)
    if not s.name.startswith("qwen3-") or s.experts:
        print(f"error: {shape_name}: only dense Qwen3 shapes share the recipe's tokenizer", file=sys.stderr)
        return 2
    shutil.copytree(src, dest, dirs_exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(hidden_size=s.hidden, num_hidden_layers=s.layers, max_window_layers=s.layers,
               num_attention_heads=s.heads, num_key_value_heads=s.kv_heads, head_dim=s.head_dim,
               intermediate_size=s.intermediate, vocab_size=s.vocab, tie_word_embeddings=s.tied_embeddings)
    (dest / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    print(f"{dest}: {s.name} ({s.layers} layers, hidden {s.hidden}, {s.heads}/{s.kv_heads} heads)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])))
