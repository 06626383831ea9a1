"""The command-line tools end on Ctrl-C or SIGTERM with one line and the shell's status."""

import os
import signal

from iknet_core.interrupts import exits_on_interrupt
from iknet_train import path_bench


def test_a_stop_signal_ends_a_tool_with_one_line_and_the_shells_status(capsys):
    @exits_on_interrupt('iknet-demo-tool')
    def main(argv=None) -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # as kill or a job scheduler stops it
        raise AssertionError('the signal did not stop the work')

    assert main([]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == 'iknet-demo-tool: interrupted; nothing was written\n'
    # The handler before comes back afterwards.
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_the_benchmarks_are_interruptible(monkeypatch, capsys, tmp_path):
    def interrupted(args):
        raise KeyboardInterrupt  # Ctrl-C in the middle of the work

    monkeypatch.setattr(path_bench, 'run', interrupted)
    assert path_bench.main(['--chains', 'omx', '--out', str(tmp_path)]) == 128 + signal.SIGINT
    assert capsys.readouterr().err == 'iknet-path-bench: interrupted; nothing was written\n'


def test_signals_held_wait_for_the_end_of_a_write():
    import pytest

    from iknet_core.interrupts import signals_held

    written = []
    # Python's own SIGINT handler raises, once the write is done.
    with pytest.raises(KeyboardInterrupt), signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        written.append('whole')  # the signal came mid-write: the write goes on
    assert written == ['whole']
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
