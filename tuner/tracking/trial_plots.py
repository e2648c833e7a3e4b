"""Each trial's own plots on its MLflow child run (plots/): small PNGs the artifact viewer shows inline.

- latency_cdf.png: per-request TTFT, TPOT and E2EL at the capacity point, SLA limits drawn;
- throughput.png: output tokens per second and requests in flight over the capacity point's run;
- load_points.png: output throughput and P99 TTFT at every load the capacity search measured.
PNG (matplotlib, headless) rather than HTML: no plotly.js copy per trial, and it renders offline.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tuner.common.numeric import finite_float
from tuner.spec.sla import SLATerm
from tuner.trial.result import TrialResult

PLOTS = ("latency_cdf.png", "throughput.png", "load_points.png")


def log(client: Any, run_id: str, t: TrialResult, sla: Sequence[SLATerm]) -> list[str]:
    """Draw and upload the plots this trial has data for; a plotting problem never fails the study."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            files = draw(t, sla, Path(tmp))
            for f in files:
                client.log_artifact(run_id, str(f), artifact_path="plots")
            return [f.name for f in files]
    except Exception as exc:  # noqa: BLE001 - plots are a convenience; the trial's numbers are already logged
        log_warning(t, exc)
        return []


def log_warning(t: TrialResult, exc: BaseException) -> None:
    logging.getLogger(__name__).warning("trial %s: plots not drawn (%s: %s)", t.trial_id, type(exc).__name__, exc)


def draw(t: TrialResult, sla: Sequence[SLATerm], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: list[Path] = []
    rows = _records(t)
    if rows:
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
        for ax, metric in zip(axes, ("ttft", "tpot", "e2el"), strict=True):
            values = np.sort([v for v in (r.get(f"{metric}_ms") for r in rows) if finite_float(v) is not None])
            if values.size:
                ax.plot(values, np.arange(1, values.size + 1) / values.size, color="#1f77b4")
            for term in sla:
                if term.latency is not None and term.latency[1] == metric:
                    ax.axvline(term.limit, color="#d62728", linestyle="--", label=str(term))
            ax.axhline(0.99, color="#888888", linestyle=":")
            ax.set_title(f"{metric.upper()} (ms)")
            ax.set_ylim(0, 1.01)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="lower right")
        axes[0].set_ylabel("fraction of requests")
        fig.suptitle(f"trial {t.number}: latency CDF at capacity {t.capacity}", fontsize=10)
        out.append(_save(fig, folder / "latency_cdf.png"))
        secs, tokens, inflight = _over_time(rows)
        if secs.size:
            fig, ax = plt.subplots(figsize=(8, 3.2))
            ax.plot(secs, tokens, color="#1f77b4", label="output tok/s")
            ax.set_xlabel("seconds from first send")
            ax.set_ylabel("output tokens / s")
            ax2 = ax.twinx()
            ax2.plot(secs, inflight, color="#ff7f0e", label="in flight")
            ax2.set_ylabel("requests in flight")
            fig.legend(loc="upper right", fontsize=7)
            ax.set_title(f"trial {t.number}: throughput over time at the capacity point", fontsize=10)
            out.append(_save(fig, folder / "throughput.png"))
    points = sorted((p for p in t.points if finite_float(p.get("load")) is not None), key=lambda p: p["load"])
    if points:
        fig, ax = plt.subplots(figsize=(8, 3.2))
        loads = [p["load"] for p in points]
        ax.plot(loads, [finite_float(p.get("output_throughput")) or np.nan for p in points], "o-", label="output tok/s")
        for p in points:
            if not p.get("feasible"):
                ax.plot([p["load"]], [finite_float(p.get("output_throughput")) or 0.0], "x", color="#d62728")
        ax.set_xlabel("offered load")
        ax.set_ylabel("output tokens / s")
        ax2 = ax.twinx()
        ax2.plot(loads, [finite_float(p.get("p99_ttft_ms")) or np.nan for p in points], "s--", color="#ff7f0e",
                 label="P99 TTFT ms")
        ax2.set_ylabel("P99 TTFT (ms)")
        fig.legend(loc="upper left", fontsize=7)
        ax.set_title(f"trial {t.number}: capacity search (x = SLA missed)", fontsize=10)
        out.append(_save(fig, folder / "load_points.png"))
    return out


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def _records(t: TrialResult) -> list[dict[str, Any]]:
    """Finished, measured requests of the capacity point (the trial keeps that point's records)."""
    if not t.records_path or not Path(t.records_path).exists():
        return []
    from tuner.common.atomic import read_table

    rows = read_table(Path(t.records_path)).to_pylist()
    return [r for r in rows if not r.get("warmup") and not r.get("error") and r.get("done_s") is not None]


def _over_time(rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-second bins: output tokens streamed, and requests between send and done."""
    start = min(r["sent_s"] for r in rows)
    bins = int(np.ceil(max(r["done_s"] for r in rows) - start)) + 1
    tokens = np.zeros(bins)
    inflight = np.zeros(bins)
    for r in rows:
        for t in r.get("token_times") or []:
            tokens[min(int(t - start), bins - 1)] += 1
        inflight[int(r["sent_s"] - start):int(r["done_s"] - start) + 1] += 1
    return np.arange(bins, dtype=float), tokens, inflight
