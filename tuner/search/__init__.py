"""The search: spaces, the constrained Optuna searcher, the Ray Tune trainable and driver, Pareto logic."""
