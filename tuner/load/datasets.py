"""Requests from a real dataset on disk: ShareGPT JSON/JSONL and Hugging Face `datasets` files.

What a request takes from a conversation is its two lengths, as `vllm bench serve` does for
ShareGPT: the first user turn is the prompt, the first reply sets the output length; pairs with a
prompt or reply under `min_len` tokens are dropped (vLLM's filter). The prompt sent is then made to
that exact length by tuner.load.prompts, so the simulator and real engines see the same requests.

Hugging Face files are read with pyarrow, no hub and no `datasets` package: a `save_to_disk` folder
(Arrow stream files listed in state.json), or .parquet/.arrow/.jsonl/.json files. A row holds a
ShareGPT `conversations`/`conversation` list, an OpenAI-style `messages` list, or the text columns
named by `prompt_field`/`output_field`. Token counts: the model's tokenizer when `tokenizer` is a
local folder (transformers), else the words rule of tuner.load.prompts (one token per word).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.common.errors import SpecError
from tuner.load.trace_formats import utf8_lines
from tuner.spec.workload import Dataset

WHERE = "workload.dataset.path"
_USER = ("human", "user")
_REPLY = ("gpt", "assistant", "chatgpt", "bard", "model")


@dataclass(frozen=True)
class LengthPairs:
    input_len: np.ndarray
    output_len: np.ndarray
    dropped: int  # rows without a usable (prompt, reply) pair or under min_len

    def __len__(self) -> int:
        return len(self.input_len)


def read_dataset(spec: Dataset, path: Path) -> LengthPairs:
    """(input, output) token lengths of every usable row; SpecError naming the file otherwise.

    Cached per file version: every load point of a capacity search draws from the same rows.
    """
    if not path.exists():
        raise SpecError(f"dataset not found: {path}", WHERE, "check the path (relative paths are from the study file)")
    return _read(spec, path.resolve(), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _read(spec: Dataset, path: Path, _mtime_ns: int) -> LengthPairs:
    count = _counter(spec.tokenizer)
    inp: list[int] = []
    out: list[int] = []
    dropped = 0
    for row in _rows(path):
        pair = _pair(row, spec)
        if pair is None:
            dropped += 1
            continue
        a, b = count(pair[0]), (spec.output_len or count(pair[1]))
        if a < spec.min_len or b < spec.min_len:
            dropped += 1
            continue
        inp.append(a)
        out.append(b)
    if not inp:
        raise SpecError(f"dataset {path} has no usable (prompt, reply) pair ({dropped} rows dropped)", WHERE,
                        "give ShareGPT conversations, OpenAI messages, or name prompt_field/output_field")
    return LengthPairs(np.asarray(inp, dtype=np.int64), np.asarray(out, dtype=np.int64), dropped)


def sample(pairs: LengthPairs, total: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`total` pairs in a seeded shuffled order, wrapping around a dataset smaller than `total`."""
    order = rng.permutation(len(pairs))
    idx = order[np.arange(total) % len(pairs)]
    return pairs.input_len[idx], pairs.output_len[idx]


def _counter(tokenizer: str | None) -> Callable[[str], int]:
    if tokenizer is None:
        return lambda text: len(text.split())
    try:
        from transformers import AutoTokenizer  # optional dependency
    except ImportError:
        raise SpecError("dataset.tokenizer needs the transformers package", "workload.dataset.tokenizer",
                        "pip install transformers, or leave tokenizer out to count words") from None
    if not Path(tokenizer).is_dir():
        raise SpecError(f"tokenizer folder not found: {tokenizer}", "workload.dataset.tokenizer",
                        "give a local tokenizer folder (no hub access at run time)")
    tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    return lambda text: len(tok(text, add_special_tokens=False).input_ids)


