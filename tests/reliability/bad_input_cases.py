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
        c.args += [a.format(tmp=c.tmp, root=ROOT) for a in args]
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

URI_FIX = ("use http(s)://host:port (an MLflow server), sqlite:///path/mlflow.db, or leave it out (SQLite in the "
           "output folder)")

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
         "{study}: sim.time_scale: Input should be greater than or equal to 0.01 | fix: give a larger value"),
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
         "{study}: search.algorithm: Input should be 'tpe-local', 'tpe-coord', 'rf', 'tpe', 'nsga2', 'random' or 'grid' | fix: use one of the allowed values"),
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
         "{study}: workload: give exactly one of profile, classes, trace or dataset (got ['profile', 'classes']) | fix: keep one of them"),
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
    Case("budget-list-cli-trials", "budget written as a list, with --trials on the command line",
         (put("budget", [1, "x"]), cli("--trials", "3")),
         "{study}: budget: Input should be a valid dictionary or instance of Budget | fix: see the documented schema (docs/study.md)"),
    Case("tracking-text-cli-tracking", "tracking written as text, with --tracking on the command line",
         (put("tracking", "deferred"), cli("--tracking", "deferred")),
         "{study}: tracking: Input should be a valid dictionary or instance of Tracking | fix: see the documented schema (docs/study.md)"),
    Case("mlflow-unreachable", "an MLflow server that does not answer",
         (cli("--mlflow-uri", "http://127.0.0.1:9/"),),
         "--mlflow-uri: MLflow tracking server http://127.0.0.1:9/ is unreachable (<*>) | fix: start it (mlflow server --host 127.0.0.1 ...) or leave the URI out to use a local SQLite store"),
    Case("mlflow-unreachable-secret", "an unreachable MLflow URI with a password (the credentials are left out)",
         (cli("--mlflow-uri", "http://alice:s3cret-pw@127.0.0.1:9/"),),
         "--mlflow-uri: MLflow tracking server http://127.0.0.1:9/ is unreachable (<*>) | fix: start it (mlflow server --host 127.0.0.1 ...) or leave the URI out to use a local SQLite store"),
    Case("mlflow-bad-scheme", "an MLflow URI scheme MLflow cannot use", (put("tracking.mlflow_uri", "ftp://host/x"),),
         "{study}: tracking.mlflow_uri: unsupported MLflow URI scheme in ftp://host/x | fix: " + URI_FIX),
    Case("output-unwritable", "an output folder that cannot be created", (output_under_file,),
         "--output: output folder {tmp}/a-file/out is not writable (Not a directory) | fix: choose a folder you can write to"),
    Case("gpus-beyond-cluster", "a trial needing more GPUs than the Ray cluster has",
         (put("resources.gpus_per_trial", 64),),
         "resources.gpus_per_trial: a trial needs 64 GPU(s) but the Ray cluster has 0 | fix: lower gpus_per_trial / tensor_parallel_size or add GPUs", needs_ray=True),
]


def out_file(name: str, content: bytes | str) -> Edit:
    """A file already in the output folder (what --resume finds there)."""
    def edit(c: Ctx) -> None:
        p = c.tmp / "out" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    return edit


def sim_engine_as(engine: str, python: str) -> Edit:
    """Run a real engine (with the given interpreter) instead of the simulator."""
    def edit(c: Ctx) -> None:
        c.data["engine"] = engine
        c.data.pop("sim", None)
        c.data["engines"] = {engine: {"python": python}}
        c.data["search_space"] = {}
    return edit


