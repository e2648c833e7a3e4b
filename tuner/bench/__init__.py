"""`python -m tuner.bench`: benchmark any running OpenAI-compatible endpoint."""
