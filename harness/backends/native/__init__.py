"""The native backend: our Flax NNX models (harness/models/) on synthetic data with a known optimal loss
(data.py), a sharded, ahead-of-time compiled training step (train.py), jax.distributed for several
processes (distributed.py), and the timed loop (backend.py)."""
