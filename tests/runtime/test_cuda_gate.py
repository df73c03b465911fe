"""The process-wide CUDA gate (runtime/cuda_gate.py): runs share it, warm-up checks and captures hold it alone.
On the H200, 8 threads sharing one tfg.Engine failed with "called a synchronizing CUDA operation" because one
thread's warm-up check set torch's (global) sync debug mode while another thread copied its outputs to the host."""

import threading
import time

from tensorforge.runtime.cuda_gate import SharedExclusiveGate


def test_exclusive_waits_for_other_threads_shared_holds_and_blocks_new_ones():
    gate, events = SharedExclusiveGate(), []
    holding, release = threading.Event(), threading.Event()

    def reader():
        with gate.shared():
            holding.set()
            release.wait(5)
            events.append("reader done")

    def writer():
        holding.wait(5)
        with gate.exclusive():
            events.append("writer in")
            time.sleep(0.05)
            events.append("writer out")

    def late_reader():
        time.sleep(0.02)
        while "writer in" not in events:
            time.sleep(0.001)
        with gate.shared():
            events.append("late reader in")

    threads = [threading.Thread(target=f) for f in (reader, writer, late_reader)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    assert events == []                       # the writer waits for the first reader
    release.set()
    for t in threads:
        t.join(5)
    assert events == ["reader done", "writer in", "writer out", "late reader in"]


def test_two_shared_holders_that_both_upgrade_do_not_deadlock():
    gate, order = SharedExclusiveGate(), []
    both_in = threading.Barrier(2)

    def run(name):
        with gate.shared():
            both_in.wait(5)
            with gate.exclusive():            # a run meeting a new shape: capture
                order.append(name)
            with gate.shared():               # nested shared holds come back
                order.append(name + " again")

    threads = [threading.Thread(target=run, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert sorted(order) == ["a", "a again", "b", "b again"]


def test_exclusive_is_reentrant_and_state_is_clean_after():
    gate = SharedExclusiveGate()
    with gate.shared():
        with gate.exclusive():
            with gate.exclusive():
                pass
        assert gate._shared == {threading.get_ident(): 1}
    assert gate._shared == {} and gate._exclusive is None
