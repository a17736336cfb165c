"""What the framework backends share: a framework's own trainer runs in the framework's own environment (its
virtualenv `.venv-<framework>` on a host, or the image it was built into), started by jaxbench as a
process whose output is kept and read. Each framework (harness/backends/maxtext.py, levanter.py) says how a
recipe maps onto its configuration, how to start its trainer and how to read what the trainer wrote; the
program here does the rest the same way for both: find the environment, ask it what it runs on, start the
trainer with the run's XLA flags, show progress, check the parameter count, and turn a crash into a result.
"""