def _pair(row: Any, spec: Dataset) -> tuple[str, str] | None:
    """(prompt, reply) text of one row, or None when it has none."""
    if not isinstance(row, dict):
        return None
    if spec.prompt_field is not None:
        p, r = row.get(spec.prompt_field), row.get(spec.output_field or "")
        return (p, r if isinstance(r, str) else "") if isinstance(p, str) else None
    turns = row.get("conversations", row.get("conversation"))
    if isinstance(turns, list):
        return _first_exchange(turns, "from", "value")
    messages = row.get("messages")
    if isinstance(messages, list):
        return _first_exchange(messages, "role", "content")
    return None


def _first_exchange(turns: list[Any], who: str, text: str) -> tuple[str, str] | None:
    """The first user turn and the reply right after it."""
    for i, t in enumerate(turns[:-1]):
        nxt = turns[i + 1]
        if (isinstance(t, dict) and isinstance(nxt, dict) and str(t.get(who, "")).lower() in _USER
                and str(nxt.get(who, "")).lower() in _REPLY and isinstance(t.get(text), str)
                and isinstance(nxt.get(text), str)):
            return t[text], nxt[text]
    return None


def _rows(path: Path) -> Iterator[Any]:
    if path.is_dir():
        yield from _hf_folder(path)
        return
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        yield from _parquet(path)
    elif suffix == ".arrow":
        yield from _arrow(path)
    elif suffix in (".jsonl", ".ndjson"):
        yield from _jsonl(path)
    elif suffix == ".json":
        yield from _json(path)
    else:
        raise SpecError(f"unknown dataset format {suffix!r}", WHERE,
                        "give a ShareGPT .json/.jsonl file, a .parquet/.arrow file or a save_to_disk folder")


def _text(path: Path) -> str:
    """UTF-8 (a leading BOM dropped); other encodings are bad input, not a crash."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"dataset {path} is not UTF-8 text (byte {exc.start}: {exc.reason})", WHERE,
                        "save the file as UTF-8") from None


def _json(path: Path) -> Iterable[Any]:
    text = _text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return _jsonl(path)  # a .json file written one object per line
    except RecursionError:
        raise SpecError(f"dataset {path} nests JSON too deeply to read", WHERE,
                        "give a list of conversations (or one JSON object per line)") from None
    if isinstance(data, dict):
        data = data.get("data", data.get("rows", [data]))
    if not isinstance(data, list):
        raise SpecError(f"dataset {path} is not a JSON list of rows", WHERE, "give a list of conversations")
    return data


def _jsonl(path: Path) -> Iterator[Any]:
    with path.open(encoding="utf-8-sig") as f:
        for lineno, line in enumerate(utf8_lines(f, path), 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply to read"
                raise SpecError(f"bad JSON in dataset {path}: {why}", f"{path}:{lineno}",
                                "one JSON object per line") from None


def _parquet(path: Path) -> list[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise SpecError(f"cannot read Parquet dataset {path}: {exc}", WHERE, "give a valid Parquet file") from None


def _arrow(path: Path) -> list[Any]:
    """An Arrow IPC file: the stream format `datasets` writes, or the random-access file format."""
    import pyarrow as pa

    for opener in (pa.ipc.open_stream, pa.ipc.open_file):
        try:
            with pa.memory_map(str(path)) as src:
                return opener(src).read_all().to_pylist()
        except (pa.ArrowException, OSError):
            continue
    raise SpecError(f"cannot read Arrow dataset {path}", WHERE, "give an Arrow file written by datasets or pyarrow")


def _hf_folder(path: Path) -> Iterator[Any]:
    """A `Dataset.save_to_disk` folder (state.json lists the Arrow files), or a folder of data files."""
    state = path / "state.json"
    if state.exists():
        try:
            files = [path / f["filename"] for f in json.loads(state.read_text())["_data_files"]]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise SpecError(f"{state} is not a datasets state file", WHERE, "give a folder written by save_to_disk") from None
    else:
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".arrow", ".parquet", ".jsonl", ".json")
                       and p.name not in ("dataset_info.json", "dataset_dict.json"))
    if not files:
        raise SpecError(f"no data files in {path}", WHERE, "give a save_to_disk folder or a folder of .parquet/.jsonl")
    for f in files:
        yield from _rows(f)
