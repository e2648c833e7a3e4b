"""Servetune's user attributes on Optuna trials (JSON values): they tie an Optuna trial to its row in
trials.parquet and its MLflow run, and are read back on resume (tuner.search.resume)."""

A_NUMBER, A_ENGINE, A_ARGS, A_PARAMS, A_BASELINE, A_NOTES = (
    "servetune.number", "servetune.engine", "servetune.args", "servetune.params", "servetune.baseline",
    "servetune.notes")
A_TRIAL_ID, A_OUTCOME, A_REASON, A_CAPACITY = (
    "servetune.trial_id", "servetune.outcome", "servetune.reason", "servetune.capacity")
A_INTERRUPTED, A_REJECTED, A_DUPLICATE = "servetune.interrupted", "servetune.rejected", "servetune.duplicate_of"
