"""Runs recipes: a recipe file becomes a validated config (config.py, recipes.py, families/), a backend trains
it where a launcher says (backends/, launch/), with the XLA flags of its profile (flags/), and the run
pipeline measures it on one FLOPs convention and writes its result (run/ above the backends, runtime/ below
them, measure/). See docs/architecture.md for the rooms and the order of their layers.

    jaxbench run llama2
"""
