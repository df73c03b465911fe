"""GPU smoke of onnxruntime's contrib ops added for issue 17 (QGemm, DynamicQuantizeLSTM, MultiHeadAttention,
GroupQueryAttention, FusedConv): each small model built for CUDA and compared with the same model built for the CPU
(whose tactics the CI tests check against onnxruntime) — QGemm's quantized output bit for bit (torch._int_mm on
cuBLASLt and the chunked float32 GEMMs are exact), the rest at rtol 1e-3 / atol 1e-4 —, each integer-GEMM tactic
bit for bit against the reference on CUDA with TF32 allowed, and CUDA timings of the fast tactics against the
ops' references (tactics hidden). One PASS/FAIL line per check; exit 1 on any FAIL.
    PYTHONPATH=. python3 bench/gpu_smoke/contrib_ops.py          (≈ 30–60 s on an H200)
"""

import sys
import time

import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.kernels import registry

F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
RNG = np.random.default_rng(0)
RESULTS: list[tuple[str, bool, str]] = []


def _f(*s):
    return RNG.normal(size=s).astype(np.float32)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m.SerializeToString()


def _ms(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain="com.microsoft", **attrs)


def _np(v):
    return v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)


def check(name, model, feeds, exact=False, rtol=1e-3, atol=1e-4):
    try:
        want = tfg.build(model, device="cpu").run(dict(feeds))
        got = tfg.build(model, device="cuda").run(dict(feeds))
        worst = 0.0
        for k, w in want.items():
            g, w = _np(got[k]), _np(w)
            if exact:
                ok = g.dtype == w.dtype and np.array_equal(g, w)
                worst = max(worst, float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max()))
            else:
                ok = np.allclose(g, w, rtol=rtol, atol=atol)
                worst = max(worst, float(np.abs(g - w).max()))
            if not ok:
                RESULTS.append((name, False, f"output {k}: max |diff| {worst:.3g}"))
                return
        RESULTS.append((name, True, f"max |diff| {worst:.3g}"))
    except Exception as e:                      # a failed build or run is a FAIL line, not a traceback
        RESULTS.append((name, False, f"{type(e).__name__}: {str(e)[:200]}"))


def timed(name, model, feeds, op, iters=20):
    """Median CUDA run time with the op's fast tactic and with its reference (fast tactic hidden)."""
    def median_ms():
        engine = tfg.build(model, device="cuda")
        feeds_dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
        for _ in range(3):
            engine.run(dict(feeds_dev))
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            engine.run(dict(feeds_dev))
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(times)), [la.tactic for la in engine.data.layers if la.op == op]
    try:
        fast, tac = median_ms()
        saved = registry._TACTICS.get(op, [])
        registry._TACTICS[op] = []
        try:
            ref, _ = median_ms()
        finally:
            registry._TACTICS[op] = saved
        RESULTS.append((name, True, f"{tac}: {fast:.3f} ms, reference {ref:.3f} ms ({ref / fast:.1f}x)"))
    except Exception as e:
        RESULTS.append((name, False, f"{type(e).__name__}: {str(e)[:200]}"))


def tactic_exact(name, op, tactic_cls, model_and_feeds, with_tf32=True):
    """Build one tactic directly on CUDA (TF32 allowed, as in default builds) and compare with the op's reference
    on the same CUDA tensors, bit for bit."""
    try:
        import onnx
        from tensorforge.ir import get_spec
        model, feeds = model_and_feeds
        m = onnx.load_from_string(model)
        node = m.graph.node[0]
        inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()).cuda() for t in m.graph.initializer}
        args = [torch.from_numpy(feeds[n]).cuda() if n in feeds else (inits[n] if n else None) for n in node.input]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
        want = get_spec(op).reference(*args, **attrs)
        want = list(want) if isinstance(want, tuple) else [want]
        layer = type("L", (), {"attrs": attrs, "outputs": [o for o in node.output], "op": op,
                               "inputs": list(node.input)})()
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = with_tf32
        try:
            got = tactic_cls.build(layer, {}, torch.device("cuda"))(args)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev
        ok = all(torch.equal(g, w) for g, w in zip(got, want))
        worst = max(float((g.double() - w.double()).abs().max()) for g, w in zip(got, want))
        RESULTS.append((name, ok, f"max |diff| {worst:.3g} vs reference"))
    except Exception as e:
        RESULTS.append((name, False, f"{type(e).__name__}: {str(e)[:200]}"))


