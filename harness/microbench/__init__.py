"""Kernel and collective microbenchmarks: the pytest-benchmark suites (suite/) and the arithmetic and
reference checks they share (work.py), together. `jaxbench microbench` runs the suites in a fresh process
(harness/commands.py) and the store ingests their JSON (results/pytest_benchmark.py).

    jaxbench microbench --sizes tiny
"""

SIZE_SETS = ("tiny", "full")
"""`tiny` runs on 2 CPU cores in under a minute (collectives on 8 fake CPU devices); `full` is for GPUs."""
