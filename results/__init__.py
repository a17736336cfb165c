"""Keeps and judges: every run in the store (schema.py, store.py, migrations/), result files ingested as
validated records (ingest.py, pytest_benchmark.py, records.py, identity.py), the series judged by the
detectors (detection/) into states and incidents (judgement/), and reports of it (report/, alert_plan.py).

    jaxbench ingest runs/ && jaxbench detect && jaxbench report
"""
