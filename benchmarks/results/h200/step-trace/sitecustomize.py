"""Step tracer for vLLM's engine core (issue 17 probe): with STEP_TRACE_DIR set, every process that imports vLLM's
scheduler / uni-process executor records, per call, (kind, t_start, t_end, ...) on CLOCK_MONOTONIC (time.monotonic,
the clock vllm bench's perf_counter reads too) into STEP_TRACE_DIR/trace.<pid>.jsonl, flushed every 0.5 s.
kinds: s = Scheduler.schedule (tokens, new requests, new requests' prompt tokens, running, waiting),
x = UniProcExecutor.execute_model (CPU prep + launch), t = sample_tokens, w = AsyncOutputFuture.result (GPU wait),
u = Scheduler.update_from_output (tokens, new requests of that step)."""
import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import time

DIR = os.environ.get("STEP_TRACE_DIR")
REC: list = []
_PID = [0]


def _ensure_thread() -> None:
    """The flushing thread of this process (a forked child has none)."""
    if _PID[0] != os.getpid():
        _PID[0] = os.getpid()
        threading.Thread(target=_flush_loop, daemon=True).start()


def _flush_loop() -> None:
    path = os.path.join(DIR, f"trace.{os.getpid()}.jsonl")
    while True:
        time.sleep(0.5)
        if REC:
            batch = REC[:]
            del REC[:len(batch)]
            with open(path, "a") as f:
                f.write("\n".join(json.dumps(r) for r in batch) + "\n")


def _timed(kind, fn, extra):
    def wrapper(*a, **k):
        t0 = time.monotonic()
        out = fn(*a, **k)
        t1 = time.monotonic()
        _ensure_thread()
        try:
            REC.append([kind, t0, t1, *extra(a, out)])
        except Exception as exc:  # noqa: BLE001  # a tracer must never break the engine
            REC.append([kind, t0, t1, "err", repr(exc)[:80]])
        return out
    wrapper.__wrapped__ = fn
    return wrapper


def _sched_extra(a, out):
    self = a[0]
    new = out.scheduled_new_reqs
    return [out.total_num_scheduled_tokens, len(new), sum(out.num_scheduled_tokens.get(r.req_id, 0) for r in new),
            len(self.running), len(self.waiting)]


def _upd_extra(a, out):
    so = a[1]
    return [so.total_num_scheduled_tokens, len(so.scheduled_new_reqs)]


def _exec_extra(a, out):
    so = a[1]
    return [so.total_num_scheduled_tokens, len(so.scheduled_new_reqs)]


def _none(a, out):
    return []


def _patch_sched(m) -> None:
    c = m.Scheduler
    c.schedule = _timed("s", c.schedule, _sched_extra)
    c.update_from_output = _timed("u", c.update_from_output, _upd_extra)


def _patch_exec(m) -> None:
    c = m.UniProcExecutor
    c.execute_model = _timed("x", c.execute_model, _exec_extra)
    c.sample_tokens = _timed("t", c.sample_tokens, _none)
    m.AsyncOutputFuture.result = _timed("w", m.AsyncOutputFuture.result, _none)


TARGETS = {"vllm.v1.core.sched.scheduler": _patch_sched, "vllm.v1.executor.uniproc_executor": _patch_exec}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in TARGETS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        orig = spec.loader.exec_module

        def exec_module(module, _orig=orig, _name=name):
            _orig(module)
            _ensure_thread()
            try:
                TARGETS[_name](module)
                REC.append(["patched", time.monotonic(), time.monotonic(), _name])
            except Exception as exc:  # noqa: BLE001  # nor its import
                REC.append(["patch-failed", time.monotonic(), time.monotonic(), _name, repr(exc)[:200]])
        spec.loader.exec_module = exec_module
        return spec


if DIR:
    os.makedirs(DIR, exist_ok=True)
    sys.meta_path.insert(0, _Finder())
