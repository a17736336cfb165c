"""The judgement of the store: per-series verdicts and incidents (`verdicts`, stored by `detect`), loss-curve
correctness (`correctness`), what moved between the last good and the first bad run (`components`), and the
words they are said in (`vocabulary`). Reports render what is decided here; nothing here knows a report.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_judgement.py
"""
