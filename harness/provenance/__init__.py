"""Where a run's numbers came from: the record its result holds (record.py: frozen models, and the allowlist
of environment variables it may keep) and the reading of that record from the machine (collection.py)."""
