"""Shared helpers every layer may use: errors, atomic writes, numbers, redaction."""
