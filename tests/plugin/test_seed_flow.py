"""The seed flow end to end: the user's MyGelu autograd Function (symbolic → custom::MyGelu) → legacy ONNX export
→ plugin → engine → run equals nn.GELU applied twice (fp32, rtol 1e-5), before and after save/load; and the same
plugin as a torch custom op (tfp.torch_op) that runs eagerly and that both exporters emit as the same node."""

import io

import onnx
import torch
import torch.nn as nn

import tensorforge as tfg
import tensorforge.plugin as tfp


from seed_models import MyGelu, MyNetPlugin as MyNet  # noqa: F401  (MyGelu: the Function users write)


def _legacy_export(module, x, dynamic_axes=None) -> bytes:
    buf = io.BytesIO()
    torch.onnx.export(module, (x,), buf, dynamo=False, opset_version=17, input_names=["x"], output_names=["y"],
                      dynamic_axes=dynamic_axes)
    return buf.getvalue()


def test_seed_flow_equals_gelu_twice(tmp_path):
    x = torch.randn(3, 257)
    model = _legacy_export(MyNet(), x)
    assert [(n.domain, n.op_type) for n in onnx.load_from_string(model).graph.node] == [("custom", "MyGelu")] * 2
    engine = tfg.build(model, device="cpu")
    tactic = "plugin:custom::mygelu:1.plugin[BLOCK=1024,num_warps=4]"
    assert [layer.tactic for layer in engine.data.layers] == [tactic] * 2
    want = nn.GELU()(nn.GELU()(x))
    torch.testing.assert_close(engine(x), want, rtol=1e-5, atol=1e-6)
    engine.save(tmp_path / "seed.engine")
    torch.testing.assert_close(tfg.load(tmp_path / "seed.engine", device="cpu")(x), want, rtol=1e-5, atol=1e-6)


def _ops(model: bytes):
    return [(n.domain, n.op_type, {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute})
            for n in onnx.load_from_string(model).graph.node]


def test_torch_op_runs_eagerly_and_exports_the_same_node_with_both_exporters():
    tfp.discover("MyGelu")
    gelu = tfp.torch_op("custom::MyGelu")

    class Net(nn.Module):
        def forward(self, x):
            return gelu(gelu(x), approximate="tanh") * 2

    x = torch.randn(4, 33)
    want = torch.nn.functional.gelu(torch.nn.functional.gelu(x), approximate="tanh") * 2
    torch.testing.assert_close(Net()(x), want, rtol=1e-5, atol=1e-6)

    prog = torch.onnx.export(Net(), (x,), dynamo=True, dynamic_shapes=({0: torch.export.Dim("N")},))
    dyn = prog.model_proto.SerializeToString()
    custom = [op for op in _ops(dyn) if op[0] == "custom"]
    assert custom == [("custom", "MyGelu", {"approximate": b"none"}), ("custom", "MyGelu", {"approximate": b"tanh"})]
    assert prog.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"   # symbolic dim kept

    legacy = _legacy_export(Net(), x, dynamic_axes={"x": {0: "N"}})
    assert [op for op in _ops(legacy) if op[0] == "custom"] == custom

    for model in (dyn, legacy):
        name = onnx.load_from_string(model).graph.input[0].name
        engine = tfg.build(model, device="cpu", shapes={name: ((1, 33), (4, 33), (8, 33))})
        out = engine.run({name: x})
        torch.testing.assert_close(next(iter(out.values())), want, rtol=1e-5, atol=1e-6)


def test_torch_op_output_shapes_follow_symbolic_dims():
    @tfp.register("custom::Pairs")
    def _(x: tfp.TensorDesc, k: int = 2) -> tfp.TensorDesc:
        return x.new((x.shape[0] * k, x.shape[1] // 2))

    @tfp.reference("custom::Pairs")
    def _(x, k):
        return x.reshape(x.shape[0], -1, 2).sum(-1).repeat(k, 1)
    pairs = tfp.torch_op("custom::Pairs")

    class Net(nn.Module):
        def forward(self, x):
            return pairs(x, k=3)
    x = torch.randn(5, 6)
    assert Net()(x).shape == (15, 3)
    ep = torch.export.export(Net(), (x,), dynamic_shapes=({0: torch.export.Dim("B")},))
    out_shape = ep.graph_module.graph.find_nodes(op="output")[0].args[0][0].meta["val"].shape
    batch = ep.graph_module.graph.find_nodes(op="placeholder")[0].meta["val"].shape[0]
    assert isinstance(batch, torch.SymInt) and str(out_shape[0]) == f"3*{batch}" and out_shape[1] == 3
