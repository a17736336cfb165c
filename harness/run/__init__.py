"""The run pipeline, whichever backend trains: typed options (options.py), checks before compiling
(preflight.py), the runner (runner.py), how a run ended (outcome.py), the result file and its schema
(result.py, schema/), what it shows while it runs (reporter.py), and the A/B of two flag sets (ab.py)."""