def qgemm_model(m, k, n, quantized=True):
    inits = [("a_scale", np.array(0.02, np.float32)), ("a_zp", np.array(128, np.uint8)),
             ("b", RNG.integers(-128, 128, (k, n)).astype(np.int8)),
             ("b_scale", (RNG.random(n) * 0.01 + 0.001).astype(np.float32)), ("b_zp", np.zeros(n, np.int8)),
             ("c", RNG.integers(-5000, 5000, n).astype(np.int32)),
             ("y_scale", np.array(0.5, np.float32)), ("y_zp", np.array(120, np.uint8))]
    ins = ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "c"] + (["y_scale", "y_zp"] if quantized else [])
    inits = [(key, v) for key, v in inits if key in ins]
    model = _model([_ms("QGemm", ins, ["y"])], [("a", U8, [m, k])], [("y", U8 if quantized else F)], inits)
    return model, {"a": RNG.integers(0, 256, (m, k)).astype(np.uint8)}


def dq_lstm_model(seq, batch, inp, hid, direction="bidirectional"):
    d = 2 if direction == "bidirectional" else 1
    inits = [("W", RNG.integers(-127, 128, (d, inp, 4 * hid)).astype(np.int8)),
             ("R", RNG.integers(-127, 128, (d, hid, 4 * hid)).astype(np.int8)), ("B", _f(d, 8 * hid) * 0.1),
             ("ws", (RNG.random((d, 4 * hid)) * 0.002 + 0.001).astype(np.float32)),
             ("wz", np.zeros((d, 4 * hid), np.int8)),
             ("rs", (RNG.random((d, 4 * hid)) * 0.002 + 0.001).astype(np.float32)),
             ("rz", np.zeros((d, 4 * hid), np.int8))]
    node = _ms("DynamicQuantizeLSTM", ["x", "W", "R", "B", "", "", "", "", "ws", "wz", "rs", "rz"], ["y", "y_h", "y_c"],
               hidden_size=hid, direction=direction)
    return _model([node], [("x", F, [seq, batch, inp])], [("y", F), ("y_h", F), ("y_c", F)], inits), \
        {"x": _f(seq, batch, inp)}


def mha_model(b, s, n, h, past=0, unidirectional=0):
    d = n * h
    ins = ["q", "k", "v", "bias", "m"] + (["", "pk", "pv"] if past else [])
    inputs = [("q", F, [b, s, d]), ("k", F, [b, s, d]), ("v", F, [b, s, d]), ("m", I32, [b, past + s])]
    feeds = {"q": _f(b, s, d), "k": _f(b, s, d), "v": _f(b, s, d), "m": np.ones((b, past + s), np.int32)}
    feeds["m"][-1, -3:] = 0
    outs = [("y", F)]
    if past:
        inputs += [("pk", F, [b, n, past, h]), ("pv", F, [b, n, past, h])]
        feeds.update(pk=_f(b, n, past, h), pv=_f(b, n, past, h))
        outs += [("pk_out", F), ("pv_out", F)]
    node = _ms("MultiHeadAttention", ins, [o for o, _ in outs], num_heads=n, unidirectional=unidirectional)
    return _model([node], inputs, outs, [("bias", _f(3 * d) * 0.1)]), feeds


