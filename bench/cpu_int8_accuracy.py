"""INT8 accuracy of zoo models on the CPU (the same numerics as the GPU engines): ours beside onnxruntime's own INT8.

    PYTHONPATH=. python3 bench/cpu_int8_accuracy.py efficientnet_b0,mobilenet_v3_large [--tests 16]
        [--also-quantize-depthwise]

Per model: precision_case's calibration inputs (fed at batch 8) and its first `--tests` test inputs; cosine and
top-1 agreement to fp32 onnxruntime for (a) onnxruntime's `quantize_static` with our placement (ort_int8.py) and
(b) our `--int8` engine on the CPU. `--also-quantize-depthwise` adds (c): our engine with grouped/depthwise convs
quantized too, as implicit quantization did before a2a0770 (qdq_insert._no_fast_kernel switched off for that build).
torchvision models need torchvision importable (its model code only; the C++ extension is not used).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import precision_case  # noqa: E402
import zoo  # noqa: E402
from accuracy import brief, quantized  # noqa: E402
from zoo_case import ort_reference  # noqa: E402

BATCH = 8


def ours(data: bytes, name: str, xs: np.ndarray, want: np.ndarray, depthwise: bool) -> str:
    import tensorforge as tfg
    from tensorforge.builder.calibration import qdq_insert
    original = qdq_insert._no_fast_kernel
    if depthwise:
        qdq_insert._no_fast_kernel = lambda net, layer: None
    try:
        t0 = time.perf_counter()
        engine = tfg.build(data, int8=True, calibration_data=precision_case.calibration_feeds(name, BATCH),
                           device="cpu", shapes={"input": zoo.input_shape(name, BATCH)})
    finally:
        qdq_insert._no_fast_kernel = original
    got = np.concatenate([np.asarray(engine.run({"input": xs[k:k + BATCH]})["output"])
                          for k in range(0, len(xs), BATCH)])
    n = sum(layer.op.startswith("Quantized") for layer in engine.data.layers)
    return f"{n} quantized layers, {brief(quantized(got, want, True))} ({time.perf_counter() - t0:.0f} s)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models")
    p.add_argument("--tests", type=int, default=16)
    p.add_argument("--also-quantize-depthwise", action="store_true")
    args = p.parse_args()
    for name in args.models.split(","):
        data, _ = zoo.export(name, zoo.make(name))
        xs = precision_case.test_inputs(name)[:args.tests]
        want = ort_reference(data, xs, 2)
        ort = precision_case.ort_int8_accuracy(name, data, xs, want, True, 2, lambda *_: None)
        print(f"{name} ({len(xs)} test inputs): onnxruntime INT8 {brief(ort)}", flush=True)
        print(f"  tensorforge --int8: {ours(data, name, xs, want, False)}", flush=True)
        if args.also_quantize_depthwise:
            print(f"  tensorforge --int8, depthwise quantized too: {ours(data, name, xs, want, True)}", flush=True)


if __name__ == "__main__":
    main()
