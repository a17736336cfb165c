"""Python imports this at startup when its folder is on PYTHONPATH: the fault suite
(tests/results/test_faults.py) puts it there for the `jaxbench` commands it kills, which then die at the point
JAXBENCH_FAULT_KILL names (tests/support/kill_points.py). Without that variable it does nothing."""

from tests.support.kill_points import arm_from_environment

arm_from_environment()
