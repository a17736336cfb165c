"""The Flax NNX models of the recipe families, one file per family (their configs: harness/families/), and the
blocks they share (layers.py). Imported only when a run builds a model."""
