"""Credentials in `--mlflow-uri` go to MLflow through its environment variables, never in a URI.

MLflow (and other libraries) print the tracking URI ("View run ... at: http://host/...") and servetune
stores it in state.json: a URI with `user:password@` in it would leak both. `http://alice:pw@host` becomes
`http://host` plus MLFLOW_TRACKING_USERNAME/PASSWORD; a user part alone (`http://TOKEN@host`) is a token
(MLFLOW_TRACKING_TOKEN).
"""

from __future__ import annotations

import os
import urllib.parse

ENV_KEYS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")


def split_credentials(uri: str) -> tuple[str, dict[str, str]]:
    """(the URI without credentials, MLflow's credential env vars). Non-HTTP URIs are returned unchanged
    (a SQL store needs its password in the URI)."""
    if not uri.startswith(("http://", "https://")):
        return uri, {}
    parts = urllib.parse.urlsplit(uri)
    if "@" not in parts.netloc:
        return uri, {}
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, sep, password = userinfo.partition(":")
    user, password = urllib.parse.unquote(user), urllib.parse.unquote(password)
    env = ({"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password} if sep
           else {"MLFLOW_TRACKING_TOKEN": user})
    return urllib.parse.urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment)), env


def strip_credentials(uri: str) -> str:
    """The URI as it may be printed or stored: no user or password, whatever the scheme (a SQL store's
    URI keeps them for MLflow, but they are never shown)."""
    if "://" not in uri:
        return uri
    parts = urllib.parse.urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    hostport = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))


def use_credentials(uri: str) -> str:
    """Move the URI's credentials into this process's environment (MLflow's client reads them there)
    and return the clean URI to hand to MLflow."""
    clean, env = split_credentials(uri)
    os.environ.update(env)
    return clean
