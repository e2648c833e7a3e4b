"""The levers that change what a model outputs: opt-in guard, labels, and structured engine args.

Three classes of knob can change outputs: FP8 weights (quantisation), an FP8 KV cache, and
speculative decoding (lossless in principle, but a broken draft config is not). A study searches a
class only when it lists it in `allow:`; otherwise those params stay at the engine's baseline (left
out of the space) and a fixed arg that sets one is bad input. Every config carries the classes it
uses (`labels`), so trials, MLflow runs, report rows and promoted configs say so.

Structured args: space params named ``speculative_config.method`` etc. are fields of one engine
argument; `fold` turns them into ``speculative_config: {...}`` (one JSON value on the command line).
A categorical value "none" means the flag is left out (the engine's own default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.common.errors import SpecError
from tuner.spec.space_file import Param
from tuner.spec.study import Study

NONE = "none"  # categorical sentinel: leave the flag out
OUTPUT_CLASSES = ("fp8_weights", "fp8_kv_cache", "speculative_decoding")
# Label a config by what it sets, whatever space it came from (fixed args, promoted configs, resumes).
_NOT_SET = (None, "", NONE, "auto", "None")


def labels(args: Mapping[str, Any]) -> list[str]:
    """Output-changing classes a config uses (vLLM and SGLang names: both engines spell these alike)."""
    out: set[str] = set()
    q = args.get("quantization")
    if q not in _NOT_SET and str(q) not in ("unquant",):
        out.add("fp8_weights" if "fp8" in str(q) else f"quantization_{q}")
    kv = args.get("kv_cache_dtype")
    if kv not in _NOT_SET and str(kv) not in ("bf16", "bfloat16"):
        out.add("fp8_kv_cache" if "fp8" in str(kv) else f"kv_cache_{kv}")
    spec = args.get("speculative_config")
    if isinstance(spec, Mapping) and spec.get("method") not in _NOT_SET:
        out.add("speculative_decoding")
    elif isinstance(spec, str) and spec not in _NOT_SET:
        out.add("speculative_decoding")
    if args.get("speculative_algorithm") not in _NOT_SET:
        out.add("speculative_decoding")
    if args.get("speculative_config.method") not in _NOT_SET:
        out.add("speculative_decoding")
    return sorted(out)


def label_text(args: Mapping[str, Any]) -> str:
    """One string for tables and tags: "fp8_kv_cache,fp8_weights", or "baseline-exact" when none."""
    return ",".join(labels(args)) or "none"


def guard(params: dict[str, Param], fixed: Mapping[str, Any], study: Study, where: str) -> dict[str, str]:
    """Drop output-changing params the study does not allow, and choices it cannot serve (in place).

    Returns {param: why it is not searched} for the space's description."""
    allowed = set(study.allow)
    pinned: dict[str, str] = {}
    bad = [c for c in labels(fixed) if c not in allowed]
    if bad:
        raise SpecError(f"fixed engine args change outputs ({', '.join(bad)}) but the study does not allow it",
                        f"{where}.fixed", f"add allow: [{', '.join(bad)}] to the study, or drop those fixed args")
    methods = study.speculative.methods
    for name in list(params):
        p = params[name]
        if p.output_class and p.output_class not in allowed:
            pinned[name] = f"changes outputs ({p.output_class}); add it to the study's allow: to search it"
            del params[name]
            continue
        if p.choice_needs and p.choices:
            gone: list[Any] = []  # a one-choice param needing nothing is pinned too (it was an UnboundLocalError)
            keep = [c for c in p.choices if str(c) not in p.choice_needs or p.choice_needs[str(c)] in methods]
            if keep != list(p.choices):
                gone = [c for c in p.choices if c not in keep]
                params[name] = p.model_copy(update={
                    "choices": keep, "choice_needs": {c: m for c, m in p.choice_needs.items() if c in keep}})
                pinned[f"{name}={gone}"] = "needs a method the study does not name (speculative.methods)"
            if len(keep) <= 1:
                pinned[name] = pinned.pop(f"{name}={gone}", "only one choice left")
                del params[name]
    # params that only a pinned param could activate (a removed method's token count...) go too
    for name in list(params):
        when = params[name].when or {}
        if any(k in pinned and k not in params for k in when):
            pinned[name] = f"only used with {', '.join(k for k in when if k in pinned)}"
            del params[name]
    return pinned