def gqa_model(b, nq, nkv, h, past, seqlens, rotary=True, s=1):
    total = max(seqlens) + 1
    feeds = {"q": _f(b, s, nq * h), "k": _f(b, s, nkv * h), "v": _f(b, s, nkv * h), "pk": _f(b, nkv, past, h),
             "pv": _f(b, nkv, past, h), "sk": np.array(seqlens, np.int32), "tot": np.array(total, np.int32)}
    ins = ["q", "k", "v", "pk", "pv", "sk", "tot"]
    attrs = {}
    if rotary:
        ang = np.arange(past + 8)[:, None] / (10000 ** (np.arange(0, h, 2) / h))[None, :]
        feeds.update(cos=np.cos(ang).astype(np.float32), sin=np.sin(ang).astype(np.float32))
        ins += ["cos", "sin"]
        attrs["do_rotary"] = 1
    types = {"sk": I32, "tot": I32}
    node = _ms("GroupQueryAttention", ins, ["y", "pk_out", "pv_out"], num_heads=nq, kv_num_heads=nkv, **attrs)
    return _model([node], [(k, types.get(k, F), list(v.shape)) for k, v in feeds.items()],
                  [("y", F), ("pk_out", F), ("pv_out", F)]), feeds


def fused_conv_model():
    node = _ms("FusedConv", ["x", "w", "b", "z"], ["y"], activation="LeakyRelu", activation_params=[0.1],
               pads=[1, 1, 1, 1])
    return _model([node], [("x", F, [2, 8, 16, 16]), ("z", F, [2, 16, 16, 16])], [("y", F)],
                  [("w", _f(16, 8, 3, 3) * 0.2), ("b", _f(16))]), {"x": _f(2, 8, 16, 16), "z": _f(2, 16, 16, 16)}


def main() -> int:
    if not torch.cuda.is_available():
        print("FAIL cuda_available no CUDA device")
        return 1
    t0 = time.perf_counter()
    check("qgemm_quantized_exact", *qgemm_model(40, 72, 24), exact=True)
    check("qgemm_float_out", *qgemm_model(40, 72, 24, quantized=False))
    check("dq_lstm_bidirectional", *dq_lstm_model(6, 1, 24, 16))
    check("dq_lstm_forward_batch3", *dq_lstm_model(5, 3, 12, 8, "forward"))
    check("mha_mask_bias", *mha_model(2, 16, 4, 32))
    check("mha_past_causal", *mha_model(2, 4, 4, 32, past=12, unidirectional=1))
    check("gqa_decode_rotary", *gqa_model(3, 8, 2, 64, past=20, seqlens=[20, 11, 5]))
    check("gqa_prompt", *gqa_model(2, 8, 2, 64, past=0, seqlens=[7, 7], rotary=False, s=8))
    check("fused_conv_z_leakyrelu", *fused_conv_model())
    from tensorforge.kernels import contrib_quant as cq
    for cls in ("QGemmIntMM", "QGemmFloatExact"):
        tactic_exact(f"qgemm_{cls}_k1100_exact", "QGemm", getattr(cq, cls), qgemm_model(33, 1100, 24))
    for cls in ("DynamicQuantizeLSTMIntMM", "DynamicQuantizeLSTMFloatExact"):
        tactic_exact(f"dq_lstm_{cls}_i600_exact", "DynamicQuantizeLSTM", getattr(cq, cls),
                     dq_lstm_model(4, 3, 600, 16))
    timed("time_qgemm_1024", *qgemm_model(1024, 1024, 1024), "QGemm")
    timed("time_dq_lstm_s32_b8_h128", *dq_lstm_model(32, 8, 128, 128, "forward"), "DynamicQuantizeLSTM")
    timed("time_mha_b8_s128_n12_h64", *mha_model(8, 128, 12, 64), "MultiHeadAttention")
    timed("time_gqa_decode_b8_nq32_nkv8_p1024", *gqa_model(8, 32, 8, 128, past=1024, seqlens=[1000] * 8),
          "GroupQueryAttention")
    for name, ok, info in RESULTS:
        print(f"{'PASS' if ok else 'FAIL'} {name} {info}")
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 0 if all(ok for _, ok, _ in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
