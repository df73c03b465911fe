"""Timing cache file: round trip, merge (in memory and with the file on disk), refusal of other versions and
foreign files, and layer signatures that change exactly when the timing question changes."""

import json

import pytest
import torch

from tensorforge.builder.timing_cache import FORMAT, VERSION, TimingCache, device_key, layer_signature
from tensorforge.ir import Layer
from tensorforge.util.errors import BuildError

DEV = device_key("cuda:FakeGPU:sm_90")


def entry(best, ms):
    return {"op": "Relu", "signature": {}, "best": best, "times_ms": {best: ms}, "rejected": {}, "out_strides": [[4, 1]]}


def test_round_trip(tmp_path):
    cache = TimingCache()
    cache.record(DEV, "k1", entry("relu.a", 0.5))
    cache.record(DEV, "k2", entry("relu.b", 0.25))
    path = tmp_path / "cache.json"
    assert cache.save(path) == 2
    loaded = TimingCache.load(path)
    assert loaded.devices == cache.devices
    assert loaded.lookup(DEV, "k2")["best"] == "relu.b" and loaded.lookup(DEV, "nope") is None
    assert (loaded.hits, loaded.misses) == (1, 1)
    assert json.loads(path.read_text())["version"] == VERSION
    assert TimingCache.deserialize(cache.serialize()).devices == cache.devices


def test_merge_keeps_ours_unless_told_and_counts_new_entries():
    a, b = TimingCache(), TimingCache()
    a.record(DEV, "k1", entry("relu.a", 0.5))
    b.record(DEV, "k1", entry("relu.b", 0.1))
    b.record(DEV, "k2", entry("relu.b", 0.2))
    b.record("cpu:x86_64 torch-x", "k3", entry("relu.c", 1.0))
    assert a.merge(b) == 2 and len(a) == 3
    assert a.lookup(DEV, "k1")["best"] == "relu.a"
    a.merge(b, prefer_other=True)
    assert a.lookup(DEV, "k1")["best"] == "relu.b"


def test_save_merges_with_the_file_on_disk(tmp_path):
    path = tmp_path / "cache.json"
    first, second = TimingCache(), TimingCache()
    first.record(DEV, "k1", entry("relu.a", 0.5))
    first.save(path)
    second.record(DEV, "k2", entry("relu.b", 0.5))     # another build, which never loaded k1
    assert second.save(path) == 2
    assert set(TimingCache.load(path).devices[DEV]) == {"k1", "k2"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json", "cache.json.lock"]   # no temporary file


def test_missing_file_is_empty_and_bad_files_are_refused(tmp_path):
    assert len(TimingCache.load(tmp_path / "absent.json")) == 0
    other = tmp_path / "v99.json"
    other.write_text(json.dumps({"format": FORMAT, "version": 99, "devices": {}}))
    with pytest.raises(BuildError, match="timing-cache version 99; .* reads version 1"):
        TimingCache.load(other)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"hello": 1}))
    with pytest.raises(BuildError, match="is not a tensorforge timing cache"):
        TimingCache.load(foreign)
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00{not json")
    with pytest.raises(BuildError, match="is not valid JSON"):
        TimingCache.load(garbage)
    with pytest.raises(BuildError, match="is a folder"):
        TimingCache.load(tmp_path)


def test_signature_tracks_op_attrs_inputs_and_tactic_space():
    x = {"shape": [2, 8], "dtype": "float32", "stride": [8, 1], "const": False}
    base = layer_signature(Layer("l", "Gelu", ["x"], ["y"], {"approximate": "none"}), [x], ["gelu.a", "gelu.b"])[0]
    same = layer_signature(Layer("other_name", "Gelu", ["q"], ["r"], {"approximate": "none"}), [x],
                           ["gelu.b", "gelu.a"])[0]
    assert base == same                    # names and candidate order do not matter
    variants = [
        (Layer("l", "Gelu", ["x"], ["y"], {"approximate": "tanh"}), [x], ["gelu.a", "gelu.b"]),
        (Layer("l", "Gelu", ["x"], ["y"], {"approximate": "none"}), [dict(x, shape=[4, 8])], ["gelu.a", "gelu.b"]),
        (Layer("l", "Gelu", ["x"], ["y"], {"approximate": "none"}), [dict(x, stride=[1, 2])], ["gelu.a", "gelu.b"]),
        (Layer("l", "Gelu", ["x"], ["y"], {"approximate": "none"}), [dict(x, dtype="float16")], ["gelu.a", "gelu.b"]),
        (Layer("l", "Gelu", ["x"], ["y"], {"approximate": "none"}), [x], ["gelu.a", "gelu.b", "gelu.c"]),
    ]
    keys = {layer_signature(*v)[0] for v in variants}
    assert base not in keys and len(keys) == len(variants)
    w1 = Layer("l", "Fake", ["x"], ["y"], {"table": torch.arange(4.0)})
    w2 = Layer("l", "Fake", ["x"], ["y"], {"table": torch.arange(4.0) + 1})
    assert layer_signature(w1, [x], ["a"])[0] != layer_signature(w2, [x], ["a"])[0]
    s1 = Layer("l", "Fake", ["x"], ["y"], {"value": torch.tensor(1.5)})        # 0-d tensor attribute
    s2 = Layer("l", "Fake", ["x"], ["y"], {"value": torch.tensor(2.5)})
    assert layer_signature(s1, [x], ["a"])[0] != layer_signature(s2, [x], ["a"])[0]
