"""Prompts of an exact token length, three ways (workload `prompt:`):

- words: N whitespace-separated words, the sim's counting rule (short syllables, so real tokenizers
  land near N too);
- token_ids: a list of N token ids, sent as the prompt (vLLM and SGLang accept it on /v1/completions);
- tokenizer: text that the model's own tokenizer (transformers, optional) encodes to exactly N tokens.

Requests of one prefix group share their first `prefix_len` tokens; everything else differs per
request, so prefix caching only helps where the workload says it should.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from tuner.common.errors import SpecError
from tuner.load.records import Request

PromptMode = Literal["words", "token_ids", "tokenizer"]
_POOL = 1 << 16
_SYLLABLES = [c + v for c in "bdfghklmnprstvz" for v in "aeiou"]  # 75 short words
_TOKEN_LOW, _TOKEN_HIGH = 1000, 20000  # ids clear of the special tokens at either end of a vocabulary


def _offset(key: int, salt: int) -> int:
    """A well-spread start position in the pool for a request or prefix group."""
    return int((key * 0x9E3779B1 + salt * 0x85EBCA77) % _POOL)


class PromptBuilder:
    def __init__(self, mode: PromptMode = "words", tokenizer: str | None = None, seed: int = 0) -> None:
        self.mode = mode
        self.run_salt = 0  # bumped per load run so later runs never hit an earlier run's prefix cache
        rng = np.random.default_rng(seed)
        ids = rng.integers(0, len(_SYLLABLES), 2 * _POOL)
        self._words = [_SYLLABLES[i] for i in ids]
        self._ids = rng.integers(_TOKEN_LOW, _TOKEN_HIGH, 2 * _POOL).tolist()
        self._tok: Any = None
        self._heads: dict[tuple[int, int], str] = {}
        if mode == "tokenizer":
            self._tok = _load_tokenizer(tokenizer)

    def build(self, req: Request) -> str | list[int]:
        if self.mode == "words":
            return " ".join(self._parts(self._words, req, req.input_len))
        if self.mode == "token_ids":
            return self._parts(self._ids, req, req.input_len)
        n = req.input_len
        p = min(req.prefix_len, n) if req.prefix_group >= 0 else 0
        head = ""
        if p:  # the shared prefix is exact in tokens too, built once per group
            head = self._heads.get((req.prefix_group, p), "")
            if not head:
                words = _take(self._words, _offset(req.prefix_group, 1), 2 * p + 16)
                head = self._heads[(req.prefix_group, p)] = _exact_text(self._tok, words, p)
            if p == n:
                return head
        words = _take(self._words, _offset(req.id, 2 + self.run_salt), 2 * (n - p) + 16)  # syllables: 1-2 tokens each
        return _exact_text(self._tok, words, n, head)

    def _parts(self, pool: list, req: Request, n: int) -> list:
        p = min(req.prefix_len, n) if req.prefix_group >= 0 else 0
        out = _take(pool, _offset(req.prefix_group, 1), p) if p else []
        return out + _take(pool, _offset(req.id, 2 + self.run_salt), n - p)


def _take(pool: list, start: int, n: int) -> list:
    if n <= len(pool) - start:
        return pool[start:start + n]
    reps = n // len(pool) + 2
    return (pool * reps)[start:start + n]


def _load_tokenizer(name: str | None) -> Any:
    if not name:
        raise SpecError("prompt mode 'tokenizer' needs a tokenizer", "model.tokenizer",
                        "give model.tokenizer (or --tokenizer), or use prompt: words / token_ids")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise SpecError("prompt mode 'tokenizer' needs the transformers package", "workload.prompt",
                        "pip install transformers, or use prompt: token_ids") from None
    return AutoTokenizer.from_pretrained(name)


def _exact_text(tok: Any, words: list[str], n: int, head: str = "") -> str:
    """`head` plus words whose text the tokenizer encodes to exactly n tokens: change the word count by
    the token difference (a few rounds); failing that, cut a longer encoding near n and check it."""
    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False)

    lead = head + " " if head else ""
    k, longer = max(1, n - len(encode(head))) if head else n, None
    text = head
    for _ in range(8):
        text = lead + " ".join(words[:k])
        enc = encode(text)
        if len(enc) == n:
            return text
        if len(enc) > n:
            longer = enc
        k = max(1, min(len(words), k + n - len(enc)))
    if longer is not None:
        for cut in (n, n + 1, n - 1, n + 2):
            cand = tok.decode(longer[:cut], skip_special_tokens=True)
            if len(encode(cand)) == n:
                return cand
    return text  # no exact text found; the server-reported usage stays the truth
