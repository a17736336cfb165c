"""Results store and verdicts: where run results are kept and judged (filled by the results-store issue).

The harness writes one JSON file per run (schema: harness/run/schema/run-result.v1.schema.json); this package
will ingest those files, detect regressions and report them.
"""
