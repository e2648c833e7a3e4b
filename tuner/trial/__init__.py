"""One trial: run an engine with one config under load, its result and outcome."""
