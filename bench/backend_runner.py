"""The `tf-backend` runner of a zoo row: the model through torch.compile(backend="tensorforge"), as a user calls it.

Entry point: `time_backend(module, x, fp16, time_fn, log)` → stats (median ms …) with `compile_s` (first call,
synchronised), `engines` (engines the backend built), `graphs` (FX graphs dynamo handed over: more than one means dynamo broke the graph), `graph_breaks` (nodes our
converter left to PyTorch, each with its reason) and
the accuracy of its output against the row's onnxruntime fp32 reference, or {"error": …}.
It gets the fp32 module and fp32 input, as our ONNX engine does (fp16 inside with `fp16`, fp32 in and out), and is
called plainly: the backend replays its engine's CUDA graph inside the call, dynamo's guards run on every call.
Issue 14 asks for this runner beside the ONNX engine and torch.compile default + CUDA graph in the same run.
"""

import time


def time_backend(module, x, fp16: bool, time_fn, log, want=None, torch_fp16=None) -> dict:
    """`torch_fp16`: accuracy.compare of PyTorch's own fp16 run against `want`; with it the fp16 rule's second
    clause (≤ 1.5× PyTorch's fp16 error) applies, as it does to the ONNX engine of the same row."""
    import torch

    import tensorforge.frontend_torch as ft
    from accuracy import compare, judge_against_torch_fp16
    from peers import reset_compiler
    reset_compiler()
    before = len(ft.reports())
    try:
        compiled = torch.compile(module, backend="tensorforge", options={"fp16": fp16}, dynamic=False)

        def call():
            with torch.inference_mode():
                return compiled(x)
        t0 = time.perf_counter()
        y = call()
        if x.is_cuda:
            torch.cuda.synchronize()
        compile_s = round(time.perf_counter() - t0, 3)
        built = ft.reports()[before:]                  # one report per graph dynamo handed over
        st = time_fn(call)
        st["compile_s"] = compile_s
        st["graphs"] = len(built)
        st["engines"] = sum(r.engines for r in built)
        st["graph_breaks"] = [f"{n} ({op}): {why}"[:200] for r in built for n, op, why in r.breaks]
        if want is not None:
            got = (y[0] if isinstance(y, (tuple, list)) else y).float().cpu().numpy()
            st["accuracy_vs_ort_fp32"] = compare(got, want, fp16)
            if fp16 and torch_fp16 is not None:
                judge_against_torch_fp16(st["accuracy_vs_ort_fp32"], torch_fp16)
        log(f"  runner tf-backend: {st['median_ms']:.4f} ms, compile {compile_s:.1f} s, {st['engines']} engine(s), "
            f"{len(st['graph_breaks'])} graph break(s)")
        return st
    except Exception as e:  # noqa: BLE001 - reported in the row, the run goes on
        msg = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
        log(f"  runner tf-backend: {msg}")
        return {"error": msg}
    finally:
        reset_compiler()
