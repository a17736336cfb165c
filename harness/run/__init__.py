"""The run pipeline, whichever backend trains: a run's inputs checked before anything starts (inputs.py),
the runner that has a backend train them and writes the result (runner.py), the A/B of two flag sets
(ab.py) and the difference of two runs' compiled programs (program_diff.py). What the backends share with
it (options, outcome, result, reporter, the checks against the machine) lies below them, in
harness/runtime/."""
