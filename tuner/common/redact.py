"""Secrets never reach logs or MLflow: redact tokens, keys and credentials in URIs."""

from __future__ import annotations

import re
from typing import Any

_SECRET_KEY = re.compile(r"(token|secret|password|passwd|api[_-]?key|credential|auth)", re.I)
_URI_CRED = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@", re.I)
_TOKEN_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|ghp_[A-Za-z0-9]{8,}|AKIA[0-9A-Z]{12,})\b")
MASK = "***"


def redact_text(text: str) -> str:
    text = _URI_CRED.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    return _TOKEN_VALUE.sub(MASK, text)


def redact(value: Any, key: str = "") -> Any:
    """Recursively mask values under secret-looking keys and secret-looking strings anywhere."""
    if key and _SECRET_KEY.search(key) and value not in (None, "", False):
        return MASK
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        masked = [redact(v) for v in value]
        # "--api-key X" style argument lists: mask the value after a secret flag
        for i in range(len(masked) - 1):
            if isinstance(masked[i], str) and masked[i].startswith("--") and _SECRET_KEY.search(masked[i]):
                masked[i + 1] = MASK
        return type(value)(masked) if isinstance(value, tuple) else masked
    return value


def redact_yaml_text(text: str) -> str:
    """A YAML document with values under secret-looking keys (at any depth, flow style too) masked."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return redact_text(text)
    return "# copy with secrets masked by servetune\n" + yaml.safe_dump(redact(data), sort_keys=False)
