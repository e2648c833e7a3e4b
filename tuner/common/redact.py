"""Secrets never reach logs or MLflow: redact them by what they are, never by a word inside a knob name.

A value is a secret when its key names one (the key's last word is a secret noun: `hf_token`,
`api_key`, `MLFLOW_TRACKING_PASSWORD`, `--api-key`), when it is a credential in a URI, when it has a
known token format (`hf_...`, `sk-...`), or when it equals the value of an environment variable that
holds a secret. Knobs that merely mention tokens (`max_num_batched_tokens`, `output_tokens_per_s`,
SGLang's `max_prefill_tokens`) are data and stay as they are.
"""

from __future__ import annotations

import os
import re
from typing import Any

MASK = "***"
# The last word of a key that holds a secret ("HF_TOKEN", "api-key", "client_secret", "db_password").
_SECRET_WORDS = frozenset({"token", "secret", "password", "passwd", "pwd", "apikey", "credential", "credentials",
                           "authorization", "auth", "bearer", "passphrase"})
# Two last words that together name a secret ("api_key", "secret_access_key", "private_key").
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
                           ("auth", "key"), ("signing", "key"), ("session", "key")})
_URI_CRED = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@", re.I)
_TOKEN_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|ghp_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}"
                          r"|AKIA[0-9A-Z]{12,})\b")
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]{8,}")
_MIN_ENV_SECRET = 6  # shorter env values ("1", "true") are not worth masking and would mangle text
# Shell variables whose names end in a secret word but hold paths (the working directory).
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})


def is_secret_key(key: str) -> bool:
    """True when a key (dict key, env var name or `--flag`) names a secret by its last word(s)."""
    words = [w for w in re.split(r"[^a-z0-9]+", key.lower()) if w]
    if not words:
        return False
    return words[-1] in _SECRET_WORDS or (len(words) >= 2 and (words[-2], words[-1]) in _SECRET_PAIRS)


def env_secrets(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names hold a secret, longest first."""
    env = os.environ if environ is None else environ
    vals = {v for k, v in env.items()
            if k not in _NOT_SECRET_ENV and is_secret_key(k) and len(v) >= _MIN_ENV_SECRET}
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str) -> str:
    """Free text with URI credentials, known token formats, bearer headers and env secret values masked."""
    for secret in env_secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URI_CRED.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = _BEARER.sub(lambda m: f"{m['head']}{MASK}", text)
    return _TOKEN_VALUE.sub(MASK, text)


def redact(value: Any, key: str = "") -> Any:
    """Recursively mask values under secret keys and secrets inside strings anywhere."""
    if key and is_secret_key(key) and value not in (None, "", False):
        return MASK
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        masked = [redact(v) for v in value]
        # "--api-key X" style argument lists: mask the value after a secret flag
        for i in range(len(masked) - 1):
            if isinstance(masked[i], str) and masked[i].startswith("--") and "=" not in masked[i] \
                    and is_secret_key(masked[i]):
                masked[i + 1] = MASK
        masked = [_redact_flag_eq(v) for v in masked]
        return type(value)(masked) if isinstance(value, tuple) else masked
    return value


def _redact_flag_eq(v: Any) -> Any:
    """"--api-key=X" -> "--api-key=***"."""
    if isinstance(v, str) and v.startswith("--") and "=" in v:
        flag, _, rest = v.partition("=")
        if is_secret_key(flag) and rest:
            return f"{flag}={MASK}"
    return v


def redact_yaml_text(text: str) -> str:
    """A YAML document with values under secret keys (at any depth, flow style too) masked."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return redact_text(text)
    return "# copy with secrets masked by servetune\n" + yaml.safe_dump(redact(data), sort_keys=False)
