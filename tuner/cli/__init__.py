"""`servetune`: one command with the subcommands users of vllm, guidellm and mlflow expect.

    servetune run [--study S] ...     a study: search, record in MLflow, promote  (= python -m tuner.run)
    servetune bench --url U ...       measure one server under load               (= python -m tuner.bench)
    servetune promote --study-run ID  promote, deploy, roll back                   (= python -m tuner.promote)
    servetune sim --model M ...       the simulated engine's server                (= python -m tuner.sim.server)
    servetune host --bench R ...      your host's factors for the simulator        (= python -m tuner.sim.host)

Each subcommand is the same `main(argv)` as its `python -m` form, imported only when chosen, so
`servetune --help` imports no Ray, Optuna or MLflow.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# subcommand -> (module with main(argv), one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("tuner.run.cli", "run a study: search with Ray Tune + Optuna, record in MLflow, promote the winner"),
    "bench": ("tuner.bench.cli", "measure one OpenAI-compatible server under a workload (latency, throughput, SLA)"),
    "promote": ("tuner.promote.__main__", "promote a finished study, deploy it to Ray Serve, or roll staging back"),
    "sim": ("tuner.sim.server", "start the simulated engine as an OpenAI-compatible server"),
    "host": ("tuner.sim.host", "fit the simulator to your host from one low-rate `vllm bench serve --save-detailed` run"),
}


def usage() -> str:
    from tuner import __version__

    width = max(len(c) for c in COMMANDS)
    lines = [f"usage: servetune <command> [options]   (servetune {__version__})", "",
             "Find, confirm and ship the best SLA-feasible serving config for vLLM and SGLang, on Ray.", "",
             "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "`servetune <command> --help` for a command's options; `python -m tuner.<command>` is the same."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from tuner import __version__

        print(f"servetune {__version__}")
        return 0
    if args[0] not in COMMANDS:
        print(f"error: unknown command {args[0]!r} | fix: use one of {', '.join(COMMANDS)}\n\n{usage()}",
              file=sys.stderr)
        return 2
    from tuner.common.prog import servetune_front

    servetune_front()  # usage lines and suggested commands say `servetune <command>`
    if args[0] == "run":
        from tuner.run.cli import run_main
        from tuner.run.local_ray import finish_quietly

        status = run_main(args[1:])
        finish_quietly()  # a signal now must not cut Ray's atexit shutdown short
        return status
    module = importlib.import_module(COMMANDS[args[0]][0])
    return int(module.main(args[1:]) or 0)
