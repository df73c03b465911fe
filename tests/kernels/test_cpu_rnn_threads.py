"""Small recurrent layers run on one intra-op CPU thread (kernels/torch_rnn.py `step_threads`, issue 18): the fused
GRU/LSTM call sees 1 thread when a step's hidden GEMM is small and the caller's count when it is large, the caller's
count is back afterwards, and the results still match onnxruntime."""

import pytest
import torch

import tensorforge as tfg
from oracle import assert_close, ort_run
from tensorforge.kernels import torch_rnn
from kernels.test_torch_rnn import rnn_model, torch_fused_only  # noqa: F401  (a fixture)


@pytest.mark.parametrize("op,hidden,want_threads", [("GRU", 6, 1), ("LSTM", 6, 1), ("GRU", 600, 2)])
def test_small_steps_run_on_one_thread(op, hidden, want_threads, monkeypatch, torch_fused_only):
    gates = {"GRU": 3, "LSTM": 4}[op]
    assert (3 * gates * hidden * hidden <= torch_rnn.SMALL_STEP) == (want_threads == 1)   # batch 3 in rnn_model
    kw = {"linear_before_reset": 1} if op == "GRU" else {}
    model, feeds = rnn_model(op, S=4, B=3, I=5, H=hidden, **kw)
    engine = tfg.build(model, device="cpu")
    seen = []
    name = op.lower()
    real = getattr(torch._VF, name)

    def spy(*args):
        seen.append(torch.get_num_threads())
        return real(*args)
    monkeypatch.setattr(torch._VF, name, spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        got = engine.run(dict(feeds))
        assert seen == [want_threads]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert_close(got, ort_run(model, feeds), rtol=1e-3, atol=1e-4)       # 600-term sums: fp32 order


def test_step_threads_scope():
    x = torch.zeros(2, 1, 4)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch_rnn.step_threads(x, 1, 3, 256):         # GRU 256: 196 608 multiply-adds a step
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with torch_rnn.step_threads(x, 8, 4, 512):         # LSTM 512 at batch 8: 8.4 M, both threads
            assert torch.get_num_threads() == 2
        with torch_rnn.step_threads(x.to("meta"), 1, 3, 8):   # not a CPU tensor: no scope
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
