"""The bad-input corpus: each case edits a valid study (or the command line) in one way and names the
exact message the CLI must print on stderr before exiting with status 2 and starting nothing.

`python tests/reliability/bad_input_cases.py > docs/bad-input.md` renders the list for the docs; a test
checks the docs match this file, so the documented messages are the tested ones.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WILD = "<*>"  # in a message: any text (an OS or library error that differs between machines)


@dataclass
class Ctx:
    """What a case may change: the study data (or its raw text), extra CLI args, the output folder."""

    tmp: Path
    data: dict[str, Any]
    text: str | None = None
    args: list[str] = field(default_factory=list)
    output: Path | None = None
    study_path: Path | None = None


Edit = Callable[[Ctx], None]


@dataclass(frozen=True)
class Case:
    id: str
    what: str  # the mistake, in words, for the docs
    edits: tuple[Edit, ...]
    message: str  # stderr after "error: ", with {study} and {tmp} placeholders and <*> wildcards
    needs_ray: bool = False  # checked only once a Ray cluster is up (run as a subprocess)
    bug: str = ""  # known wrong message today (the test is a strict xfail until its owner fixes it)


def base_study() -> dict[str, Any]:
    """The default study, short: every case starts from this valid file."""
    data = yaml.safe_load((ROOT / "studies" / "default.yaml").read_text())
    data["name"] = "bad"
    data["budget"] = {"trials": 2, "max_concurrent": 1}
    return data


# ---- edits -----------------------------------------------------------------------------------
def put(dotted: str, value: Any) -> Edit:
    def edit(c: Ctx) -> None:
        *parents, last = dotted.split(".")
        node = c.data
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return edit


def drop(dotted: str) -> Edit:
    def edit(c: Ctx) -> None:
        *parents, last = dotted.split(".")
        node = c.data
        for p in parents:
            node = node[p]
        del node[last]
    return edit


def raw(text: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.text = text
    return edit


def cli(*args: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.args += [a.format(tmp=c.tmp) for a in args]
    return edit


def file(name: str, content: bytes | str) -> Edit:
    def edit(c: Ctx) -> None:
        p = c.tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    return edit


def parquet(name: str, columns: dict[str, list[Any]]) -> Edit:
    def edit(c: Ctx) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), c.tmp / name)
    return edit


def model_dir(files: dict[str, bytes]) -> Edit:
    """A local model folder `model/` with these files (and model.name pointing at it)."""
    def edit(c: Ctx) -> None:
        d = c.tmp / "model"
        d.mkdir(exist_ok=True)
        for n, b in files.items():
            (d / n).write_bytes(b)
        c.data["model"]["name"] = str(d)
        c.data["model"]["shape"] = "qwen3-8b"
    return edit


def output_under_file(c: Ctx) -> None:
    (c.tmp / "a-file").write_text("not a folder")
    c.output = c.tmp / "a-file" / "out"


def study_at(name: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.study_path = c.tmp / name
    return edit


def dup_key(c: Ctx) -> None:
    text = yaml.safe_dump(c.data, sort_keys=False)
    c.text = text + "budget:\n  trials: 500\n"


def cls(name: str) -> dict[str, Any]:
    """A valid request class."""
    return {"name": name, "weight": 1, "input": {"dist": "fixed", "value": 10}, "output": {"dist": "fixed", "value": 5}}


# Known wrong messages (tests are strict xfails until fixed in their owner's module).
SHA_OF_HELLO = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"  # sha256(b"hello")

CASES: list[Case] = [
    # -- the file itself
    Case("malformed-yaml", "YAML syntax error (unclosed bracket)", (raw("name: [bad\nengine: sim\n"),),
         "{study}:2:7: malformed YAML: expected ',' or ']', but got ':' | fix: fix the YAML syntax at that line"),
    Case("yaml-tab", "a tab used for indentation", (raw("name: bad\nmodel:\n\tname: x\n"),),
         "{study}:3:1: malformed YAML: found character '\\t' that cannot start any token | fix: fix the YAML syntax at that line"),
    Case("not-a-mapping", "the file is a list, not key: value pairs", (raw("- name: bad\n"),),
         "{study}: expected a mapping at the top level | fix: write key: value pairs"),
    Case("empty-file", "an empty study file", (raw("\n"),),
         "{study}: expected a mapping at the top level | fix: write key: value pairs"),
    Case("study-missing", "--study names a file that does not exist", (study_at("nope.yaml"),),
         "{tmp}/nope.yaml: file not found: {tmp}/nope.yaml | fix: check the path"),
    Case("study-is-folder", "--study names a folder", (study_at("."),),
         "{tmp}: {tmp} is a folder, not a YAML file | fix: give the path of a .yaml file"),
    Case("duplicate-key", "a top-level key given twice (YAML would keep the last silently)", (dup_key,),
         "{study}:<*>:1: malformed YAML: key 'budget' given twice in one mapping | fix: fix the YAML syntax at that line"),
    # -- keys and types
    Case("unknown-top-key", "misspelt top-level key", (put("budgett", {"trials": 3}),),
         "{study}: budgett: unknown key 'budgett' | fix: remove it or check its spelling"),
    Case("unknown-nested-key", "misspelt nested key, named with its path", (put("capacity.lowest", 2),),
         "{study}: capacity.lowest: unknown key 'lowest' | fix: remove it or check its spelling"),
    Case("missing-required", "a required section left out", (drop("workload"),),
         "{study}: workload: required key 'workload' is missing | fix: add it (docs/study.md shows every key)"),
    Case("wrong-type-int", "text where a whole number belongs", (put("model.max_model_len", "16k"),),
         "{study}: model.max_model_len: Input should be a valid integer, unable to parse string as an integer | fix: give a whole number"),
    Case("wrong-type-bool", "text where true/false belongs", (put("model.trust_remote_code", "maybe"),),
         "{study}: model.trust_remote_code: Input should be a valid boolean, unable to interpret input | fix: give true or false"),
    Case("bad-study-name", "a study name that cannot be a folder name", (put("name", "my study!"),),
         "{study}: name: String should match pattern '^[A-Za-z0-9][A-Za-z0-9_.-]*$' | fix: use only letters, digits, '_', '.' and '-' (no spaces)"),
    Case("bad-dtype", "a dtype the engines do not know", (put("model.dtype", "fp7"),),
         "{study}: model.dtype: Input should be 'auto', 'bfloat16', 'float16' or 'float32' | fix: use one of the allowed values"),
    # -- engines
    Case("unknown-engine", "an engine servetune does not have", (put("engine", "tgi"),),
         "{study}: engine: unknown engine 'tgi' | fix: use one of ['sglang', 'sim', 'vllm']"),
    Case("engine-twice", "the same engine listed twice in a joint study", (put("engine", ["sim", "sim"]),),
         "{study}: engine: engine listed twice: ['sim', 'sim'] | fix: list each engine once"),
    Case("engine-settings-unknown", "settings for an engine that does not exist", (put("engines", {"tgi": {}}),),
         "{study}: engines.tgi: engines has settings for unknown engine 'tgi' | fix: key the blocks by engine: ['sglang', 'vllm']"),
    Case("unknown-fixed-arg", "an engine argument the engine does not have (fixed args)",
         (put("search_space", {"fixed": {"max_num_seqz": 64}}),), "search_space.fixed.max_num_seqz: unknown vllm argument 'max_num_seqz' | fix: use one of [<*>]"),
    Case("fixed-arg-flag-name", "a fixed arg name that is not snake_case (could smuggle a flag)",
         (put("search_space", {"fixed": {"max-num-seqs --trust-remote-code": 1}}),), "search_space.fixed: engine argument name 'max-num-seqs --trust-remote-code' is not a snake_case name | fix: write names like max_num_seqs (servetune makes the --flag from it)"),
    Case("unknown-sim-gpu", "a GPU the simulator has no model of", (put("sim.gpu", "H900"),), "sim.gpu: unknown GPU 'H900' for the simulator | fix: use one of [<*>]"),
    Case("unknown-sim-shape", "a model shape the simulator does not know", (put("model.shape", "llama-99b"),),
         "model.shape: unknown simulator shape 'llama-99b' | fix: use one of [<*>]"),
    Case("unknown-sim-model", "a model name the simulator cannot map to a shape (and no model.shape)",
         (put("model.name", "my-org/custom-model"),), "model.name: no simulator shape for model 'my-org/custom-model' | fix: set model.shape to one of [<*>]"),
    Case("unknown-sim-fault", "a sim fault switch that does not exist", (put("sim.faults", {"explode": True}),), "sim.faults.explode: unknown sim fault 'explode' | fix: use one of [<*>]"),
    Case("sim-time-scale-zero", "sim.time_scale 0", (put("sim.time_scale", 0),),
         "{study}: sim.time_scale: Input should be greater than 0 | fix: give a larger value"),
    # -- search space
    Case("override-low-gt-high", "override with low > high",
         (put("search_space", {"overrides": {"max_num_seqs": {"low": 512, "high": 16}}}),),
         "{study}: search_space.overrides.max_num_seqs: low <= high must hold, but got low=512 high=16 | fix: swap them or narrow only one end"),
    Case("override-unknown-param", "override of a parameter the space does not have",
         (put("search_space", {"overrides": {"max_num_seq": {"high": 64}}}),),
         "search_space.overrides.max_num_seq: override of unknown parameter 'max_num_seq' | fix: known parameters of vllm.yaml: [<*>]"),
    Case("override-log-zero", "log-scale parameter narrowed to low 0",
         (put("search_space", {"overrides": {"max_num_seqs": {"low": 0}}}),),
         "search_space.overrides.max_num_seqs: log scale needs low > 0, got low=0 | fix: give low >= 1 or set log: false"),
    Case("exclude-unknown-param", "exclude of a parameter the space does not have",
         (put("search_space", {"exclude": ["max_num_seq"]}),),
         "search_space.exclude: cannot exclude unknown parameter 'max_num_seq' | fix: known: [<*>]"),
    Case("constraint-unknown-param", "a constraint naming an unknown parameter",
         (put("search_space", {"constraints": [{"require": "max_num_seqs <= max_batch"}]}),),
         "search_space.constraints[0]: constraint 'max_num_seqs <= max_batch' names unknown parameter 'max_batch' | fix: known: [<*>]"),
    Case("constraint-unparsable", "a constraint that is not 'a <= b'",
         (put("search_space", {"constraints": [{"require": "max_num_seqs is small"}]}),),
         "{study}: search_space.constraints[0]: cannot parse constraint 'max_num_seqs is small' | fix: write 'a <= b' with parameter names or numbers"),
    Case("constraint-never-holds", "a constraint no value in the ranges can meet",
         (put("search_space", {"constraints": [{"require": "max_num_seqs >= 4096"}]}),),
         "search_space.constraints[0]: constraint 'max_num_seqs >= 4096' can never hold within the parameter ranges | fix: widen the ranges or drop the constraint"),
    Case("constraints-contradict", "two constraints that contradict each other",
         (put("search_space", {"constraints": [{"require": "max_num_seqs <= 32"},
                                                {"require": "max_num_seqs >= 64"}]}),),
         "search_space.constraints: the sim constraints contradict each other: no value meets all of 'max_num_seqs <= 32', 'max_num_seqs >= 64' | fix: drop or loosen one of them"),
    Case("space-block-for-other-engine", "a per-engine search_space block for an engine the study does not run",
         (put("search_space", {"vllm": {"overrides": {"max_num_seqs": {"high": 64}}}}),),
         "search_space.vllm: search_space has a block for 'vllm', which this study does not run | fix: key the blocks by the study's engines: ['sim']"),
    Case("override-range-on-categorical", "low/high on a categorical parameter",
         (put("search_space", {"overrides": {"block_size": {"low": 1}}}),),
         "search_space.overrides.block_size: low, high and step only apply to int and float parameters, not categorical | fix: narrow it with choices"),
    Case("space-file-missing", "search_space.file that does not exist",
         (put("search_space", {"file": "spaces/nope.yaml"}),),
         "search_space.file: search-space file spaces/nope.yaml not found (looked for {tmp}/spaces/nope.yaml, spaces/nope.yaml, {root}/spaces/nope.yaml) | fix: give a path relative to the study file, or leave file out for the built-in space"),
    Case("space-file-wrong-engine", "a search-space file written for another engine",
         (put("search_space", {"file": str(ROOT / "search_spaces" / "sglang.yaml")}),),
         "search_space.file: {root}/search_spaces/sglang.yaml is a space for 'sglang', not 'vllm' | fix: use search_spaces/vllm.yaml"),
    Case("bad-search-algorithm", "a search algorithm servetune does not have", (put("search.algorithm", "bayes"),),
         "{study}: search.algorithm: Input should be 'tpe', 'nsga2', 'random' or 'grid' | fix: use one of the allowed values"),
    Case("unknown-objective-metric", "an objective metric no summary has",
         (put("objective.metric", "output_tokens"),),
         "{study}: objective.metric: unknown metric 'output_tokens' | fix: use a summary key such as output_throughput, request_throughput, request_goodput or p99_ttft_ms (per class: class.<name>.<key>)"),
    # -- SLA
    Case("sla-p101", "an SLA statistic that does not exist (p101)", (put("sla", ["p101_ttft_ms <= 500"]),),
         "{study}: sla[0]: unknown SLA term 'p101_ttft_ms' | fix: use <stat>_<metric>_ms with stat in mean,median,p50,p90,p95,p99,p99.9,max and metric in ttft,tpot,itl,e2el (vLLM's names, e.g. p99_ttft_ms, p99_e2el_ms), or error_rate"),
    Case("sla-old-name", "an SLA term under its pre-vLLM name", (put("sla", ["p99_e2e_ms <= 8000"]),),
         "{study}: sla[0]: old SLA term name 'p99_e2e_ms' | fix: 'p99_e2e_ms' is now 'p99_e2el_ms' (vLLM's name): write p99_e2el_ms"),
    Case("old-objective-metric", "an objective metric under its pre-vLLM name", (put("objective.metric", "output_tokens_per_s"),),
         "{study}: objective.metric: old metric name 'output_tokens_per_s' | fix: 'output_tokens_per_s' is now 'output_throughput' (vLLM's name): write output_throughput"),
    Case("sla-unparsable", "an SLA term that is not 'stat_metric_ms <= number'", (put("sla", ["ttft fast"]),),
         "{study}: sla[0]: cannot parse SLA term 'ttft fast' | fix: write terms like 'p99_ttft_ms <= 500' (statistic_metric_ms <= number)"),
    Case("sla-empty", "no SLA terms", (put("sla", []),),
         "{study}: sla: at least one SLA term is required | fix: add a term like 'p99_ttft_ms <= 500'"),
    Case("sla-duplicate", "the same SLA term twice", (put("sla", ["p99_ttft_ms <= 500", "p99_ttft_ms <= 800"]),),
         "{study}: sla: SLA term(s) given twice: ['p99_ttft_ms'] | fix: keep one limit per term"),
    Case("sla-zero-limit", "an SLA limit of 0", (put("sla", ["p99_ttft_ms <= 0"]),),
         "{study}: sla[0]: SLA limit for p99_ttft_ms must be > 0, got 0 | fix: give a positive limit"),
    Case("sla-error-rate-percent", "an error_rate limit written as a percentage", (put("sla", ["error_rate <= 2"]),),
         "{study}: sla[0]: error_rate is a fraction of requests, got 2 | fix: write e.g. 'error_rate <= 0.01' for 1%"),
    Case("sla-mapping", "SLA written as a mapping", (put("sla", {"p99_ttft_ms": 500}),),
         "{study}: sla: sla must be a list of terms, got dict | fix: write sla: [\"p99_ttft_ms <= 500\", ...]"),
    # -- load and workload
    Case("capacity-low-zero", "a zero starting rate", (put("capacity.low", 0),),
         "{study}: capacity.low: Input should be greater than 0 | fix: give a larger value"),
    Case("capacity-low-negative", "a negative starting rate", (put("capacity.low", -1),),
         "{study}: capacity.low: Input should be greater than 0 | fix: give a larger value"),
    Case("capacity-low-gt-high", "capacity low > high", (put("capacity.low", 100), put("capacity.high", 10)),
         "{study}: capacity: low <= high must hold, but got low=100 high=10 | fix: lower capacity.low or raise capacity.high"),
    Case("unknown-profile", "a workload profile that does not exist", (put("workload.profile", "bursty"),),
         "{study}: workload.profile: Input should be 'static', 'dynamic' or 'mixed' | fix: use one of the allowed values"),
    Case("two-workload-sources", "both a profile and classes",
         (put("workload.classes", [cls("a")]),),
         "{study}: workload: give exactly one of profile, classes or trace (got ['profile', 'classes']) | fix: keep one of them"),
    Case("length-no-dist", "a length distribution without its kind (dist)",
         (drop("workload.profile"), put("workload.classes", [{**cls("a"), "input": {"value": 10}}])),
         "{study}: workload.classes[0].input: missing 'dist' (which distribution) | fix: add dist: fixed (with value), normal, lognormal, uniform or empirical"),
    Case("bad-arrival-process", "an arrival process that does not exist", (put("workload.arrivals.process", "lognormal"),),
         "{study}: workload.arrivals.process: Input should be 'poisson', 'gamma', 'constant' or 'concurrency' | fix: use one of the allowed values"),
    Case("burstiness-zero", "gamma burstiness 0", (put("workload.arrivals", {"process": "gamma", "burstiness": 0}),),
         "{study}: workload.arrivals.burstiness: Input should be greater than 0 | fix: give a larger value"),
    Case("length-min-gt-max", "a length distribution with min > max",
         (drop("workload.profile"), put("workload.classes", [{**cls("a"), "input": {
             "dist": "normal", "mean": 300, "std": 50, "min": 500, "max": 100}}])), "{study}: workload.classes[0].input: min <= max must hold, but got min=500 max=100 | fix: lower min or raise max"),
    Case("duplicate-class", "two request classes with the same name",
         (drop("workload.profile"), put("workload.classes", [cls("a"), cls("a")])),
         "workload.classes: class name(s) given twice: ['a'] | fix: give each class its own name"),
    Case("trace-missing", "a trace file that does not exist",
         (drop("workload.profile"), put("workload.trace", {"path": "traces/nope.parquet"})),
         "workload.trace.path: trace file not found: {tmp}/traces/nope.parquet | fix: check the path (relative paths are from the study file)"),
    Case("trace-corrupt", "a trace file that is not Parquet",
         (drop("workload.profile"), file("trace.parquet", b"PAR1 this is not parquet"),
          put("workload.trace", {"path": "trace.parquet"})), "workload.trace.path: cannot read Parquet trace {tmp}/trace.parquet: <*> | fix: give a valid Parquet file"),
    Case("trace-columns", "a trace without the needed columns",
         (drop("workload.profile"), parquet("trace.parquet", {"t": [0.0, 1.0], "prompt_tokens": [10, 20]}),
          put("workload.trace", {"path": "trace.parquet"})), "workload.trace.path: trace {tmp}/trace.parquet lacks column(s) ['arrival_s', 'input_len', 'output_len'] | fix: give columns ['arrival_s', 'input_len', 'output_len'] (+ optional cls)"),
    Case("trace-bad-values", "a trace with a negative length",
         (drop("workload.profile"), parquet("trace.parquet", {"arrival_s": [0.0, 1.0], "input_len": [10, -5],
                                                               "output_len": [5, 5]}),
          put("workload.trace", {"path": "trace.parquet"})), "workload.trace.path: trace {tmp}/trace.parquet: times must be >= 0 and lengths >= 1 | fix: fix the offending rows"),
    # -- model
    Case("model-path-missing", "model.must_exist with a path that does not exist",
         (put("model.name", "/nonexistent/models/qwen3-8b"), put("model.must_exist", True),
          put("model.shape", "qwen3-8b")), "model.name: model path /nonexistent/models/qwen3-8b does not exist | fix: give an existing local folder, or set must_exist: false for a hub id"),
    Case("manifest-missing", "a SHA-256 manifest that does not exist",
         (model_dir({"weights.bin": b"hello"}), put("model.sha256_manifest", "nope.sha256")),
         "model.sha256_manifest: SHA-256 manifest {tmp}/nope.sha256 not found | fix: check the path"),
    Case("manifest-mismatch", "a model file whose SHA-256 differs from the manifest",
         (model_dir({"weights.bin": b"hello!"}), file("model.sha256", f"{SHA_OF_HELLO}  weights.bin\n"),
          put("model.sha256_manifest", "model.sha256")), "{tmp}/model.sha256:1: SHA-256 of weights.bin does not match the manifest (file changed or corrupt) | fix: re-download the model from a trusted source"),
    Case("manifest-file-missing", "a file listed in the manifest is missing",
         (model_dir({"weights.bin": b"hello"}), file("model.sha256", f"{SHA_OF_HELLO}  weights.bin\n"
                                                                     f"{SHA_OF_HELLO}  config.json\n"),
          put("model.sha256_manifest", "model.sha256")), "{tmp}/model.sha256:2: model file config.json listed in the manifest is missing | fix: restore the file or regenerate the manifest"),
    Case("manifest-malformed", "a manifest line that is not sha256sum output",
         (model_dir({"weights.bin": b"hello"}), file("model.sha256", "weights.bin abc\n"),
          put("model.sha256_manifest", "model.sha256")), "{tmp}/model.sha256:1: line 1 is not '<sha256>  <file>' | fix: use sha256sum output"),
    # -- budget, command line, environment
    Case("zero-trials", "budget.trials 0", (put("budget.trials", 0),),
         "{study}: budget.trials: Input should be greater than 0 | fix: give a larger value"),
    Case("cli-trials-zero", "--trials 0", (cli("--trials", "0"),),
         "--trials: --trials must be > 0, got 0 | fix: give a positive whole number"),
    Case("cli-trials-text", "--trials with text", (cli("--trials", "many"),),
         "argument --trials: invalid int value: 'many'"),
    Case("cli-max-concurrent-zero", "--max-concurrent 0", (cli("--max-concurrent", "0"),),
         "--max-concurrent: --max-concurrent must be > 0, got 0 | fix: give a positive whole number"),
    Case("mlflow-unreachable", "an MLflow server that does not answer",
         (cli("--mlflow-uri", "http://127.0.0.1:9/"),),
         "--mlflow-uri: MLflow tracking server http://127.0.0.1:9/ is unreachable (<*>) | fix: start it (mlflow server --host 127.0.0.1 ...) or leave the URI out to use a local SQLite store"),
    Case("mlflow-unreachable-secret", "an unreachable MLflow URI with a password (the password is masked)",
         (cli("--mlflow-uri", "http://alice:s3cret-pw@127.0.0.1:9/"),),
         "--mlflow-uri: MLflow tracking server http://alice:***@127.0.0.1:9/ is unreachable (<*>) | fix: start it (mlflow server --host 127.0.0.1 ...) or leave the URI out to use a local SQLite store"),
    Case("mlflow-bad-scheme", "an MLflow URI scheme MLflow cannot use", (put("tracking.mlflow_uri", "ftp://host/x"),),
         "--mlflow-uri: unsupported MLflow URI scheme in ftp://host/x | fix: use http(s)://, sqlite:///path or a file path"),
    Case("output-unwritable", "an output folder that cannot be created", (output_under_file,),
         "--output: output folder {tmp}/a-file/out is not writable (Not a directory) | fix: choose a folder you can write to"),
    Case("gpus-beyond-cluster", "a trial needing more GPUs than the Ray cluster has",
         (put("resources.gpus_per_trial", 64),),
         "resources.gpus_per_trial: a trial needs 64 GPU(s) but the Ray cluster has 0 | fix: lower gpus_per_trial / tensor_parallel_size or add GPU nodes", needs_ray=True),
]


def prepare(case: Case, tmp: Path) -> tuple[list[str], Path, Path]:
    """Write the case's study into tmp; (CLI args, study path, output folder)."""
    ctx = Ctx(tmp=tmp, data=base_study())
    for e in case.edits:
        e(ctx)
    study = ctx.study_path or tmp / "study.yaml"
    if ctx.study_path is None:
        study.write_text(ctx.text if ctx.text is not None else yaml.safe_dump(ctx.data, sort_keys=False))
    out = ctx.output or tmp / "out"
    return ["--study", str(study), "--output", str(out), *ctx.args], study, out


