"""The performance summary names device time by its device: GPU Compute Time on CUDA, CPU Compute Time on CPU.
Numbers are checked against a hand computation on three made-up queries."""

from tensorforge.cli.inference_bench import BenchResult, Trace
from tensorforge.cli.perf_report import summary_lines


def _result():
    # compute intervals 1, 2 and 4 ms; no transfers
    spans = [(0.0, 1.0), (1.0, 3.0), (3.0, 7.0)]
    return BenchResult(warmup=[], timed=[Trace(a, a, a, a, a, b, b, b) for a, b in spans], warmup_ms=0.0)


def test_cpu_summary_says_cpu_compute_time():
    info, _ = summary_lines(_result(), [50.0], host_is_device=True)
    text = "\n".join(info)
    assert "GPU Compute Time" not in text and "GPU" not in text
    assert "CPU Compute Time: min = 1 ms, max = 4 ms, mean = 2.33333 ms, median = 2 ms" in text
    assert "Total CPU Compute Time: 0.007 s" in text


def test_gpu_summary_keeps_trtexec_names():
    info, warn = summary_lines(_result(), [50.0], host_is_device=False)
    text = "\n".join(info)
    assert "CPU Compute Time" not in text
    assert "GPU Compute Time: min = 1 ms, max = 4 ms" in text and "Total GPU Compute Time: 0.007 s" in text
    assert any("GPU compute time is unstable" in w for w in warn)
