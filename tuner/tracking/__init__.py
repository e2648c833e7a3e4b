"""MLflow records and the study report."""