def space_edit(change: Callable[[dict[str, Any]], None]) -> Edit:
    """The study searches a copy of the built-in vLLM space (tmp/space.yaml) with one change."""
    def edit(c: Ctx) -> None:
        data = yaml.safe_load((ROOT / "search_spaces" / "vllm.yaml").read_text())
        change(data)
        (c.tmp / "space.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        c.data["search_space"] = {"file": "space.yaml"}
    return edit


def param(name: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["params"][name].update(fields)
    return change


def first_if(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["constraints"][0]["if"] = value
    return change


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))
STATE = '{"parent_run_id": "0123abcd", "tracking_uri": "sqlite:///x", "study": "other.yaml", "study_name": "other"}'
NO_SERVER = ("start it (mlflow server --host 127.0.0.1 ...) or leave the URI out to use a local SQLite store")
RESUME_FIX = "restore the file from a backup, or start the study afresh in another --output"


def dyn(name: str = "a", inp: Any = 10, out: Any = 5, **kw: Any) -> list[dict[str, Any]]:
    return [{"name": name, "weight": 1, "input": inp, "output": out, **kw}]


# Issue 21: values YAML accepts but the engine, the model, MLflow or the search would not; files that are
# not YAML text; messages that misled; --resume over a folder that is not this study's.
CASES += [
    # -- the file itself
    Case("non-utf8-file", "a study file that is not UTF-8 (Latin-1 bytes)",
         (study_at("latin1.yaml"), file("latin1.yaml", b"name: bad\nmodel:\n  name: caf\xe9\n")),
         "{tmp}/latin1.yaml:3:12: not UTF-8 text (byte 0xe9) | fix: save the file as UTF-8"),
    Case("binary-study", "a binary file given as --study", (study_at("bin.yaml"), file("bin.yaml", b"\x7fELF\x02\x01\x00\x00" * 8)),
         "{tmp}/bin.yaml: a binary file, not YAML text | fix: give the study's .yaml file"),
    Case("unterminated-quote", "an unterminated quote (reported where it opens, not at the file's end)",
         (raw('name: "bad\nengine: sim\nmodel:\n  name: x\n'),),
         "{study}:1:7: malformed YAML: a quoted scalar that starts here is never closed (the file ends first) | fix: fix the YAML syntax at that line"),
    Case("unclosed-bracket-at-end", "a flow list left open to the end of the file",
         (raw("name: bad\nsla: [p99_ttft_ms <= 500\n"),),
         "{study}:2:6: malformed YAML: a flow sequence that starts here is never closed (the file ends first) | fix: fix the YAML syntax at that line"),
    Case("alias-bomb", "a 'billion laughs' alias bomb (refused in a short message, not expanded)", (raw(BOMB),),
         "{study}:<*>: YAML aliases expand to more than 100,000 values (an alias bomb?) | fix: write the values out, or use fewer nested aliases"),
    Case("several-errors", "three mistakes in one file: all are reported at once",
         (put("budgett", 1), put("model.max_model_len", "long"), put("capacity.low", -1)),
         "{study}: model.max_model_len: Input should be a valid integer, unable to parse string as an integer (also: capacity.low: Input should be greater than 0; budgett: unknown key 'budgett') | fix: give a whole number"),
    Case("several-errors-with-sla", "an SLA mistake and a schema mistake: both reported",
         (put("sla", ["p101_ttft_ms <= 5"]), put("budget.trials", 0)),
         "{study}: sla[0]: unknown SLA term 'p101_ttft_ms' (also: budget.trials: Input should be greater than 0) | fix: use <stat>_<metric>_ms with stat in mean,median,p50,p90,p95,p99,p99.9,max and metric in ttft,tpot,itl,e2el (vLLM's names, e.g. p99_ttft_ms, p99_e2el_ms), or error_rate"),
    # -- values YAML accepts but the engine does not
    Case("max-model-len-true", "max_model_len: true (YAML boolean, not a length)", (put("model.max_model_len", True),),
         "{study}: model.max_model_len: got true, which is not a number | fix: give a number (true/false is not one)"),
    Case("tp-size-false", "tensor_parallel_size: false", (put("model.tensor_parallel_size", False),),
         "{study}: model.tensor_parallel_size: got false, which is not a number | fix: give a number (true/false is not one)"),
    Case("trials-true", "budget.trials: true", (put("budget.trials", True),),
         "{study}: budget.trials: got true, which is not a number | fix: give a number (true/false is not one)"),
    Case("capacity-high-true", "capacity.high: true", (put("capacity.high", True),),
         "{study}: capacity.high: got true, which is not a number | fix: give a number (true/false is not one)"),
    Case("max-model-len-huge", "max_model_len 10,000,000: longer than the model's positions",
         (put("model.max_model_len", 10_000_000),),
         "model.max_model_len: max_model_len 10000000 is longer than the model's 40960 positions (model shape qwen3-8b) | fix: give at most 40960"),
    Case("max-model-len-local-config", "max_model_len beyond a local model's config.json",
         (model_dir({"config.json": b'{"num_attention_heads": 32, "max_position_embeddings": 4096}'}),
          put("model.max_model_len", 8192)),
         "model.max_model_len: max_model_len 8192 is longer than the model's 4096 positions ({tmp}/model/config.json) | fix: give at most 4096"),
    Case("tp-not-dividing-heads", "tensor_parallel_size 3 with 32 attention heads",
         (put("model.tensor_parallel_size", 3),),
         "model.tensor_parallel_size: tensor_parallel_size 3 does not divide the model's 32 attention heads (model shape qwen3-8b) | fix: use a divisor of 32: [1, 2, 4, 8, 16]"),
    Case("tp-local-config", "tensor_parallel_size 5 with a local model of 12 heads",
         (model_dir({"config.json": b'{"num_attention_heads": 12, "max_position_embeddings": 32768}'}),
          put("model.tensor_parallel_size", 5)),
         "model.tensor_parallel_size: tensor_parallel_size 5 does not divide the model's 12 attention heads ({tmp}/model/config.json) | fix: use a divisor of 12: [1, 2, 4]"),
    Case("model-config-corrupt", "a local model whose config.json is not JSON",
         (model_dir({"config.json": b'{"num_attention_heads": '}),),
         "model.name: {tmp}/model/config.json is not valid JSON (<*>) | fix: restore the model's config.json"),
    Case("model-local-path-missing", "a local model path (./...) that does not exist, without must_exist",
         (put("model.name", "./models/qwen3-8b"), put("model.shape", "qwen3-8b")),
         "model.name: model path ./models/qwen3-8b does not exist | fix: give an existing local folder, or a hub id like Qwen/Qwen3-8B"),
    Case("model-abs-path-missing", "an absolute model path that does not exist",
         (put("model.name", "/data/models/nope"), put("model.shape", "qwen3-8b")),
         "model.name: model path /data/models/nope does not exist | fix: give an existing local folder, or a hub id like Qwen/Qwen3-8B"),
    Case("model-home-path-missing", "a ~/ model path that does not exist",
         (put("model.name", "~/no-such-model-dir"), put("model.shape", "qwen3-8b")),
         "model.name: model path ~/no-such-model-dir does not exist | fix: give an existing local folder, or a hub id like Qwen/Qwen3-8B"),
    Case("route-prefix-no-slash", "promotion.route_prefix without its leading '/'", (put("promotion.route_prefix", "api"),),
         "{study}: promotion.route_prefix: route_prefix must start with '/', have no spaces and no trailing '/', got 'api' | fix: write e.g. route_prefix: /api"),
    Case("route-prefix-trailing-slash", "promotion.route_prefix ending in '/'", (put("promotion.route_prefix", "/v1/"),),
         "{study}: promotion.route_prefix: route_prefix must start with '/', have no spaces and no trailing '/', got '/v1/' | fix: write e.g. route_prefix: /v1"),
    Case("route-prefix-space", "promotion.route_prefix with a space", (put("promotion.route_prefix", "/my api"),),
         "{study}: promotion.route_prefix: route_prefix must start with '/', have no spaces and no trailing '/', got '/my api' | fix: write e.g. route_prefix: /my api"),
    Case("app-name-bad", "promotion.app_name with a space", (put("promotion.app_name", "my app"),),
         "{study}: promotion.app_name: String should match pattern '^[A-Za-z0-9][A-Za-z0-9_.-]*$' | fix: use only letters, digits, '_', '.' and '-' (no spaces)"),
    Case("vllm-not-installed", "engine: vllm with an interpreter that has no vLLM",
         (sim_engine_as("vllm", sys.executable),),
         "engines.vllm.python: vllm is not installed for {python} (no module 'vllm') | fix: install vllm there, or set engines.vllm.python to the interpreter of an environment that has it"),
    Case("sglang-not-installed", "engine: sglang with an interpreter that has no SGLang",
         (sim_engine_as("sglang", sys.executable),),
         "engines.sglang.python: sglang is not installed for {python} (no module 'sglang') | fix: install sglang there, or set engines.sglang.python to the interpreter of an environment that has it"),
    Case("engine-python-missing", "engines.vllm.python that does not exist",
         (sim_engine_as("vllm", "/nonexistent/bin/python"),),
         "engines.vllm.python: vllm's interpreter /nonexistent/bin/python cannot run (<*>) | fix: give the python of the environment where the engine is installed"),
    # -- seed
    Case("seed-negative", "seed -1", (put("seed", -1),),
         "{study}: seed: Input should be greater than or equal to 0 | fix: give a larger value"),
    Case("seed-too-big", "seed 2^32 (numpy and Optuna take 0..2^32-1)", (put("seed", 2**32),),
         "{study}: seed: Input should be less than or equal to 4294967295 | fix: give a smaller value"),
    Case("cli-seed-too-big", "--seed 99999999999", (cli("--seed", "99999999999"),),
         "{study}: seed: Input should be less than or equal to 4294967295 | fix: give a smaller value"),
    Case("cli-seed-negative", "--seed -5", (cli("--seed=-5"),),
         "{study}: seed: Input should be greater than or equal to 0 | fix: give a larger value"),
    Case("cli-seed-text", "--seed with text", (cli("--seed", "abc"),), "argument --seed: invalid int value: 'abc'"),
    Case("cli-trials-negative", "--trials -3", (cli("--trials=-3"),),
         "--trials: --trials must be > 0, got -3 | fix: give a positive whole number"),
    # -- objective
    Case("objective-latency-unknown", "an unknown objective.latency_metric", (put("objective.latency_metric", "p99"),),
         "{study}: objective.latency_metric: unknown metric 'p99' | fix: use a summary key such as output_throughput, request_throughput, request_goodput or p99_ttft_ms (per class: class.<name>.<key>)"),
    Case("objective-metric-typo", "objective.metric misspelt (tokens_per_sec)", (put("objective.metric", "tokens_per_sec"),),
         "{study}: objective.metric: unknown metric 'tokens_per_sec' | fix: use a summary key such as output_throughput, request_throughput, request_goodput or p99_ttft_ms (per class: class.<name>.<key>)"),
    Case("objective-metric-empty", "objective.metric empty", (put("objective.metric", ""),),
         "{study}: objective.metric: is empty | fix: give a value, or leave metric out for its default"),
    # -- workload vs the model
    Case("workload-longer-than-model", "max_model_len shorter than the workload's typical request (prompts cut)",
         (drop("workload.profile"), put("workload.classes", dyn(inp=3000, out=2000)), put("model.max_model_len", 4096)),
         "workload.classes[0]: class 'a' needs about 5000 tokens (input + output) per request, more than model.max_model_len 4096: its prompts would be cut | fix: raise model.max_model_len to at least 5001 or shorten the class"),
    Case("profile-longer-than-model", "the dynamic profile with max_model_len 1024", (put("model.max_model_len", 1024),),
         "workload: class 'education' needs about 4840 tokens (input + output) per request, more than model.max_model_len 1024: its prompts would be cut | fix: raise model.max_model_len to at least 4841 or shorten the class"),
    Case("normal-class-longer-than-model", "a normal length distribution whose mean does not fit",
         (drop("workload.profile"), put("workload.classes", dyn(inp={"dist": "normal", "mean": 9000, "std": 100}, out=100)),
          put("model.max_model_len", 8192)),
         "workload.classes[0]: class 'a' needs about 9100 tokens (input + output) per request, more than model.max_model_len 8192: its prompts would be cut | fix: raise model.max_model_len to at least 9101 or shorten the class"),
    # -- SLA
    Case("sla-tpot-in-seconds", "p99_tpot_ms <= 0.04 (seconds written where milliseconds belong)",
         (put("sla", ["p99_tpot_ms <= 0.04"]),),
         "{study}: sla[0]: SLA limit 0.04 ms for p99_tpot_ms is implausibly small (limits are in milliseconds) | fix: for 0.04 seconds write 'p99_tpot_ms <= 40'"),
    Case("sla-ttft-in-seconds", "p99_ttft_ms <= 0.05", (put("sla", ["p99_ttft_ms <= 0.05"]),),
         "{study}: sla[0]: SLA limit 0.05 ms for p99_ttft_ms is implausibly small (limits are in milliseconds) | fix: for 0.05 seconds write 'p99_ttft_ms <= 50'"),
    Case("sla-in-microseconds", "p99_e2el_ms <= 200000000 (microseconds)", (put("sla", ["p99_e2el_ms <= 200000000"]),),
         "{study}: sla[0]: SLA limit 2e+08 ms for p99_e2el_ms is more than a day (limits are in milliseconds) | fix: for 2e+08 microseconds write 'p99_e2el_ms <= 200000'"),
    Case("sla-not-strings", "an SLA list holding a number", (put("sla", ["p99_ttft_ms <= 500", 5]),),
         "{study}: sla[1]: an SLA term must be text like 'p99_ttft_ms <= 500', got int 5 | fix: quote the term: \"p99_ttft_ms <= 500\""),
    Case("sla-nested-list", "an SLA list holding a list", (put("sla", [["p99_ttft_ms", 500]]),),
         "{study}: sla[0]: an SLA term must be text like 'p99_ttft_ms <= 500', got list ['p99_ttft_ms', 500] | fix: quote the term: \"p99_ttft_ms <= 500\""),
    # -- search space
    Case("choices-empty", "choices: [] on a categorical parameter",
         (put("search_space", {"overrides": {"block_size": {"choices": []}}}),),
         "search_space.overrides.block_size: categorical parameter needs a non-empty choices list | fix: list at least one value under choices, or exclude the parameter"),
    Case("n-startup-negative", "search.n_startup_trials -1", (put("search.n_startup_trials", -1),),
         "{study}: search.n_startup_trials: Input should be greater than or equal to 0 | fix: give a larger value"),
    # -- MLflow URIs
    Case("mlflow-uri-malformed-ipv6", "--mlflow-uri http://[::1 (unclosed IPv6 bracket)", (cli("--mlflow-uri", "http://[::1"),),
         "--mlflow-uri: malformed MLflow URI http://[::1 (Invalid IPv6 URL) | fix: write http(s)://host:port with a port in 1..65535"),
    Case("mlflow-uri-port-range", "--mlflow-uri with port 99999", (cli("--mlflow-uri", "http://127.0.0.1:99999"),),
         "--mlflow-uri: malformed MLflow URI http://127.0.0.1:99999 (Port out of range 0-65535) | fix: write http(s)://host:port with a port in 1..65535"),
    Case("mlflow-uri-no-host", "--mlflow-uri http:///x (no host)", (cli("--mlflow-uri", "http:///x"),),
         "--mlflow-uri: MLflow URI http:///x has no host | fix: write http(s)://host:port"),
    Case("mlflow-uri-token-hidden", "an unreachable URI with a token as its user part (the token is left out)",
         (cli("--mlflow-uri", "http://s3cret-token@127.0.0.1:9"),),
         "--mlflow-uri: MLflow tracking server http://127.0.0.1:9 is unreachable (<*>) | fix: " + NO_SERVER),
    Case("mlflow-postgres-no-driver", "a postgresql:// URI without its driver installed",
         (cli("--mlflow-uri", "postgresql://u:s3cret@127.0.0.1:5432/mlflow"),),
         "--mlflow-uri: MLflow cannot open postgresql://127.0.0.1:5432/mlflow: <*> | fix: install the postgresql driver (e.g. pip install psycopg2-binary / pymysql), or " + URI_FIX.removeprefix("use ")),
    Case("mlflow-mysql-no-driver", "a mysql:// URI without its driver installed",
         (cli("--mlflow-uri", "mysql://127.0.0.1/mlflow"),),
         "--mlflow-uri: MLflow cannot open mysql://127.0.0.1/mlflow: <*> | fix: install the mysql driver (e.g. pip install psycopg2-binary / pymysql), or " + URI_FIX.removeprefix("use ")),
    Case("mlflow-databricks", "--mlflow-uri databricks", (cli("--mlflow-uri", "databricks"),),
         "--mlflow-uri: Databricks tracking (databricks) is not supported by servetune | fix: " + URI_FIX),
    Case("mlflow-file-store", "a file store path (MLflow 3 refuses them)", (cli("--mlflow-uri", "{tmp}/mlruns"),),
         "--mlflow-uri: {tmp}/mlruns is a file store, which MLflow 3 refuses | fix: " + URI_FIX),
    Case("mlflow-file-uri", "a file:// store URI", (put("tracking.mlflow_uri", "file:///tmp/mlruns"),),
         "{study}: tracking.mlflow_uri: file:///tmp/mlruns is a file store, which MLflow 3 refuses | fix: " + URI_FIX),
    Case("mlflow-sqlite-relative", "sqlite: with too few slashes", (cli("--mlflow-uri", "sqlite:mlflow.db"),),
         "--mlflow-uri: malformed SQLite URI 'sqlite:mlflow.db' | fix: write sqlite:///absolute/path/mlflow.db"),
    Case("mlflow-sqlite-no-folder", "a SQLite store in a folder that does not exist",
         (cli("--mlflow-uri", "sqlite:////nonexistent/dir/mlflow.db"),),
         "--mlflow-uri: the folder /nonexistent/dir of the SQLite store does not exist | fix: create it, or give a path in an existing folder"),
    # -- values no schema type refuses: infinite, absurdly large, empty, too long (found by fuzzing the studies)
    Case("capacity-high-inf", "capacity.high: .inf (YAML infinity)", (put("capacity.high", float("inf")),),
         "{study}: capacity.high: got inf, which is not a finite number | fix: give a finite number"),
    Case("timeout-nan", "a timeout of .nan", (put("sim.start_timeout_s", float("nan")),),
         "{study}: sim.start_timeout_s: got nan, which is not a finite number | fix: give a finite number"),
    Case("trials-huge", "budget.trials beyond any count", (put("budget.trials", 10**30),),
         "{study}: budget.trials: 1e+30 is too large (at most 9.0072e+15) | fix: give a realistic value"),
    Case("capacity-text-inf", "capacity.high: '1e999' (a string that reads as infinity)", (put("capacity.high", "1e999"),),
         "{study}: capacity.high: Input should be a finite number | fix: <*>"),
    Case("served-name-empty", "model.served_name: '' (clients would ask for no model)", (put("model.served_name", ""),),
         "{study}: model.served_name: is empty | fix: give a value, or leave served_name out for its default"),
    Case("experiment-empty", "tracking.experiment: ''", (put("tracking", {"experiment": " "}),),
         "{study}: tracking.experiment: is empty | fix: give a value, or leave experiment out for its default"),
    Case("study-name-too-long", "a 200-character study name (a folder name and an MLflow experiment)",
         (put("name", "a" * 200),), "{study}: name: String should have at most 128 characters | fix: <*>"),
    Case("sla-item-empty", "an empty item in the SLA list", (put("sla", ["p99_ttft_ms <= 1000", ""]),),
         "{study}: sla[1]: SLA term is empty | fix: write a term like 'p99_ttft_ms <= 500', or remove the empty item"),
    Case("model-path-too-long", "a model path longer than the file system allows", (put("model.name", "./" + "m" * 300), put("model.shape", "qwen3-8b")),
         "model.name: cannot use <*>: File name too long | fix: give a path that exists and that this user can read"),
    Case("space-file-name-too-long", "a search-space file name longer than the file system allows",
         (put("search_space", {"file": "s" * 300 + ".yaml"}),),
         "search_space.file: cannot use <*>: File name too long | fix: give a path that exists and that this user can read"),
    Case("model-shape-unknown-engine", "model.shape unknown, on a real engine (not only the simulator)",
         (sim_engine_as("vllm", "python3"), put("engines.vllm.check_args", False), put("model.shape", "qwen9-8b")),
         "model.shape: unknown model shape 'qwen9-8b' | fix: use one of [<*>], or leave model.shape out"),
    Case("override-choice-wrong-kind", "a study narrowing block_size to a text choice",
         (put("search_space", {"overrides": {"block_size": {"choices": [16, "big"]}}}),),
         "search_space.overrides.block_size: choice 'big' is text, but block_size's choices are numbers ([16, 32]) | fix: give choices like [16, 32]"),
    Case("empirical-value-bool", "a true among an empirical distribution's lengths",
         (put("workload", {"classes": [{"name": "a", "weight": 1, "input": {"dist": "empirical", "values": [100, True]},
                                        "output": {"dist": "fixed", "value": 5}}]}),),
         "{study}: workload.classes[0].input.values[1]: got true, which is not a number | fix: give a number (true/false is not one)"),
    Case("app-name-too-long", "a 150-character Serve application name", (put("promotion.app_name", "a" * 150),),
         "{study}: promotion.app_name: String should have at most 100 characters | fix: <*>"),
    Case("trace-huge-length", "a trace length of 10^30 (overflowed int64 and crashed)",
         (drop("workload.profile"), file("trace.jsonl", '{"arrival_s": 0, "input_len": 10, "output_len": 5}\n'
                                         '{"arrival_s": 1, "input_len": 1e30, "output_len": 5}\n'),
          put("workload.trace", {"path": "trace.jsonl"})),
         "workload.trace.path: trace {tmp}/trace.jsonl: a length is above 10,000,000 tokens (no model reads that much) | fix: fix the offending rows (lengths are tokens, not characters or bytes)"),
    Case("trace-span-ns", "trace arrival times in nanoseconds (a 30-year replay)",
         (drop("workload.profile"), parquet("trace.parquet", {"arrival_s": [0.0, 1e18], "input_len": [10, 10],
                                                               "output_len": [5, 5]}),
          put("workload.trace", {"path": "trace.parquet"})),
         "workload.trace.path: trace {tmp}/trace.parquet: its requests span 1e+18 s, more than 30 days | fix: give arrival_s in seconds from the trace's start (not milliseconds or epoch nanoseconds), or cut the trace"),
    Case("trace-empty-cls", "a trace row with an empty class name (crashed)",
         (drop("workload.profile"), parquet("trace.parquet", {"arrival_s": [0.0, 1.0], "input_len": [10, 10],
                                                               "output_len": [5, 5], "cls": ["a", ""]}),
          put("workload.trace", {"path": "trace.parquet"})),
         "workload.trace.path: trace {tmp}/trace.parquet: cls is missing or empty on some rows | fix: give every row a class name, or drop the cls column"),
    Case("trace-not-utf8", "a JSONL trace saved in Latin-1 (crashed with UnicodeDecodeError)",
         (drop("workload.profile"), file("trace.jsonl", '{"arrival_s": 0, "input_len": 10, "output_len": 5, "cls": "caf\xe9"}\n'
                                         .encode("latin-1")), put("workload.trace", {"path": "trace.jsonl"})),
         "{tmp}/trace.jsonl: {tmp}/trace.jsonl is not UTF-8 text (invalid continuation byte) | fix: save the file as UTF-8"),
    Case("engine-command-empty", "engines.vllm.command: [] (no program)",
         (sim_engine_as("vllm", "python3"), put("engines.vllm.command", [])),
         "{study}: engines.vllm.command: command needs the program first (a non-empty list of plain arguments) | fix: write e.g. command: [/opt/venv/bin/python, -m, vllm.entrypoints.openai.api_server], or leave it out"),
    Case("engine-command-missing", "an engine command whose program does not exist",
         (sim_engine_as("vllm", "python3"), put("engines.vllm.command", ["/nonexistent/bin/vllm", "serve"])),
         "engines.vllm.command: the engine command's program '/nonexistent/bin/vllm' is not found or not executable | fix: give the program's path (or a name on PATH), or set engines.vllm.check_args: false when it exists only on the cluster's GPU nodes"),
    Case("engine-env-bad-name", "an environment variable name with '='",
         (sim_engine_as("vllm", "python3"), put("engines.vllm.env", {"CUDA_VISIBLE_DEVICES=0": "1"})),
         "{study}: engines.vllm.env: 'CUDA_VISIBLE_DEVICES=0' is not an environment variable name | fix: use letters, digits and _"),
    Case("study-endless-file", "--study /dev/zero (read until memory ran out)", (cli("--study", "/dev/zero"),),
         "/dev/zero: a binary file, not YAML text | fix: give the study's .yaml file"),
    Case("study-huge-file", "a 20 MiB study file (a log given by mistake)", (file("big.yaml", "# x\n" * (5 * 2**20)),
                                                                            cli("--study", "{tmp}/big.yaml")),
         "{tmp}/big.yaml: larger than 16 MiB: not a study or space file | fix: give the study's .yaml file"),
    Case("request-timeout-tiny", "capacity.request_timeout_s: 0.001 (every request would time out; a whole study ran)",
         (put("capacity.request_timeout_s", 0.001),),
         "{study}: capacity.request_timeout_s: Input should be greater than or equal to 1 | fix: give a larger value"),
    Case("capacity-first-point-endless", "capacity.low: 0.0001 req/s (the first point alone would take months)",
         (put("capacity.low", 0.0001),),
         "{study}: capacity: the first load point alone would send for 833 h (300 requests at 0.0001 req/s) | fix: raise capacity.low, or lower requests_per_point"),
    Case("concurrency-below-one", "capacity.low: 0.5 streams in concurrency mode", (put("capacity.mode", "concurrency"),
                                                                                   put("capacity.low", 0.5)),
         "{study}: capacity: low is a number of concurrent streams, at least 1, got 0.5 | fix: give low >= 1"),
    Case("gpus-per-trial-tiny", "resources.gpus_per_trial: 0.000001", (put("resources", {"gpus_per_trial": 1e-6}),),
         "{study}: resources.gpus_per_trial: gpus_per_trial 1e-06 is below any usable share | fix: give 0 (the engine's tensor parallel size), a share like 0.5, or whole GPUs"),
    Case("space-file-as-study", "a search-space file given as --study", (cli("--study", "{root}/search_spaces/vllm.yaml"),),
         "{root}/search_spaces/vllm.yaml: {root}/search_spaces/vllm.yaml is a search-space file (it has params:), not a study | fix: give a study with --study, and point its search_space.file at vllm.yaml"),
    # -- search-space files: values that would crash the sampler or silently switch a knob off
    Case("space-step-zero", "a float parameter with step: 0", (space_edit(param("gpu_memory_utilization", step=0)),),
         "{tmp}/space.yaml: params.gpu_memory_utilization: step must be > 0, got 0 | fix: give a positive step, or leave it out"),
    Case("space-int-fraction", "an int parameter with low: 1.5", (space_edit(param("max_num_seqs", low=1.5)),),
         "{tmp}/space.yaml: params.max_num_seqs: an int parameter needs whole numbers for low, high and step, got low=1.5 high=1024 | fix: round them, or make the parameter type: float"),
    Case("space-default-text", "a numeric default written as text", (space_edit(param("max_num_seqs", default="many")),),
         "{tmp}/space.yaml: params.max_num_seqs: default 'many' is not a whole number | fix: give the engine's own default as a number, or null when the engine decides"),
    Case("space-bool-default", "a bool parameter with default: 1", (space_edit(param("enable_prefix_caching", default=1)),),
         "{tmp}/space.yaml: params.enable_prefix_caching: default 1 of a bool parameter is not true or false | fix: give true, false, or null when the engine decides"),
    Case("space-when-unknown", "a `when` on a parameter that does not exist",
         (space_edit(param("max_num_partial_prefills", when={"chunked_prefill": True})),),
         "search_space.file params.max_num_partial_prefills.when: condition on unknown parameter 'chunked_prefill' | fix: known: [<*>]"),
    Case("space-when-never", "a `when` value the parent never takes",
         (space_edit(param("max_num_partial_prefills", when={"enable_chunked_prefill": "yes"})),),
         "search_space.file params.max_num_partial_prefills.when: enable_chunked_prefill can never be 'yes' (its values: true/false), so the condition never holds | fix: use one of enable_chunked_prefill's values"),
    Case("space-when-empty-list", "a `when` listing no values",
         (space_edit(param("max_num_partial_prefills", when={"enable_chunked_prefill": []})),),
         "search_space.file params.max_num_partial_prefills.when: condition on enable_chunked_prefill lists no values, so it never holds | fix: list the enable_chunked_prefill values it applies to, or drop the condition"),
    Case("space-if-unknown", "a constraint's `if` on a parameter that does not exist",
         (space_edit(first_if({"chunked": True})),),
         "search_space.file constraints[0].if: condition on unknown parameter 'chunked' | fix: known: [<*>]"),
    Case("study-if-never", "a study constraint whose `if` value is not a choice",
         (put("search_space", {"constraints": [{"require": "max_num_seqs <= 256", "if": {"block_size": 64}}]}),),
         "search_space.constraints[0].if: block_size can never be 64 (its values: [16, 32]), so the condition never holds | fix: use one of block_size's values"),
    # -- the command line's paths
    Case("cli-output-empty", "--output '' (would be the current folder)", (cli("--output", ""),),
         "argument --output: is empty; give a path"),
    Case("cli-output-root", "--output / (every run file in the file system root)", (cli("--output", "/"),),
         "argument --output: / is the file system root; give a folder for this study"),
    Case("cli-study-empty", "--study ''", (cli("--study", " "),), "argument --study: is empty; give a path"),
    # -- --resume over a folder that is not this study's
    Case("resume-other-study", "--resume on another study's output folder", (out_file("state.json", STATE), cli("--resume")),
         "--resume: output folder {tmp}/out holds study 'other', not 'bad' | fix: give that study's file, or choose another --output for 'bad'"),
    Case("resume-changed-sla", "--resume after the SLA was edited (the finished trials were measured under the old one)",
         (out_file("state.json", STATE.replace('"other"', '"bad"').replace("}", ', "measured": {"sla": "0123456789abcdef"}}')),
          cli("--resume")),
         "--resume: {study} changed since the study started: sla (the finished trials were measured under the old settings, so they would not compare) | fix: undo the change to sla (budget, resources, timeouts, the sampler, tracking and promotion may change), or run the changed study in another --output"),
    Case("resume-truncated-state", "--resume with a truncated state.json", (out_file("state.json", STATE[:40]), cli("--resume")),
         "--resume: {tmp}/out/state.json is not valid JSON (truncated or corrupt: <*>) | fix: " + RESUME_FIX),
    Case("resume-state-not-servetune", "--resume with a state.json that is not servetune's", (out_file("state.json", "[1, 2]"), cli("--resume")),
         "--resume: {tmp}/out/state.json lacks the study's MLflow run id (not a servetune state file?) | fix: " + RESUME_FIX),
    Case("resume-corrupt-trials", "--resume with a corrupt trials.parquet",
         (out_file("state.json", STATE.replace('"other"', '"bad"')), out_file("trials.parquet", b"PAR1garbage"), cli("--resume")),
         "--resume: {tmp}/out/trials.parquet cannot be read (<*>) | fix: restore it from a backup (or MLflow's copy), or start afresh in another --output"),
]


def fifo(name: str) -> Edit:
    """A named pipe with no writer (opening it for reading waits forever)."""
    def edit(c: Ctx) -> None:
        import os

        (c.tmp / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(c.tmp / name)
    return edit


def link_loop(name: str) -> Edit:
    """Two symbolic links pointing at each other."""
    def edit(c: Ctx) -> None:
        (c.tmp / name).symlink_to(c.tmp / f"{name}.other")
        (c.tmp / f"{name}.other").symlink_to(c.tmp / name)
    return edit


def trace_at(name: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.data["workload"].pop("profile", None)
        c.data["workload"]["trace"] = {"path": name}
    return edit


def dataset_at(name: str, **settings: Any) -> Edit:
    def edit(c: Ctx) -> None:
        c.data["workload"].pop("profile", None)
        c.data["workload"]["dataset"] = {"path": name, **{k: v.format(tmp=c.tmp) if isinstance(v, str) else v
                                                           for k, v in settings.items()}}
    return edit


SHAREGPT = '{"conversations": [{"from": "human", "value": "hello there how are you"}, {"from": "gpt", "value": "fine thanks a lot"}]}\n'
DEEP_JSON = "[" * 100_000 + "]" * 100_000

# Audit 2 (new kinds of input): YAML structure, paths that are not plain files, files the readers choke on.
CASES += [
    # -- YAML structure
    Case("yaml-list-as-key", "a list used as a mapping key (`? [a, b]`; crashed with TypeError)",
         (raw("name: bad\n? [a, b]\n: 1\n"),),
         "{study}:2:3: malformed YAML: a list used as a key (keys are names) | fix: fix the YAML syntax at that line"),
    Case("yaml-second-document", "two YAML documents in one file (a `---` line in the middle)",
         (raw("name: bad\n---\nname: other\n"),),
         "{study}:2:1: a second YAML document (a '---' line) in one file | fix: keep one document: remove that '---' line (and merge what follows into the first)"),
    # -- paths that are not plain files
    Case("study-named-pipe", "--study names a named pipe (hung, waiting for a writer)", (fifo("s.fifo"), study_at("s.fifo")),
         "{tmp}/s.fifo: {tmp}/s.fifo is a named pipe, not a file (reading it would wait for a writer) | fix: save the text to a .yaml file and give that path"),
    Case("study-link-loop", "--study names a symbolic link loop (said 'file not found')", (link_loop("loop.yaml"), study_at("loop.yaml")),
         "{tmp}/loop.yaml: {tmp}/loop.yaml is a symbolic link to nothing (its target is missing, or the links loop) | fix: point the link at the file, or give the file's own path"),
    Case("space-file-is-folder", "search_space.file names a folder (said 'not found')",
         (file("spaces/x", ""), put("search_space", {"file": "spaces"})),
         "search_space.file: search-space file {tmp}/spaces is a folder | fix: give the path of a .yaml search-space file"),
    Case("space-file-named-pipe", "search_space.file names a named pipe", (fifo("sp.yaml"), put("search_space", {"file": "sp.yaml"})),
         "search_space.file: search-space file {tmp}/sp.yaml is a named pipe | fix: give the path of a .yaml search-space file"),
    Case("trace-named-pipe", "a trace that is a named pipe (hung)", (fifo("t.jsonl"), trace_at("t.jsonl")),
         "workload.trace.path: trace {tmp}/t.jsonl is a named pipe, not a file (reading it would wait for a writer) | fix: save the trace to a file and give that path"),
    Case("trace-is-folder", "a trace path that is a folder (said \"unknown trace format ''\")", (file("traces/a.jsonl", ""), trace_at("traces")),
         "workload.trace.path: trace {tmp}/traces is a folder, not a trace file | fix: give a .parquet or .jsonl file, an Azure trace .csv or a Mooncake .jsonl"),
    Case("trace-list-column", "a Parquet trace whose input_len cells are lists (crashed with TypeError)",
         (parquet("trace.parquet", {"arrival_s": [0.0, 1.0], "input_len": [[10], [20]], "output_len": [5, 5]}), trace_at("trace.parquet")),
         "workload.trace.path: trace {tmp}/trace.parquet: input_len holds lists, not one number per row | fix: use one number per row for times and lengths"),
    Case("dataset-named-pipe", "a dataset that is a named pipe (hung)", (fifo("d.jsonl"), dataset_at("d.jsonl")),
         "workload.dataset.path: dataset {tmp}/d.jsonl is a named pipe, not a file (reading it would wait for a writer) | fix: save the dataset to a file and give that path"),
    Case("dataset-nested-deep", "a JSON dataset nested 100,000 lists deep (crashed with RecursionError)",
         (file("d.json", DEEP_JSON), dataset_at("d.json")),
         "workload.dataset.path: dataset {tmp}/d.json nests JSON too deeply to read | fix: give a list of conversations (or one JSON object per line)"),
    Case("dataset-state-not-utf8", "a save_to_disk folder whose state.json is not UTF-8 (crashed with UnicodeDecodeError)",
         (file("ds/state.json", b"\xff\xfe{"), dataset_at("ds")),
         "workload.dataset.path: {tmp}/ds/state.json is not a datasets state file | fix: give a folder written by save_to_disk"),
    Case("dataset-tokenizer-empty", "dataset.tokenizer naming a folder without tokenizer files (crashed in transformers)",
         (file("d.jsonl", SHAREGPT), file("tok/README", "no tokenizer here"), dataset_at("d.jsonl", tokenizer="{tmp}/tok")),
         "workload.dataset.tokenizer: cannot load the tokenizer in {tmp}/tok (<*>) | fix: give a folder with the model's tokenizer files (tokenizer.json or tokenizer_config.json and its vocabulary), or leave tokenizer out to count words"),
]

MANIFEST_FIX = "use sha256sum output"
CASES += [
    # -- the model's files
    Case("manifest-not-utf8", "a SHA-256 manifest that is not UTF-8 (crashed with UnicodeDecodeError)",
         (model_dir({"weights.bin": b"hello"}), file("m.sha256", b"\xff\xfe junk\n"), put("model.sha256_manifest", "m.sha256")),
         "model.sha256_manifest: SHA-256 manifest {tmp}/m.sha256 is not UTF-8 text (invalid start byte) | fix: use sha256sum output, saved as UTF-8"),
    Case("manifest-named-pipe", "a SHA-256 manifest that is a named pipe (hung)",
         (model_dir({"weights.bin": b"hello"}), fifo("m.sha256"), put("model.sha256_manifest", "m.sha256")),
         "model.sha256_manifest: SHA-256 manifest {tmp}/m.sha256 is a named pipe, not a file | fix: give the sha256sum output saved to a file"),
    Case("manifest-empty", "a SHA-256 manifest listing no files (verified nothing, silently)",
         (model_dir({"weights.bin": b"hello"}), file("m.sha256", "# nothing yet\n"), put("model.sha256_manifest", "m.sha256")),
         "model.sha256_manifest: SHA-256 manifest {tmp}/m.sha256 lists no files, so it verifies nothing | fix: save sha256sum output of the model's files there, or leave sha256_manifest out"),
    Case("manifest-outside-model", "a manifest entry outside the model folder (../../etc/hostname)",
         (model_dir({"weights.bin": b"hello"}), file("m.sha256", f"{SHA_OF_HELLO}  ../../etc/hostname\n"),
          put("model.sha256_manifest", "m.sha256")),
         "{tmp}/m.sha256:1: model file ../../etc/hostname listed in the manifest is outside the model folder | fix: list the model's files by their paths inside its folder (run sha256sum there)"),
    Case("manifest-not-hex", "a manifest digest of 64 characters that are not hexadecimal (said 'does not match')",
         (model_dir({"weights.bin": b"hello"}), file("m.sha256", "z" * 64 + "  weights.bin\n"), put("model.sha256_manifest", "m.sha256")),
         "{tmp}/m.sha256:1: line 1: '" + "z" * 64 + "' is not a SHA-256 (64 hexadecimal digits) | fix: " + MANIFEST_FIX),
    Case("manifest-lists-folder", "a manifest entry that is a folder (said 'model: cannot use ...: Is a directory')",
         (model_dir({"weights.bin": b"hello"}), file("model/sub/x", ""), file("m.sha256", f"{SHA_OF_HELLO}  sub\n"),
          put("model.sha256_manifest", "m.sha256")),
         "{tmp}/m.sha256:1: model file sub listed in the manifest is not a regular file | fix: list files only (sha256sum output), not folders or pipes"),
    Case("model-config-list", "a local model whose config.json is a JSON list (crashed with AttributeError)",
         (model_dir({"config.json": b"[1, 2]"}),),
         "model.name: {tmp}/model/config.json is not a JSON object of settings (got list) | fix: restore the model's config.json"),
    Case("model-config-negative", "config.json with max_position_embeddings -1 (said 'give at most -1')",
         (model_dir({"config.json": b'{"num_attention_heads": 32, "max_position_embeddings": -1}'}),),
         "model.name: {tmp}/model/config.json: max_position_embeddings is -1, not a positive whole number | fix: restore the model's config.json"),
    Case("model-config-deep", "config.json nested 100,000 lists deep (crashed with RecursionError)",
         (model_dir({"config.json": DEEP_JSON.encode()}),),
         "model.name: {tmp}/model/config.json is not valid JSON (nested too deeply) | fix: restore the model's config.json"),
    # -- fixed, overrides and exclude: one role per parameter
    Case("fixed-null", "search_space.fixed: {max_num_seqs: null} (crashed with TypeError)",
         (put("search_space", {"fixed": {"max_num_seqs": None}}),),
         "{study}: search_space.fixed: max_num_seqs is null, which sets nothing | fix: give a value, or list max_num_seqs under exclude to leave it to the engine's default"),
    Case("fixed-list", "a fixed argument given a list (crashed with TypeError)", (put("search_space", {"fixed": {"max_num_seqs": [1, 2]}}),),
         "search_space.fixed.max_num_seqs: the sim engine cannot take these arguments (TypeError: <*>) | fix: give each fixed argument a value of the kind the engine takes (a number, true/false or text)"),
    Case("fixed-and-overridden", "a parameter both fixed and narrowed (the override was silently ignored)",
         (put("search_space", {"fixed": {"max_num_seqs": 32}, "overrides": {"max_num_seqs": {"high": 64}}}),),
         "{study}: search_space.overrides: max_num_seqs is both fixed and narrowed under overrides (the fixed value would win) | fix: keep max_num_seqs under fixed or under overrides, not both"),
    Case("excluded-and-fixed", "a parameter both excluded and fixed", (put("search_space", {"fixed": {"max_num_seqs": 64}, "exclude": ["max_num_seqs"]}),),
         "{study}: search_space.exclude: max_num_seqs is both excluded (the engine's default) and fixed to 64 | fix: keep it under fixed or under exclude, not both"),
    Case("excluded-and-overridden", "a parameter both excluded and narrowed (said 'override of unknown parameter')",
         (put("search_space", {"exclude": ["max_num_seqs"], "overrides": {"max_num_seqs": {"high": 64}}}),),
         "{study}: search_space.overrides: max_num_seqs is both excluded and narrowed under overrides | fix: drop it from exclude to search it, or drop the override"),
    Case("exclude-twice", "a parameter excluded twice (said 'cannot exclude unknown parameter')",
         (put("search_space", {"exclude": ["max_num_seqs", "max_num_seqs"]}),),
         "{study}: search_space.exclude: 'max_num_seqs' listed twice | fix: list each parameter once"),
    # -- --resume and --log-only
    Case("resume-nothing-there", "--resume on an output folder no study ran in (started a fresh study)", (cli("--resume"),),
         "--resume: output folder {tmp}/out holds no study to resume (no state.json) | fix: give the --output of the stopped run, or leave --resume out to start the study afresh"),
    Case("resume-state-folder", "--resume where state.json is a folder (crashed with IsADirectoryError)",
         (out_file("state.json/x", ""), cli("--resume")),
         "--resume: {tmp}/out/state.json is a folder, not the study's state.json | fix: " + RESUME_FIX),
    Case("resume-state-named-pipe", "--resume where state.json is a named pipe (hung)", (fifo("out/state.json"), cli("--resume")),
         "--resume: {tmp}/out/state.json is a named pipe, not the study's state.json | fix: " + RESUME_FIX),
    Case("resume-trials-named-pipe", "--resume where trials.parquet is a named pipe (hung)",
         (out_file("state.json", STATE.replace('"other"', '"bad"')), fifo("out/trials.parquet"), cli("--resume")),
         "--resume: {tmp}/out/trials.parquet is a named pipe, not the study's trials.parquet | fix: " + RESUME_FIX),
    Case("resume-state-deep", "--resume with a state.json nested 100,000 lists deep (crashed with RecursionError)",
         (out_file("state.json", DEEP_JSON), cli("--resume")),
         "--resume: {tmp}/out/state.json is not valid JSON (truncated or corrupt: nested too deeply) | fix: " + RESUME_FIX),
    Case("log-only-with-study-flags", "--log-only with --dry-run and the study's flags (logged to MLflow anyway, ignoring them)",
         (cli("--log-only", "{tmp}/out", "--dry-run"),),
         "--log-only: --study, --output, --dry-run cannot go with --log-only, which only logs a study's output folder to MLflow (it runs, checks and promotes nothing) | fix: drop --study, --output, --dry-run (--mlflow-uri and -v may stay), or run the study without --log-only"),
]

NAME_FIX = "write snake_case names like max_num_seqs, or speculative_config.method for a field (servetune makes the --flag)"
CASES += [
    # -- SLA terms that parse but cannot mean what was written
    Case("sla-limit-overflow", "an SLA limit of 1e400 (read as infinity; the fix said \"write 'p99_ttft_ms <= inf'\")",
         (put("sla", ["p99_ttft_ms <= 1e400"]),),
         "{study}: sla[0]: SLA limit 1e400 for p99_ttft_ms is not a finite number | fix: give a limit in milliseconds, e.g. 'p99_ttft_ms <= 500'"),
    Case("sla-median-and-p50", "median_ttft_ms and p50_ttft_ms both limited (one statistic, two limits)",
         (put("sla", ["median_ttft_ms <= 500", "p50_ttft_ms <= 600"]),),
         "{study}: sla: median_ttft_ms and p50_ttft_ms are the same statistic (the median is the 50th percentile) | fix: keep one limit: median_ttft_ms or p50_ttft_ms"),
    # -- search-space definitions
    Case("override-step-beyond-range", "a step larger than the narrowed range (only low was ever tried)",
         (put("search_space", {"overrides": {"gpu_memory_utilization": {"low": 0.8, "high": 0.85, "step": 0.5}}}),),
         "search_space.overrides.gpu_memory_utilization: step 0.5 is larger than the range 0.8..0.85, so only low=0.8 would ever be tried | fix: give a step of at most 0.05, or widen the range"),
    Case("space-step-beyond-range", "a space file's int parameter with step 100 over 1..4",
         (space_edit(param("max_num_partial_prefills", step=100)),),
         "{tmp}/space.yaml: params.max_num_partial_prefills: step 100 is larger than the range 1..4, so only low=1 would ever be tried | fix: give a step of at most 3, or widen the range"),
    Case("override-choice-twice", "a choice listed twice (drawn twice as often)",
         (put("search_space", {"overrides": {"block_size": {"choices": [16, 16]}}}),),
         "search_space.overrides.block_size: choice 16 listed twice (it would be drawn twice as often) | fix: list each choice once"),
    Case("space-choice-null", "a null among a space file's choices (said '.int: ...' for each type in turn)",
         (space_edit(param("block_size", choices=[16, None])),),
         "{tmp}/space.yaml: params.block_size.choices[1]: got null, which is not a number, text or true/false | fix: give a number, text or true/false"),
    Case("space-param-smuggles-flag", "a space file parameter named 'x --trust-remote-code' (a flag smuggled into the argv)",
         (space_edit(lambda d: d["params"].__setitem__("max-num-seqs --trust-remote-code", {"type": "int", "low": 1, "high": 2})),),
         "{tmp}/space.yaml: params: 'max-num-seqs --trust-remote-code' is not an engine argument name | fix: " + NAME_FIX),
    Case("space-draft-arg-flag", "a draft_arg that is not an argument name",
         (space_edit(param("speculative_config.method", draft_arg="x --trust-remote-code")),),
         "{tmp}/space.yaml: params.speculative_config.method: draft_arg 'x --trust-remote-code' is not an engine argument name | fix: write a snake_case name like speculative_config.model (servetune makes the --flag from it)"),
    Case("space-choice-needs-unknown", "choice_needs naming a speculative method that does not exist (the choice was never offered)",
         (space_edit(param("speculative_config.method", choice_needs={"eagle3": "eagle9"})),),
         "{tmp}/space.yaml: params.speculative_config.method.choice_needs.eagle3: Input should be 'ngram', 'eagle3', 'dflash' or 'mtp' | fix: use one of the allowed values"),
    Case("space-choice-wrong-kind", "a text choice among numbers in a space file (named args.block_size)",
         (space_edit(param("block_size", choices=[16, "a"])),),
         "search_space.file params.block_size: block_size='a' must be int (with block_size=a) | fix: give a int value"),
    Case("space-when-itself", "a parameter whose `when` names itself",
         (space_edit(param("max_num_partial_prefills", when={"max_num_partial_prefills": 1})),),
         "search_space.file params.max_num_partial_prefills.when: max_num_partial_prefills's condition depends on max_num_partial_prefills itself (max_num_partial_prefills -> max_num_partial_prefills) | fix: condition max_num_partial_prefills on other parameters only"),
    Case("space-when-cycle", "two parameters conditioned on each other",
         (space_edit(param("enable_chunked_prefill", when={"max_num_partial_prefills": 1})),),
         "search_space.file params.enable_chunked_prefill.when: enable_chunked_prefill's condition depends on enable_chunked_prefill itself (enable_chunked_prefill -> max_num_partial_prefills -> enable_chunked_prefill) | fix: condition enable_chunked_prefill on other parameters only"),
    Case("constraint-equals-never", "a constraint `max_num_seqs == 5` outside its range 16..1024 (every config rejected)",
         (put("search_space", {"constraints": [{"require": "max_num_seqs == 5"}]}),),
         "search_space.constraints[0]: constraint 'max_num_seqs == 5' can never hold within the parameter ranges | fix: widen the ranges or drop the constraint"),
    Case("constraint-self", "a constraint `a < a`", (put("search_space", {"constraints": [{"require": "max_num_seqs < max_num_seqs"}]}),),
         "search_space.constraints[0]: constraint 'max_num_seqs < max_num_seqs' can never hold (a value compared with itself) | fix: compare two different parameters, or drop the constraint"),
    Case("constraints-exclude-every-choice", "`!=` constraints that rule out every choice of block_size",
         (put("search_space", {"constraints": [{"require": "block_size != 16"}, {"require": "block_size != 32"}]}),),
         "search_space.constraints: the sim constraints contradict each other: no value meets all of 'block_size != 16', 'block_size != 32' | fix: drop or loosen one of them"),
    # -- workload and capacity
    Case("lognormal-no-cap", "a lognormal length with sigma 1e6 and no max (lengths overflowed to negative numbers)",
         (put("workload", {"classes": dyn(inp={"dist": "lognormal", "median": 100, "sigma": 1e6})}),),
         "{study}: workload.classes[0].input: a lognormal with this sigma draws lengths above 10,000,000 tokens (about 1.01e+306 at 6 sigma) | fix: give max (the longest length in tokens), or a smaller sigma"),
    Case("abnormal-class-huge", "an abnormal class of 10^15-token prompts (skips the max_model_len check; filled memory)",
         (put("workload", {"classes": dyn(inp=10**15, abnormal=True)}),),
         "{study}: workload.classes[0].input.value: Input should be less than or equal to 10000000 | fix: give a smaller value"),
    Case("class-name-dotted", "a class name with a dot or newline (split wrongly in class.<name>.<key>, refused by MLflow)",
         (put("workload", {"classes": dyn(name="chat.v1")}),),
         "{study}: workload.classes[0].name: class name 'chat.v1' is not a plain name | fix: use only letters, digits, '_' and '-' (no dots or spaces): it becomes part of metric names like class.<name>.p99_ttft_ms"),
    Case("warmup-endless", "workload.warmup_requests: 10^9 (a billion requests before measuring)", (put("workload.warmup_requests", 10**9),),
         "{study}: workload.warmup_requests: Input should be less than or equal to 100000 | fix: give a smaller value"),
    Case("capacity-duration-and-requests", "both capacity.duration_s and requests_per_point (requests_per_point silently ignored)",
         (put("capacity.duration_s", 60),),
         "{study}: capacity: give one of requests_per_point (300) or duration_s (60), not both: duration_s wins and requests_per_point would be ignored | fix: keep the one you mean"),
    Case("objective-unknown-class", "a per-class objective naming a class the workload lacks (every trial unranked)",
         (put("objective.metric", "class.nope.output_throughput"),),
         "objective.metric: objective 'class.nope.output_throughput' names class 'nope', which the workload does not have | fix: use one of the workload's classes: ['customer_service', 'education', 'code_completion']"),
    Case("cli-mlflow-uri-blank", "--mlflow-uri ' ' (said '  is a file store')", (cli("--mlflow-uri", " "),),
         "--mlflow-uri: the tracking URI is blank (only spaces) | fix: give a tracking URI, or leave the flag out for SQLite in the output folder"),
]

CONTROL_FIX = ("write it on one line, without control characters (a line break here would split log lines, argv values "
               "and error messages)")
CASES += [
    Case("repair-constraint-never", "a repair constraint no value in range can meet (every config rejected at run time)",
         (put("search_space", {"constraints": [{"require": "max_num_seqs >= 4096", "action": "repair"}]}),),
         "search_space.constraints[0]: constraint 'max_num_seqs >= 4096' can never hold within the parameter ranges | fix: widen the ranges or drop the constraint"),
    Case("fixed-breaks-file-constraint", "a fixed value that leaves a space file's repair constraint no value",
         (put("search_space", {"fixed": {"max_num_batched_tokens": 8}}),),
         "search_space.file constraints[1]: constraint 'max_num_seqs <= max_num_batched_tokens' can never hold within the parameter ranges | fix: widen the ranges or drop the constraint"),
    Case("mlflow-uri-line-break", "tracking.mlflow_uri with a line break (the error message split over two lines)",
         (put("tracking.mlflow_uri", "sqlite:////tmp/x.db\nhttp://other"),),
         "{study}: tracking.mlflow_uri: holds the control character '\\n' | fix: " + CONTROL_FIX),
    Case("model-name-line-break", "model.name with a line break and a flag after it", (put("model.name", "Qwen/Qwen3-8B\n--trust-remote-code"),),
         "{study}: model.name: holds the control character '\\n' | fix: " + CONTROL_FIX),
    Case("cli-mlflow-uri-line-break", "--mlflow-uri with a line break", (cli("--mlflow-uri", "http://127.0.0.1:9\nx"),),
         "--mlflow-uri: the tracking URI holds a control character (a line break?) | fix: give the URI on one line"),
    Case("cli-output-link-loop", "--output naming a symbolic link loop (crashed with RuntimeError)",
         (link_loop("o1"), cli("--output", "{tmp}/o1")),
         "argument --output: {tmp}/o1 is a symbolic link loop; give a folder"),
]

CASES += [
    Case("fresh-run-over-unlogged-trials", "a fresh run (no --resume) over a folder whose trials MLflow lacks (deferred, not yet logged: they were deleted)",
         (out_file("state.json", STATE.replace('"other"', '"bad"')), out_file("tracking.json", "{}"),
          parquet("out/trials.parquet", {"trial_id": ["t0", "t1"], "outcome": ["ok", "ok"], "mlflow_run_id": [None, None]})),
         "--output: output folder {tmp}/out holds 2 finished trial(s) MLflow does not have yet; a fresh run would replace its trials.parquet and lose them | fix: continue with --resume (it logs them), log a deferred study first with --log-only {tmp}/out, or choose another --output"),
]

CASES += [
    Case("space-blocks-mixed", "per-engine search_space blocks beside shared keys (said \"unknown key 'sim'\")",
         (put("search_space", {"sim": {"overrides": {"max_num_seqs": {"high": 64}}}, "exclude": ["block_size"]}),),
         "{study}: search_space: search_space mixes per-engine blocks (['sim']) with shared keys (['exclude']) | fix: move ['exclude'] into each engine's block, or drop the engine blocks"),
    Case("space-block-null", "a per-engine search_space block left empty (null; said \"unknown key 'sim'\")",
         (put("search_space", {"sim": None}),),
         "{study}: search_space.sim: the sim block must be a mapping (file, overrides, fixed, exclude, constraints), got null | fix: write search_space: {sim: {overrides: ...}}, or leave the sim block out"),
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
        "`study.yaml` stands for the study file's path, `<repo>` for the servetune checkout, `<python>` for the",
        "interpreter, `…` for text that comes from the OS, a library, or a list that grows (known GPUs, shapes,",
        "engine arguments).",
        "",
        "Beyond these cases, `tests/reliability/fuzz_inputs.py` replaces every value of the default study and of",
        "the built-in vLLM space, one at a time, with values of the wrong kind (null, empty, text, negative,",
        "infinite, 10^30, lists, a 5,000-character path...): each must end in exit 0 or a clean exit 2, never a",
        "traceback (`tests/reliability/test_fuzz_inputs.py`; `python tests/reliability/fuzz_inputs.py --all` for",
        "every study and space file in the repository).",
        "",
        "| case | mistake | message |",
        "|---|---|---|",
    ]
    for c in CASES:
        msg = c.message.replace("{study}", "study.yaml").replace("{tmp}", "…").replace("{root}", "<repo>")
        msg = msg.replace("{python}", "<python>")
        msg = msg.replace(WILD, "…")
        msg = msg.replace("|", "\\|")
        note = " (message being fixed: the test is an expected failure until then)" if c.bug else ""
        lines.append(f"| `{c.id}` | {c.what}{note} | `{msg}` |")
    lines += ["", f"{len(CASES)} cases. Regenerate with `python tests/reliability/bad_input_cases.py > docs/bad-input.md`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
