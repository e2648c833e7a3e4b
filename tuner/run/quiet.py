"""A quiet start: Ray's and Tune's own chatter stays out of the study's output unless --verbose.

Ray Tune's new console output prints a configuration box, TensorBoard hints and status lines that
tear the live progress table; the legacy reporter at verbose=0 (which the driver asks for) prints
nothing. Ray's own INFO/WARNING lines at start-up (the address it joined, the token-auth notice)
go through its logger, which `ray_log_level` sets. Everything set here is a default: an explicit
environment variable wins.
"""

from __future__ import annotations

import logging
import os

QUIET_ENV = {
    "RAY_AIR_NEW_OUTPUT": "0",  # the legacy reporter honours verbose=0: no config box, no status tables
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # no TensorBoard/CSV/JSON loggers, so no TensorBoard hint
    "RAY_DEDUP_LOGS": "1",
}


def quiet(verbose: bool) -> None:
    """Set the quiet defaults before Ray or Tune are imported; nothing when `verbose`."""
    if verbose:
        return
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)


def ray_log_level(verbose: bool) -> int:
    return logging.INFO if verbose else logging.ERROR
