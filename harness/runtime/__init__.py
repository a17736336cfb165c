"""What a run is made of, below the backends that train it and the pipeline that drives them: its typed
options (options.py), the checks of a recipe against the machine (preflight.py), how it ended (outcome.py),
the result file and its schema (result.py, schema/), and what it shows while it runs (reporter.py). The
backends and launchers import these; nothing here imports a backend, a launcher or the runner."""
