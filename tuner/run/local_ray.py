"""servetune's own local Ray listens on 127.0.0.1 only (GCS, raylet, dashboard and its agents, workers).

Ray resolves a node IP of 127.0.0.1 to the machine's outward address and then binds its gRPC servers and
agents there or on every interface; for a Ray that servetune starts for itself (no cluster to join) the
node IP is kept at 127.0.0.1, which makes Ray bind loopback only. `SERVETUNE_RAY_NODE_IP=<address>` asks
for another address (e.g. to let other nodes join); joining an existing cluster changes nothing.
"""

from __future__ import annotations

import os
from typing import Any

LOOPBACK = "127.0.0.1"


def starts_local() -> bool:
    """True when ray.init() will start a new local Ray rather than join one."""
    address = os.environ.get("RAY_ADDRESS", "")
    if address == "local":
        return True
    if address:
        return False
    try:  # the address `ray start` left on this node, which ray.init() would join
        from ray._private.utils import read_ray_address

        return read_ray_address(None) is None
    except Exception:  # noqa: BLE001 - unsure: leave Ray's own choice alone
        return False


def init_kwargs() -> dict[str, Any]:
    """Extra ray.init arguments: the node IP for a local Ray (loopback unless the user names one)."""
    if not starts_local():
        return {}
    wanted = os.environ.get("SERVETUNE_RAY_NODE_IP", LOOPBACK)
    if wanted == LOOPBACK:
        _keep_loopback()
    return {"_node_ip_address": wanted}


def _keep_loopback() -> None:
    """Stop Ray from swapping 127.0.0.1 for the outward address (a private helper of Ray's; if it is gone
    in another Ray version, Ray simply binds as it always did)."""
    try:
        import ray._private.services as services
        import ray._private.worker as worker
    except ImportError:  # pragma: no cover
        return

    def keep(host: str) -> str:
        return host

    services.resolve_ip_for_localhost = keep
    if hasattr(worker, "services"):
        worker.services.resolve_ip_for_localhost = keep


def finish_quietly() -> None:
    """Call once the study is done, before the interpreter exits: a Ctrl-C or SIGTERM while Ray's atexit
    shutdown runs used to cut it short (a KeyboardInterrupt traceback after the summary, the raylet's agents
    left running). From here a first signal is only noted; a second one ends the process as signals do."""
    import signal
    import sys
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def late(signum: int, frame: Any) -> None:
        print("servetune: the study is done; stopping Ray (send it again to quit at once)", file=sys.stderr,
              flush=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, late)
