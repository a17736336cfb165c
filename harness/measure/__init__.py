"""Measurement, pure: the FLOPs convention (flops.py), the dense peak table behind MFU (peaks.py), every
metric's unit and direction (metrics.py), and the step-time statistics (stats.py). No JAX."""
