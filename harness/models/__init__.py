"""The Flax NNX models of the recipe families, one file per family (their configs: harness/families/), and the
blocks they share (layers.py, with the FP8 matmul of fp8.py). Imported only when a run builds a model."""
