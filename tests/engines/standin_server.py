"""A stand-in engine server for the lifecycle tests: a real HTTP server in a real process.

It answers /health, /v1/models, /metrics, /server_info and /get_server_info (which echo its argv),
and can misbehave on request: exit at start with an engine-like message, never get ready, ignore
SIGTERM, leave a child behind, bind without SO_REUSEADDR, or crash on GET /crash. Unknown arguments
(an engine's own flags) are accepted and echoed, so it can stand in for an engine's command prefix.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn


class Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ready-after", type=float, default=0.0, help="/health answers 503 until then")
    ap.add_argument("--never-ready", action="store_true")
    ap.add_argument("--exit-code", type=int, default=None, help="exit at start with this status")
    ap.add_argument("--exit-after", type=float, default=0.0)
    ap.add_argument("--message", action="append", default=[], help="lines printed before exiting")
    ap.add_argument("--ignore-sigterm", action="store_true")
    ap.add_argument("--child", action="store_true", help="leave a SIGTERM-ignoring child in the group")
    ap.add_argument("--no-reuse", action="store_true", help="bind without SO_REUSEADDR")
    ap.add_argument("--metrics-prefix", default="vllm:")
    ap.add_argument("--fail-and-linger", default=None, help="print this fatal line, then never exit")
    args, extra = ap.parse_known_args()
    t0 = time.monotonic()
    print(f"standin: pid {os.getpid()} starting on {args.host}:{args.port}", flush=True)

    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child:
        code = "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", code])
        print(f"standin: child pid {child.pid}", flush=True)
    if args.fail_and_linger:
        print("ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)]).", file=sys.stderr)
        print(args.fail_and_linger, file=sys.stderr, flush=True)
        time.sleep(600)
    if args.exit_code is not None:
        time.sleep(args.exit_after)
        for line in args.message:
            print(line, file=sys.stderr, flush=True)
        sys.exit(args.exit_code)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *a: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: str, ctype: str = "application/json") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            ready = not args.never_ready and time.monotonic() - t0 >= args.ready_after
            if self.path == "/health":
                self._send(200 if ready else 503, "{}")
            elif self.path == "/v1/models":
                self._send(200, json.dumps({"object": "list", "data": [{"id": "standin", "object": "model"}]}))
            elif self.path.startswith(("/server_info", "/get_server_info")):
                self._send(200, json.dumps({"argv": sys.argv[1:], "extra": extra, "pid": os.getpid()}))
            elif self.path == "/metrics":
                p = args.metrics_prefix
                self._send(200, f"{p}num_requests_running 0.0\n{p}num_requests_waiting 0.0\n", "text/plain")
            elif self.path == "/crash":
                print("RuntimeError: standin crashed under load: CUDA error: an illegal memory access",
                      file=sys.stderr, flush=True)
                os._exit(3)
            else:
                self._send(404, "{}")

    Server.allow_reuse_address = not args.no_reuse
    try:
        server = Server((args.host, args.port), Handler)
    except OSError as exc:
        print(f"ERROR: [Errno {exc.errno}] error while attempting to bind on address "
              f"({args.host!r}, {args.port}): {exc.strerror}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"standin: listening ({socket.gethostname()})", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
