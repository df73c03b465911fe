"""Crafted engines (checksum recomputed) are one EngineFileError naming the file and the field (issue 13.3).

Each case is a finding of the issue that, before the schema, loaded or escaped as another exception. The oracle is
the file itself: every edit makes the manifest contradict the ONNX spec, its own fields or its weights.
"""

import json

import pytest
import torch

from engine_craft import edit, pack, small_cnn_engine, split
from tensorforge.engine import from_bytes
from tensorforge.runtime import Runtime
from tensorforge.util.errors import EngineFileError


def _load_error(data: bytes, what: str = "engine file crafted.engine") -> str:
    with pytest.raises(EngineFileError) as e:
        from_bytes(data, what)
    msg = str(e.value)
    assert "\n" not in msg and what in msg
    return msg


def _layer(m, op):
    return next(la for la in m["layers"] if la["op"] == op)


def test_pristine_engine_loads():
    eng = from_bytes(small_cnn_engine())
    assert [t.name for t in eng.outputs] == ["y"]


def test_corrupt_safetensors_header_is_engine_file_error():
    raw, weights = split(small_cnn_engine())
    bad = bytearray(weights)
    bad[8:20] = b"{not json!!!"
    msg = _load_error(pack(raw, bytes(bad)))
    assert "weights" in msg


def test_weights_header_claiming_more_bytes_than_present():
    raw, weights = split(small_cnn_engine())
    n = int.from_bytes(weights[:8], "little")
    header = json.loads(weights[8:8 + n])
    first = next(k for k in header if k != "__metadata__")
    header[first]["data_offsets"][1] += 10**9
    hb = json.dumps(header).encode()
    _load_error(pack(raw, len(hb).to_bytes(8, "little") + hb + weights[8 + n:]))


def test_deeply_nested_json_is_refused_without_recursion_error():
    raw, weights = split(small_cnn_engine())
    deep = b"[" * 100000 + b"]" * 100000
    crafted = raw[:-1] + b',"build_info_extra":' + deep + b"}"
    msg = _load_error(pack(crafted, weights))
    assert "nested" in msg


def test_nesting_depth_ignores_brackets_inside_strings():
    from tensorforge.engine.schema import MAX_DEPTH, SchemaViolation, nesting_depth, parse_manifest
    assert nesting_depth(b'{"a": "[[[[[[[[", "b": [[1]]}') == 3
    assert nesting_depth(b'{"a": "\\"[[[["}') == 1
    with pytest.raises(SchemaViolation):
        parse_manifest(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))


def test_list_where_an_object_belongs_names_the_field():
    msg = _load_error(edit(small_cnn_engine(), lambda m: m["layers"].__setitem__(0, [])))
    assert "layers[0]" in msg and "expected an object" in msg


def test_layer_input_nobody_produces():
    def fn(m):
        m["layers"][-1]["inputs"][0] = "ghost"
    msg = _load_error(edit(small_cnn_engine(), fn))
    assert "ghost" in msg and "inputs[0]" in msg


def test_layer_reading_a_tensor_produced_later():
    def fn(m):
        m["layers"][0], m["layers"][-1] = m["layers"][-1], m["layers"][0]
    assert "not produced before" in _load_error(edit(small_cnn_engine(), fn))


def test_plugin_record_that_is_a_string():
    msg = _load_error(edit(small_cnn_engine(), lambda m: m.__setitem__("plugins", ["custom::Evil"])))
    assert "plugins[0]" in msg


def test_tactic_null_or_not_an_id():
    for bad in (None, 7, "x; import os"):
        msg = _load_error(edit(small_cnn_engine(), lambda m, bad=bad: m["layers"][0].__setitem__("tactic", bad)))
        assert "layers[0].tactic" in msg


def test_attribute_the_op_rejects():
    """Flatten axis 9 on a rank-4 input: the ONNX spec allows axis in [-r, r]; the reference refuses it."""
    msg = _load_error(edit(small_cnn_engine(), lambda m: _layer(m, "Flatten")["attrs"].__setitem__("axis", 9)))
    assert "Flatten" in msg


def test_unknown_attribute_and_wrong_kind():
    msg = _load_error(edit(small_cnn_engine(), lambda m: _layer(m, "Flatten")["attrs"].__setitem__("evil", 1)))
    assert "attrs.evil" in msg
    msg = _load_error(edit(small_cnn_engine(), lambda m: _layer(m, "Flatten")["attrs"].__setitem__("axis", "one")))
    assert "attrs.axis" in msg


def test_unknown_op():
    assert "unknown op" in _load_error(edit(small_cnn_engine(), lambda m: m["layers"][0].__setitem__("op", "Exec")))


def test_output_declared_int64_for_a_float_output():
    def fn(m):
        for t in m["tensors"] + m["outputs"]:
            if t["name"] == "y":
                t["dtype"] = "int64"
    msg = _load_error(edit(small_cnn_engine(), fn))
    assert "'y'" in msg and "float32" in msg


def test_output_declared_with_a_wrong_static_dim():
    def fn(m):
        for t in m["tensors"] + m["outputs"]:
            if t["name"] == "y":
                t["shape"] = [-1, 6]       # F is 4×5: y has 5 columns
    assert "shape" in _load_error(edit(small_cnn_engine(), fn))


