"""Ctrl-C and SIGTERM stop a study cleanly: running trials are stopped, finished ones kept, nothing promoted.

Ray Tune's own SIGINT handler ends the search as if it had finished (and the flow would then promote);
servetune takes SIGINT and SIGTERM itself instead. During the search a signal only raises a flag that the
executor reads (a Tune stopper, or the local executor's loop: trials are stopped, the driver returns normally); a second signal, or one outside the
search, raises KeyboardInterrupt. Either way the flow ends with exit status 130.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

EXIT_INTERRUPTED = 130
_NAMES: dict[int, str] = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class Interrupt:
    """Process-wide interrupt state. `searching` is True while an executor runs trials (the graceful path)."""

    signum: int | None = None
    searching = False
    failure: BaseException | None = None  # a fault that ends the search early (a full disk), raised after it

    @classmethod
    def install(cls) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread (e.g. tests calling main())
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # Tune would end the search as if finished
        for sig in _NAMES:
            signal.signal(sig, cls._handle)

    @classmethod
    def reset(cls) -> None:
        cls.signum, cls.searching, cls.failure = None, False, None

    @classmethod
    def _handle(cls, signum: int, frame: Any) -> None:
        first = cls.signum is None
        cls.signum = signum if first else cls.signum
        if first and cls.searching:
            print(f"\n{_NAMES.get(signum, signum)}: stopping the running trials; finished trials are kept "
                  "(send it again to stop at once)", file=sys.stderr, flush=True)
            return
        raise KeyboardInterrupt

    @classmethod
    def name(cls) -> str:
        return _NAMES.get(cls.signum, "interrupt") if cls.signum is not None else "Ctrl-C (SIGINT)"
