"""A history on day one: past releases of a component, each run on its release night and judged like the
nightly's nights (`jaxbench backfill`). Which nights is pure (`backfill.nights`); the runs and the store are
the edges (`backfill.commands`).
"""
