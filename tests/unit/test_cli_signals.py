"""SIGTERM in the command line: the Ctrl-C path in the command's own process, the default in
a process forked from it (a multiprocessing pool ends its workers with SIGTERM)."""

import multiprocessing
import signal
import time

import pytest

from sim2real.cli import main as cli


def test_sigterm_interrupts_the_command_and_ends_a_forked_worker_quietly():
    previous = signal.signal(signal.SIGTERM, cli._interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)
        worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
        worker.start()
        time.sleep(0.2)
        worker.terminate()
        worker.join(10)
        assert worker.exitcode == -signal.SIGTERM  # not 1 after a KeyboardInterrupt traceback
    finally:
        signal.signal(signal.SIGTERM, previous)
