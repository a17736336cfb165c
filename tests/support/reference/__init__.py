"""Independent float64 NumPy references that tests/harness/test_reference_models.py checks the JAX models
against."""