def test_input_shape_abc():
    def fn(m):
        m["inputs"][0]["shape"] = "abc"
    assert "inputs[0].shape" in _load_error(edit(small_cnn_engine(), fn))


def test_duplicate_json_keys():
    raw, weights = split(small_cnn_engine())
    crafted = b'{"name":"evil",' + raw[1:]
    assert "duplicate" in _load_error(pack(crafted, weights))


def test_weight_shape_and_dtype_against_the_safetensors_header():
    def shape(m):
        next(t for t in m["tensors"] if t["name"] == "W")["shape"] = [4, 3, 3, 2]
    assert "weights hold shape" in _load_error(edit(small_cnn_engine(), shape))

    def dtype(m):
        next(t for t in m["tensors"] if t["name"] == "W")["dtype"] = "float16"
    assert "weights hold" in _load_error(edit(small_cnn_engine(), dtype))


def test_constant_missing_from_the_weights():
    assert "not in the weights" in _load_error(
        edit(small_cnn_engine(), lambda m: m["constants"].append("phantom")))


def test_tensor_attribute_naming_a_missing_weight():
    msg = _load_error(edit(small_cnn_engine(),
                           lambda m: _layer(m, "Flatten")["attrs"].__setitem__("axis", {"$tensor": "nowhere"})))
    assert "nowhere" in msg


def test_huge_profile_is_refused_by_the_bound():
    """opt 2^40 × 64 (the issue's crafted profile): rejected before anything is allocated."""
    def fn(m):
        name = m["inputs"][0]["name"]
        m["inputs"][0]["shape"] = [-1, -1]
        for t in m["tensors"]:
            if t["name"] == name:
                t["shape"] = [-1, -1]
        m["profiles"][0][name] = [[1, 1], [2**40, 64], [2**40, 64]]
    assert "profiles[0].x" in _load_error(edit(small_cnn_engine(), fn))

    def product(m):     # every dimension below 2^31, the product far above any real tensor
        m["profiles"][0]["x"] = [[1, 3, 8, 8], [2, 3, 8, 8], [2**30, 3, 8, 8]]
    assert "elements" in _load_error(edit(small_cnn_engine(), product))


def test_profile_min_above_max_and_rank_mismatch():
    def order(m):
        p = m["profiles"][0]["x"]
        p[0], p[2] = p[2], p[0]
    assert "min" in _load_error(edit(small_cnn_engine(), order))

    def rank(m):
        m["profiles"][0]["x"] = [[1, 3, 8], [2, 3, 8], [4, 3, 8]]
    assert "rank" in _load_error(edit(small_cnn_engine(), rank))


def test_dims_bounded_so_counts_cannot_overflow():
    def fn(m):
        next(t for t in m["tensors"] if t["name"] == "f")["shape"] = [2**62, 2**62]
    _load_error(edit(small_cnn_engine(), fn))


def test_runtime_deserialize_names_the_file():
    data = edit(small_cnn_engine(), lambda m: m["layers"].__setitem__(0, "x"))
    with pytest.raises(EngineFileError, match="my.engine"):
        Runtime("cpu").deserialize(data, "engine file my.engine")


def test_inference_check_fails_when_broken_on_purpose(monkeypatch):
    """The dtype cross-check is what catches the int64 output: with it disabled, the crafted file loads."""
    import tensorforge.engine.serialize as ser

    def fn(m):
        for t in m["tensors"] + m["outputs"]:
            if t["name"] == "y":
                t["dtype"] = "int64"
    crafted = edit(small_cnn_engine(), fn)
    monkeypatch.setattr(ser, "check_inference", lambda engine: None)
    assert ser.from_bytes(crafted).outputs[0].dtype == torch.int64


def test_dynamic_input_without_a_profile():
    """Found by the campaign: profiles emptied → the runtime indexed an empty list at the first run."""
    assert "no optimization profile" in _load_error(edit(small_cnn_engine(), lambda m: m.__setitem__("profiles", [])))
    assert "no range" in _load_error(edit(small_cnn_engine(), lambda m: m.__setitem__("profiles", [{}])))


def test_inspect_reads_build_info_fields_typed():
    """Found by the fuzz suite: build_info.memory.host_value_inputs of the wrong shape crashed the context."""
    def fn(m):
        m["build_info"].setdefault("memory", {})["host_value_inputs"] = {"conv": [[0]]}
    assert "host_value_inputs" in _load_error(edit(small_cnn_engine(), fn))


def test_infinite_float_attributes_load():
    """An attention mask's -inf in a fused chain's constants (found by the contrib tests): json.dumps writes it as
    -Infinity, and the reader must take it back — the first version of this reader refused it."""
    def fn(m):
        _layer(m, "FusedConvPool")["attrs"]["beta"] = float("-inf")
    data = edit(small_cnn_engine(), fn)
    assert b"-Infinity" in split(data)[0]
    eng = from_bytes(data)
    assert next(la for la in eng.layers if la.op == "FusedConvPool").attrs["beta"] == float("-inf")


def test_static_engine_without_a_profile():
    """Found by the campaign (seed 3, engine case 512): a static engine whose only profile was deleted loaded, then
    the runtime indexed an empty list of reasons at the first run."""
    from onnx import TensorProto, helper
    import tensorforge as tfg
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    data = tfg.build(m.SerializeToString(), device="cpu").serialize()
    assert "no optimization profile" in _load_error(edit(data, lambda man: man.__setitem__("profiles", [])))
