"""The pytest-benchmark suites (test_*.py), their fixtures and options (conftest.py) and float64 references
(reference.py): `jaxbench microbench` runs them in a fresh pytest process."""
