"""The declarative matcher: commutative operands, associative products, constant tolerance, bindings,
escaping intermediates, failure reasons, and the graph view's shapes."""

import math

import torch

from tensorforge.ir import Network
from tensorforge.passes.pattern import AnyOf, Const, Graph, Op, Product, Sum, Var


def _net(*layers, consts=None, shape=(2, 3)):
    """layers: (op, inputs, output); inputs name 'x', 'y', constants from `consts`, or earlier outputs."""
    net = Network("t")
    net.add_input("x", torch.float32, shape)
    net.add_input("y", torch.float32, shape)
    for name, value in (consts or {}).items():
        net.add_constant(name, value)
    for op, ins, out in layers:
        net.add_layer(op, ins, [out], name=out)
    net.mark_output(layers[-1][2])
    return net


def _match(pattern, net, root=None):
    g = Graph(net, [{"x": (2, 3), "y": (2, 3)}])
    layer = next(lay for lay in net.layers if lay.outputs[0] == (root or net.outputs[0]))
    return pattern.match_layer(g, layer)


def test_commutative_operands_match_in_either_order():
    p = Op("Add", Var("x"), Const(1.0))
    for ins in (["x", "one"], ["one", "x"]):
        m, why, _ = _match(p, _net(("Add", ins, "out"), consts={"one": torch.tensor(1.0)}))
        assert m is not None and m["x"] == "x", why


def test_non_commutative_operands_keep_their_order():
    p = Op("Sub", Var("x"), Const(1.0))
    m, why, _ = _match(p, _net(("Sub", ["one", "x"], "out"), consts={"one": torch.tensor(1.0)}))
    assert m is None
    assert "expected constant ≈1" in why and "computed tensor 'x'" in why


def test_constant_tolerance_follows_the_constant_dtype():
    p = Op("Div", Var("x"), Const(math.sqrt(2)))
    for value, dtype, ok in ((1.4142135381698608, torch.float32, True), (1.4140625, torch.float16, True),
                             (1.4140625, torch.float32, False), (1.41, torch.float32, False)):
        net = _net(("Div", ["x", "c"], "out"), consts={"c": torch.tensor(value, dtype=dtype)})
        m, why, _ = _match(p, net)
        assert (m is not None) == ok, (value, dtype, why)
        if not ok:
            assert f"found {float(torch.tensor(value, dtype=dtype)):.9g}" in why and "tolerance" in why


def test_a_variable_binds_one_tensor():
    p = Op("Mul", Var("x"), Var("x"))
    assert _match(p, _net(("Mul", ["x", "x"], "out")))[0] is not None
    m, why, _ = _match(p, _net(("Mul", ["x", "y"], "out")))
    assert m is None and why.startswith("x: expected the same tensor")   # both operand orders were tried


def test_products_match_any_association_and_order():
    p = Product(Var("x"), Const(0.5), Var("y"))
    half = {"h": torch.tensor(0.5)}
    shapes = [
        [("Mul", ["x", "y"], "t"), ("Mul", ["t", "h"], "out")],
        [("Mul", ["y", "h"], "t"), ("Mul", ["x", "t"], "out")],
        [("Mul", ["h", "x"], "t"), ("Mul", ["t", "y"], "out")],
    ]
    for layers in shapes:
        m, why, _ = _match(p, _net(*layers, consts=half))
        assert m is not None, (layers, why)
        assert {m["x"], m["y"]} == {"x", "y"} and len(m.layers) == 2


def test_an_inner_product_read_elsewhere_is_a_leaf_and_escapes_are_reported():
    p = Product(Var("x"), Var("y"), Const(0.5))
    net = _net(("Mul", ["x", "y"], "t"), ("Mul", ["t", "h"], "out"), ("Relu", ["t"], "other"),
               consts={"h": torch.tensor(0.5)})
    net.mark_output("out")
    m, why, _ = _match(p, net, root="out")
    assert m is None and "has 2 operands, the pattern expects 3" in why
    # a plain Op pattern walks through the shared Mul; Match.escapes then names its other reader
    m2, _, _ = _match(Op("Mul", Op("Mul", Var("x"), Var("y")), Const(0.5)), net, root="out")
    g = Graph(net, [{"x": (2, 3), "y": (2, 3)}])
    assert m2 is not None and "also read by layer 'other'" in m2.escapes(g)


def test_sums_and_alternatives():
    p = AnyOf(Op("Neg", Var("x")), Sum(Const(1.0), Var("x")))
    m, _, _ = _match(p, _net(("Add", ["one", "x"], "out"), consts={"one": torch.tensor(1.0)}))
    assert m is not None and m["x"] == "x"
    assert p.root_ops() == {"Neg", "Add"}


def test_deepest_failure_is_the_reason():
    p = Op("Relu", Op("Exp", Op("Sqrt", Var("x"))))
    m, why, reached = _match(p, _net(("Abs", ["x"], "a"), ("Exp", ["a"], "e"), ("Relu", ["e"], "out")))
    assert m is None and "expected Sqrt producing 'a', found Abs" in why
    assert [lay.op for lay in reached] == ["Relu", "Exp"]


def test_graph_shapes_mark_dims_that_vary_between_profile_points():
    net = _net(("Relu", ["x"], "out"), shape=(-1, 3))
    g = Graph(net, [{"x": (1, 3), "y": (2, 3)}, {"x": (4, 3), "y": (2, 3)}])
    assert g.shape("out") == (-1, 3) and g.rank("out") == 2 and g.dtype("out") == torch.float32
    assert g.same_shape("x", "out") and not g.same_shape("x", "y")
