"""Before any engine starts: the MLflow tracking server answers, and takes this run's credentials.

`/health` answers without credentials even where the server enforces them (`mlflow server --app-name
basic-auth`), so an authenticated server seemed fine until the first run was logged: a `--resume` (state.json
keeps the URI without its credentials) then failed mid-study with a bare "HTTP 401". A read of one experiment
with the credentials MLflow's client would send finds that before anything starts.
"""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.parse
import urllib.request

from tuner.common.errors import SpecError
from tuner.common.redact import redact_text
from tuner.tracking.credentials import ENV_KEYS, split_credentials

_CREDENTIALS_FIX = ("give them in the URI (http(s)://USER:PASSWORD@host:port) or in MLFLOW_TRACKING_USERNAME and "
                    "MLFLOW_TRACKING_PASSWORD (a token: MLFLOW_TRACKING_TOKEN); servetune never stores them, so "
                    "a --resume or --log-only needs them again")


def check_server(uri: str, shown: str, where: str) -> None:
    try:
        parts = urllib.parse.urlsplit(uri)
        host, port = parts.hostname or "", parts.port
    except ValueError as exc:
        raise SpecError(f"malformed MLflow URI {shown} ({exc})", where,
                        "write http(s)://host:port with a port in 1..65535") from None
    if not host:
        raise SpecError(f"MLflow URI {shown} has no host", where, "write http(s)://host:port")
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
    base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    auth = _authorization(uri)
    try:
        _get(base + "/health", auth)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        raise SpecError(f"MLflow tracking server {shown} is unreachable ({redact_text(str(exc))})", where,
                        "start it (mlflow server --host 127.0.0.1 ...) or leave the URI out to use a "
                        "local SQLite store") from None
    try:
        _get(base + "/api/2.0/mlflow/experiments/search?max_results=1", auth)
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            said = "refused the credentials given" if auth else "needs credentials and none were given"
            raise SpecError(f"MLflow tracking server {shown} {said} (HTTP 401)", where, _CREDENTIALS_FIX) from None
        if exc.code == 403:
            raise SpecError(f"MLflow tracking server {shown} does not let this user read experiments (HTTP 403)",
                            where, "ask its admin for READ and EDIT permission, or use another user") from None
        # another status (an older server, a proxy that serves /health only): left to the run to find out
    except (OSError, ValueError):
        pass


def _get(url: str, auth: str | None) -> None:
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", auth)
    with urllib.request.urlopen(req, timeout=5) as resp:
        if resp.status != 200:
            raise OSError(f"HTTP {resp.status}")


def _authorization(uri: str) -> str | None:
    """The header MLflow's client sends: the URI's credentials, else its environment variables'."""
    env = split_credentials(uri)[1] or {k: os.environ[k] for k in ENV_KEYS if os.environ.get(k)}
    if env.get("MLFLOW_TRACKING_TOKEN"):
        return f"Bearer {env['MLFLOW_TRACKING_TOKEN']}"
    if "MLFLOW_TRACKING_USERNAME" in env:
        pair = f"{env['MLFLOW_TRACKING_USERNAME']}:{env.get('MLFLOW_TRACKING_PASSWORD', '')}"
        return f"Basic {base64.b64encode(pair.encode()).decode()}"
    return None
