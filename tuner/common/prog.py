"""The name each command was invoked by, for its usage line and the commands it suggests.

`servetune run --help` must say `usage: servetune run`, and a study started with `servetune run` must
suggest `servetune run ... --resume`, while `python -m tuner.run` keeps its own spelling. The `servetune`
front (tuner.cli) and `python -m tuner` declare themselves here before the subcommand's main runs.
"""

from __future__ import annotations

# subcommand -> its `python -m` form (the default when nothing declared another front)
MODULE_FORMS: dict[str, str] = {
    "run": "python -m tuner.run",
    "bench": "python -m tuner.bench",
    "promote": "python -m tuner.promote",
    "sim": "python -m tuner.sim.server",
    "host": "python -m tuner.sim.host",
}
_forms: dict[str, str] = {}


def invoked_as(command: str, form: str) -> None:
    """Declare how `command` was invoked (e.g. "run", "servetune run")."""
    _forms[command] = form


def servetune_front() -> None:
    """Every subcommand is spelled `servetune <name>` from now on in this process."""
    for name in MODULE_FORMS:
        _forms[name] = f"servetune {name}"


def prog(command: str) -> str:
    """How to spell `command` for the user: as it was invoked, else its `python -m` form."""
    return _forms.get(command, MODULE_FORMS[command])
