"""No process of a run outlives it: the fork server and every worker die with their parent, however it ends.

A parent that is interrupted or terminated kills its children's process groups itself (runner.process); one that is
killed outright (SIGKILL, the OOM killer) cannot. For that case each child asks Linux to send it SIGKILL when its
parent dies (``prctl(PR_SET_PDEATHSIG)``), the fork server and the worker alike, so the chain perfdash run -> fork
server -> worker unwinds from the top. Inductor's compile workers already watch their parent (the worker) and exit
when it is gone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# The pid of the process that started this one: set by the parent in the child's environment, so a child whose
# parent died before the death signal was armed notices (its parent is then init or a subreaper).
PARENT_PID_ENV = "PERFDASH_PARENT_PID"
_PR_SET_PDEATHSIG = 1
# The exit status of a process ended by a signal, as a shell reports it.
_SIGNAL_EXIT_BASE = 128


def die_with_parent(expected_parent: int | None) -> None:
    """Arm SIGKILL for when this process's parent dies; exit at once if it already has. Linux only (elsewhere the
    parent's own clean-up is all there is). The signal follows the parent *thread* that started this process: the
    run starts its children from its main thread."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(_SIGNAL_EXIT_BASE + signal.SIGKILL)


def dies_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` that arms the death signal in a child that cannot arm its own (a program perfdash does not
    own, such as PyTorch's harness, or ``nice`` in front of it): set between fork and exec, it survives the exec."""
    parent = os.getpid()
    return lambda: die_with_parent(parent)


def parent_from_environment() -> int | None:
    """The parent pid this process was started with, taken out of the environment so that nothing this process
    starts inherits it as its own."""
    value = os.environ.pop(PARENT_PID_ENV, "")
    return int(value) if value.isdigit() else None


class Terminated(SystemExit):
    """SIGTERM or SIGHUP (a timeout, a Jenkins abort, a closed terminal) raised in the run's main thread, so its
    clean-up runs as it does for Ctrl-C; the exit status is the shell's for that signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(_SIGNAL_EXIT_BASE + signum)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


@contextmanager
def terminate_as_exception() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP end the main thread with ``Terminated`` instead of ending the process on the
    spot (Python's default), which would leave the fork server and the worker running."""
    previous = {s: signal.signal(s, _raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
