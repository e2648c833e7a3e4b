"""The seeds' three stress tests as named workload profiles (see docs/load.md for the table).

Input lengths are the seeds'; output lengths are ours (the seeds name none for the dynamic classes)
and are documented in docs/load.md. Normal distributions are clipped at about mean +- 3 std.
"""

from __future__ import annotations

from tuner.spec.workload import Fixed, Normal, RequestClass, Uniform

ABNORMAL = "abnormal"  # class name counted separately by tuner.load.metrics

CUSTOMER_SERVICE = RequestClass(
    name="customer_service", weight=1.0,
    input=Normal(dist="normal", mean=320, std=120, min=16, max=680),
    output=Normal(dist="normal", mean=192, std=64, min=16, max=512),
)
EDUCATION = RequestClass(
    name="education", weight=1.0,
    input=Normal(dist="normal", mean=4200, std=1800, min=512, max=9600),
    output=Normal(dist="normal", mean=640, std=256, min=64, max=1536),
)
CODE_COMPLETION = RequestClass(
    name="code_completion", weight=1.0,
    input=Normal(dist="normal", mean=1024, std=600, min=64, max=2824),
    output=Normal(dist="normal", mean=96, std=48, min=8, max=256),
)
# 10% of all requests: (3 + 5 + 2) / 9 makes the abnormal weight one tenth of the total.
ABNORMAL_LONG = RequestClass(
    name=ABNORMAL, weight=10 / 9, abnormal=True,
    input=Uniform(dist="uniform", low=16_385, high=32_768),
    output=Fixed(value=128),
)

PROFILES: dict[str, list[RequestClass]] = {
    "static": [RequestClass(name="static", weight=1.0, input=Fixed(value=2048), output=Fixed(value=512))],
    # The seeds' real-traffic mix: customer service, documents and code at 3:5:2.
    "dynamic": [
        CUSTOMER_SERVICE.model_copy(update={"weight": 3.0}),
        EDUCATION.model_copy(update={"weight": 5.0}),
        CODE_COMPLETION.model_copy(update={"weight": 2.0}),
    ],
    "mixed": [
        CUSTOMER_SERVICE.model_copy(update={"weight": 3.0}),
        EDUCATION.model_copy(update={"weight": 5.0}),
        CODE_COMPLETION.model_copy(update={"weight": 2.0}),
        ABNORMAL_LONG,
    ],
}

# Load steps the seeds run each profile at, used by `python -m tuner.bench` when none is given.
DEFAULT_CONCURRENCY: dict[str, list[int]] = {"static": [8, 16, 32, 64]}
