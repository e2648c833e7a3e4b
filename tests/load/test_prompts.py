"""Prompts of exact length: words (the sim's rule), token ids, and a real tokenizer when one is here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.common.errors import SpecError
from tuner.load.prompts import PromptBuilder
from tuner.load.records import Request

TINY = Path(__file__).parents[2] / ".cache" / "tiny-qwen3"  # made by scripts/setup-vllm-cpu


def req(i: int, n: int, group: int = -1, plen: int = 0) -> Request:
    return Request(id=i, arrival_s=0.0, input_len=n, output_len=1, prefix_group=group, prefix_len=plen)


def test_words_and_token_ids_are_exact_and_distinct() -> None:
    b = PromptBuilder("words")
    for n in (1, 5, 300, 70_000):
        assert len(b.build(req(n, n)).split()) == n  # type: ignore[union-attr]
    assert b.build(req(1, 50)) != b.build(req(2, 50))
    ids = PromptBuilder("token_ids").build(req(3, 123))
    assert isinstance(ids, list) and len(ids) == 123 and all(1000 <= x < 20000 for x in ids)


def test_shared_prefix_is_exactly_the_prefix() -> None:
    b = PromptBuilder("words")
    a, c = (b.build(req(i, 300, group=4, plen=200)).split() for i in (1, 2))  # type: ignore[union-attr]
    assert a[:200] == c[:200] and a[200:] != c[200:]
    other = b.build(req(3, 300, group=5, plen=200)).split()  # type: ignore[union-attr]
    assert other[:200] != a[:200]


def test_tokenizer_mode_without_a_tokenizer_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="needs a tokenizer"):
        PromptBuilder("tokenizer", None)


@pytest.mark.ci_required
def test_tokenizer_prompts_encode_to_exact_lengths() -> None:
    pytest.importorskip("transformers")  # the dev extra has it
    if not TINY.exists():
        pytest.skip("no local tokenizer (scripts/setup-vllm-cpu makes one)")
    b = PromptBuilder("tokenizer", str(TINY))
    tok = b._tok
    for n in (1, 7, 100, 1500):
        assert len(tok.encode(b.build(req(n, n)), add_special_tokens=False)) == n
    e1, e2 = (tok.encode(b.build(req(i, 300, group=0, plen=200)), add_special_tokens=False) for i in (1, 2))
    assert len(e1) == len(e2) == 300 and e1[:200] == e2[:200] and e1[200:] != e2[200:]
    assert len(tok.encode(b.build(req(3, 150, group=0, plen=200)), add_special_tokens=False)) == 150