def render() -> str:
    """docs/bad-input.md, from the cases above."""
    lines = [
        "# Bad input: what servetune refuses, and what it says",
        "",
        "Every case below is a test (`tests/reliability/test_bad_input.py`): `python -m tuner.run` exits with",
        "status 2, prints exactly this message on stderr (after `error: `), and starts nothing: no engine,",
        "no Ray trial, no MLflow run, no files in the output folder. Messages say *where* (file and key",
        "path, or the command-line flag), *what* is wrong, and *how to fix it* (after `fix:`).",
        "`study.yaml` stands for the study file's path, `<repo>` for the servetune checkout, `…` for text that comes",
        "from the OS, a library, or a list that grows (known GPUs, shapes, engine arguments).",
        "",
        "| case | mistake | message |",
        "|---|---|---|",
    ]
    for c in CASES:
        msg = c.message.replace("{study}", "study.yaml").replace("{tmp}", "…").replace("{root}", "<repo>")
        msg = msg.replace(WILD, "…")
        msg = msg.replace("|", "\\|")
        note = " (message being fixed: the test is an expected failure until then)" if c.bug else ""
        lines.append(f"| `{c.id}` | {c.what}{note} | `{msg}` |")
    lines += ["", f"{len(CASES)} cases. Regenerate with `python tests/reliability/bad_input_cases.py > docs/bad-input.md`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
