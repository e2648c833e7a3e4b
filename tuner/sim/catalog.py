"""Catalogues of model shapes and GPUs the simulator knows, with where each number comes from.

Shapes are the public `config.json` of each model on the Hugging Face Hub (fields named as there).
GPU figures are the vendors' datasheets (dense BF16 tensor throughput, without sparsity; HBM
bandwidth; interconnect), except `mem_gib`, which is what `torch.cuda.mem_get_info` reports as the
device total (H200: read from the vLLM logs in benchmarks/reference/; the others: the commonly
reported totals for those boards).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.common.errors import SpecError


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The numbers that decide a transformer's memory and FLOPs per token."""

    name: str
    hf_id: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # dense MLP width (per expert for MoE: moe_intermediate_size)
    vocab: int
    tied_embeddings: bool
    max_position: int
    experts: int = 0  # MoE: routed experts per layer (0 = dense)
    experts_per_token: int = 0
    source: str = ""

    @property
    def attn_params(self) -> int:
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        return self.layers * (q + kv + o)

    @property
    def layer_params(self) -> int:
        """One dense decoder layer (attention + MLP): the size of a draft layer at the target's width."""
        return (self.attn_params + self.mlp_params_per_expert) // self.layers

    @property
    def linear_params(self) -> int:
        """Parameters of the decoder layers' linear projections: what FP8 weight quantisation converts
        (vLLM's fp8 leaves the embedding and lm_head in the checkpoint dtype)."""
        return self.attn_params + max(self.experts, 1) * self.mlp_params_per_expert

    @property
    def mlp_params_per_expert(self) -> int:
        return self.layers * 3 * self.hidden * self.intermediate

    @property
    def embed_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def total_params(self) -> int:
        n_mlp = max(self.experts, 1)
        router = self.layers * self.hidden * self.experts
        return self.attn_params + n_mlp * self.mlp_params_per_expert + router + self.embed_params

    @property
    def active_params_per_token(self) -> int:
        """Parameters multiplied per token in the layers (embedding lookup excluded, lm_head counted apart)."""
        k = self.experts_per_token if self.experts else 1
        return self.attn_params + k * self.mlp_params_per_expert

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """K and V of every layer for one token."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


@dataclass(frozen=True, slots=True)
class GPU:
    name: str
    bf16_tflops: float  # dense tensor-core peak
    hbm_tb_s: float  # memory bandwidth, TB/s (1e12 B/s)
    mem_gib: float  # device total as torch reports it
    link_gb_s: float  # per-direction GPU-GPU bandwidth for all-reduce (NVLink, or PCIe)
    large: bool  # vLLM's "large GPU" defaults (>= 70 GiB and not A100)
    source: str = ""
    fp8_tflops: float = 0.0  # dense FP8 tensor-core peak; 0 = no FP8 tensor cores (weight-only FP8 there)


def _qwen3(name: str, hf: str, hidden: int, layers: int, heads: int, inter: int, tied: bool) -> ModelShape:
    return ModelShape(
        name=name, hf_id=hf, hidden=hidden, layers=layers, heads=heads, kv_heads=8, head_dim=128,
        intermediate=inter, vocab=151936, tied_embeddings=tied, max_position=40960,
        source=f"https://huggingface.co/{hf}/blob/main/config.json",
    )


_SHAPES: tuple[ModelShape, ...] = (
    _qwen3("qwen3-0.6b", "Qwen/Qwen3-0.6B", 1024, 28, 16, 3072, True),
    _qwen3("qwen3-1.7b", "Qwen/Qwen3-1.7B", 2048, 28, 16, 6144, True),
    _qwen3("qwen3-4b", "Qwen/Qwen3-4B", 2560, 36, 32, 9728, True),
    _qwen3("qwen3-8b", "Qwen/Qwen3-8B", 4096, 36, 32, 12288, False),
    _qwen3("qwen3-14b", "Qwen/Qwen3-14B", 5120, 40, 40, 17408, False),
    _qwen3("qwen3-32b", "Qwen/Qwen3-32B", 5120, 64, 64, 25600, False),
    ModelShape(
        name="qwen3-30b-a3b", hf_id="Qwen/Qwen3-30B-A3B", hidden=2048, layers=48, heads=32, kv_heads=4,
        head_dim=128, intermediate=768, vocab=151936, tied_embeddings=False, max_position=40960,
        experts=128, experts_per_token=8,
        source="https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
    ),
    ModelShape(
        name="llama-3.1-8b", hf_id="meta-llama/Llama-3.1-8B-Instruct", hidden=4096, layers=32, heads=32,
        kv_heads=8, head_dim=128, intermediate=14336, vocab=128256, tied_embeddings=False,
        max_position=131072,
        source="https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",
    ),
    ModelShape(
        name="llama-3.1-70b", hf_id="meta-llama/Llama-3.1-70B-Instruct", hidden=8192, layers=80, heads=64,
        kv_heads=8, head_dim=128, intermediate=28672, vocab=128256, tied_embeddings=False,
        max_position=131072,
        source="https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct/blob/main/config.json",
    ),
)

_GPUS: tuple[GPU, ...] = (
    GPU("H200", 989.0, 4.8, 139.8, 450.0, True,
        "NVIDIA H200 datasheet (SXM: 989 TFLOPS BF16 dense, 4.8 TB/s, NVLink 900 GB/s bidirectional); "
        "139.8 GiB total from the vLLM 0.26 logs in benchmarks/reference/h200-vllm-0.26.0; FP8 1,979 TFLOPS dense",
        fp8_tflops=1979.0),
    GPU("H100", 989.0, 3.35, 79.19, 450.0, True,
        "NVIDIA H100 SXM5 80GB datasheet (989 TFLOPS BF16 dense, 3.35 TB/s, NVLink 900 GB/s bidirectional; "
        "FP8 1,979 TFLOPS dense)", fp8_tflops=1979.0),
    GPU("A100", 312.0, 2.039, 79.15, 300.0, False,
        "NVIDIA A100 80GB SXM datasheet (312 TFLOPS BF16 dense, 2,039 GB/s, NVLink 600 GB/s bidirectional)"),
    GPU("L40S", 362.05, 0.864, 44.39, 32.0, False,
        "NVIDIA L40S datasheet (362.05 TFLOPS BF16 dense, 864 GB/s GDDR6, PCIe Gen4 x16 64 GB/s bidirectional; "
        "FP8 733 TFLOPS dense)", fp8_tflops=733.0),
)

_GPU_ALIASES = {
    "h200": "H200", "h200-sxm": "H200", "h200_sxm": "H200", "h100": "H100", "h100-sxm": "H100",
    "h100_sxm": "H100", "h100-80gb": "H100", "a100": "A100", "a100-80gb": "A100", "a100_80gb": "A100",
    "l40s": "L40S",
}


def known_shapes() -> list[str]:
    return [s.name for s in _SHAPES]


def known_gpus() -> list[str]:
    return [g.name for g in _GPUS]


def get_shape(name: str) -> ModelShape:
    for s in _SHAPES:
        if s.name == name.lower():
            return s
    raise SpecError(f"unknown model shape {name!r}", "sim.shape", f"use one of {known_shapes()}")


def get_gpu(name: str) -> GPU:
    key = _GPU_ALIASES.get(name.lower(), name)
    for g in _GPUS:
        if g.name == key:
            return g
    raise SpecError(f"unknown GPU {name!r}", "sim.gpu", f"use one of {known_gpus()}")


def shape_for(model_name: str) -> str:
    """Map a model name or path ("Qwen/Qwen3-8B", "qwen3-8b-dummy", "/models/Llama-3.1-8B") to a shape."""
    base = model_name.rstrip("/").split("/")[-1].lower().replace("_", "-")
    base = base.replace("meta-llama-", "llama-").replace("llama3", "llama-3")
    for suffix in ("-instruct", "-base", "-fp8", "-dummy", "-awq"):
        base = base.replace(suffix, "")
    base = base.replace("llama-3-1", "llama-3.1")
    names = known_shapes()
    if base in names:
        return base
    # longest known name that the model name starts with ("qwen3-8b-chat" -> "qwen3-8b")
    for name in sorted(names, key=len, reverse=True):
        if base.startswith(name) and not base[len(name):len(name) + 1].isdigit():
            return name
    raise SpecError(
        f"no simulator shape for model {model_name!r}",
        "model.name",
        f"set sim shape explicitly to one of {names}",
    )
