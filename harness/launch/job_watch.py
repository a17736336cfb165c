"""Watching a cluster job to its end, as both cluster launchers do (harness/launch/slurm.py, k8s.py): poll it
every few seconds; on Ctrl-C or SIGTERM stop it once (scancel; the JobSet's deletion) and keep polling until
it has ended, since its processes are writing what they can meanwhile (process 0 its `interrupted` result);
a second Ctrl-C stops the wait.

    jaxbench run llama2 --launcher slurm --tasks-per-node 2     # then Ctrl-C: scancel, an interrupted result
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from jaxbench.harness.runtime.outcome import Terminated, sigterm_raises


@dataclasses.dataclass(frozen=True)
class Polling:
    every_s: float
    """Seconds between two polls of the scheduler."""
    sleep: Callable[[float], None] = time.sleep

    def until_ended(self, poll: Callable[[], bool], stop: Callable[[], None]) -> bool:
        """Call `poll` (which shows what changed) until it says the job ended; on the first Ctrl-C or SIGTERM
        call `stop` and poll on, on a second return at once. Returns whether the job was interrupted."""
        interrupted = False
        with sigterm_raises():
            while True:
                try:
                    if poll():
                        return interrupted
                    self.sleep(self.every_s)
                except (KeyboardInterrupt, Terminated):
                    if interrupted:
                        return True
                    interrupted = True
                    stop()
