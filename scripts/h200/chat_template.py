"""LOCAL: give the dummy Qwen3-8B-shaped model (`.gpu/model`, made by ../shared/gpu/make_model.py) a chat
template, so the promoted app's smoke test (a streaming chat completion) gets an answer from vLLM/SGLang.

Without one, vLLM >= 0.2x refuses /v1/chat/completions ("default chat template is no longer allowed");
the trials only use /v1/completions and never needed it. ChatML, as the real Qwen3 tokenizer writes it.

    python scripts/h200/chat_template.py .gpu/model
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/h200/chat_template.py MODEL_DIR", file=sys.stderr)
        return 2
    path = Path(argv[0]) / "tokenizer_config.json"
    if not path.is_file():
        print(f"error: {path} not found; make the model first (python .gpu/recipe/make_model.py {argv[0]})",
              file=sys.stderr)
        return 2
    config = json.loads(path.read_text())
    config["chat_template"] = CHATML
    path.write_text(json.dumps(config, indent=2))
    print(f"chat template written into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
