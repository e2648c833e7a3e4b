"""The study driver: `python -m tuner.run` (cli), flow, preflight, outputs, progress, summary."""