def output_check(study: Study, args: Mapping[str, Any]) -> str:
    """The output check's verdict for a config, as every record states it (never "passed" unless run).

    With random weights (the simulator, or load_format: dummy) agreement with the baseline means
    nothing, so the check is "not_applicable", whatever the study asks."""
    used = labels(args)
    if not used:
        return "not_needed"
    if study.engine_names == ["sim"] or (study.model.load_format or "") == "dummy":
        return "not_applicable: random weights"
    if study.output_check == "off":
        return "not_run: output_check is off"
    return "not_run: the greedy agreement check against the baseline is not implemented yet"


def derived(context: Mapping[str, Any]) -> dict[str, Any]:
    """Quantities constraints may name that no single param holds.

    decode_width: tokens each running sequence feeds the model per decode step (1 + draft tokens), the
    factor by which CUDA-graph capture and the token budget must cover max_num_seqs."""
    width = 1
    method = context.get("speculative_config.method")
    if method not in _NOT_SET:
        width = 1 + int(context.get("speculative_config.num_speculative_tokens") or 1)
    algo = context.get("speculative_algorithm")
    if algo not in _NOT_SET:
        width = max(width, int(context.get("speculative_num_draft_tokens") or 1))
    return {"decode_width": width}


DERIVED = ("decode_width",)


def fold(args: Mapping[str, Any], params: Mapping[str, Param], study: Study) -> dict[str, Any]:
    """Sampled values -> engine args: "none" left out, dotted names folded into one dict per arg,
    and the study's draft model filled in where a chosen method needs it."""
    out: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in args.items():
        if isinstance(value, str) and value == NONE:
            if "." in name and name.endswith(".method"):
                nested[name.split(".", 1)[0]] = {"__none__": True}
            continue
        p = params.get(name)
        if p is not None and p.draft_arg and p.choice_needs.get(str(value)):
            method = study.speculative.methods.get(p.choice_needs[str(value)])  # type: ignore[call-overload]
            if method is not None and method.draft_model:
                _put(out, nested, p.draft_arg, method.draft_model)
        _put(out, nested, name, value)
    for head, fields in nested.items():
        if fields.pop("__none__", False):
            continue  # method "none": the whole structured arg is left out
        if fields:
            out[head] = fields
    return out


def unfold(args: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """Engine args -> also the sampled names: a structured arg (`speculative_config` as one dict) gives its fields
    that are params as `speculative_config.method`, ... (the inverse of `fold` for what was sampled). Why: a model
    that reads configs by param name (the feasibility classifier) otherwise sees every speculative config as the
    defaults."""
    out = dict(args)
    for k, v in args.items():
        if isinstance(v, dict):
            out.update({f"{k}.{f}": x for f, x in v.items() if f"{k}.{f}" in params})
    return out


def _put(out: dict[str, Any], nested: dict[str, dict[str, Any]], name: str, value: Any) -> None:
    if "." in name:
        head, field = name.split(".", 1)
        nested.setdefault(head, {})[field] = value
    else:
        out[name] = value


LAYOUT_ARGS = ("tensor_parallel_size", "data_parallel_size", "tp_size", "dp_size")
# args that change how much memory a config needs without being "larger" (OOM rules match on them)
MEMORY_CONTEXT = ("kv_cache_dtype", "quantization", "speculative_config", "speculative_algorithm", *LAYOUT_ARGS)
# draft lengths (vLLM's speculative_config field, SGLang's args): a larger one only needs more memory (OOM rules
# hold them as sizes, like max_num_seqs, not as context)
DRAFT_SIZES = ("num_speculative_tokens", "speculative_num_draft_tokens", "speculative_num_steps")


def gpus(args: Mapping[str, Any], model_tp: int = 1) -> int:
    """GPUs one trial occupies: tensor x data parallel (vLLM or SGLang names), else the study's TP."""
    tp = args.get("tensor_parallel_size", args.get("tp_size")) or model_tp
    dp = args.get("data_parallel_size", args.get("dp_size")) or 1
    return int(tp) * int(dp)
