"""Engines are data: nothing read from an engine file is ever compiled or executed (issue 13.1).

A real engine built on the CPU is edited the way an attacker would — kernel source put back into the manifest (the
allow-list bypass of the issue: an annotation that calls eval before a later `def eval`), and chain programs whose op
names, arguments, literals, attributes and dtypes carry code — with the header checksum recomputed, then loaded and
run through every entry point (Runtime.deserialize, load_engine_file, ExecutionContext on from_bytes, tfg.load, the
TensorRT-style Runtime). The payloads would create a marker file; it must never exist. Each load either fails with
EngineFileError or runs exactly what the layer data says (checked against a closed form of the edited program).
The chain layers are set to the generated Triton tactic as on a GPU build, and the CPU is made to pass for CUDA in
the tactic's device check, so the regenerated source really runs (TRITON_INTERPRET=1).
"""

import hashlib
import json
import struct

import pytest
import torch

import tensorforge as tfg
from tensorforge.codegen import chain_source, source_hash
from tensorforge.engine import from_bytes
from tensorforge.kernels import generated, triton_pointwise
from tensorforge.runtime import ExecutionContext, Runtime, load_engine_file
from tensorforge.util.errors import EngineFileError

import rt_models

HEADER = struct.Struct("<8sIQQ32s")          # the documented layout: magic, version, M, W, SHA-256(manifest ‖ weights)
GENERATED = "pointwisechain.triton_generated[BLOCK=1024,warps=4]"
X = torch.tensor([[-1.5, -0.25, 0.5, 2.0], [0.75, -3.0, 1.25, 0.0], [4.0, -0.5, -2.0, 0.125]])
B = torch.linspace(-1, 1, 4)


@pytest.fixture
def fake_cuda(monkeypatch):
    """The generated tactic's device check passes on the CPU: its kernels run in Triton's interpreter."""
    monkeypatch.setattr(triton_pointwise, "triton_device_reason", lambda device: None)


@pytest.fixture(scope="module")
def engine_bytes():
    engine = tfg.build(rt_models.affine_relu(), device="cpu", shapes={"x": ((1, 4), (2, 4), (8, 4))})
    assert [la.op for la in engine.data.layers] == ["PointwiseChain"]
    return engine.serialize()


def unpack(data: bytes):
    magic, version, m, w, _ = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    return magic, version, json.loads(body[:m]), body[m:m + w]


def pack(manifest: dict, weights: bytes, version: int | None = None, magic: bytes = b"TFGENGIN") -> bytes:
    """An engine file with every checksum the format has recomputed (what whoever edits the file does)."""
    mbytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    version = manifest["format_version"] if version is None else version
    digest = hashlib.sha256(mbytes + weights).digest()
    return HEADER.pack(magic, version, len(mbytes), len(weights), digest) + mbytes + weights


def edit(data: bytes, change, version=None) -> bytes:
    _, _, manifest, weights = unpack(data)
    layer = manifest["layers"][0]
    layer["tactic"] = GENERATED
    change(manifest, layer["attrs"])
    return pack(manifest, weights, version)


def step(attrs, k):
    return attrs["steps"][k]["$dict"]


def rehash(data: bytes) -> bytes:
    """What an attacker who knows codegen does: record the hash of the text the program generates."""
    _, _, manifest, weights = unpack(data)
    manifest["layers"][0]["attrs"]["kernel"] = ""
    engine = from_bytes(pack(manifest, weights))
    manifest["layers"][0]["attrs"]["kernel"] = source_hash(chain_source(engine.layers[0], engine.tensors))
    return pack(manifest, weights)


def outcomes(data: bytes, tmp_path) -> list:
    """Load and run through every entry point: each gives ("error", message) or ("ran", y)."""
    path = tmp_path / "crafted.engine"
    path.write_bytes(data)
    feed = {"x": X.clone()}
    paths = [lambda: ExecutionContext(Runtime("cpu").deserialize(data), "cpu").run(feed)["y"],
             lambda: ExecutionContext(load_engine_file(path), "cpu").run(feed)["y"],
             lambda: ExecutionContext(from_bytes(data), "cpu").run(feed)["y"],
             lambda: tfg.load(path, device="cpu").run(feed)["y"],
             lambda: tfg.Runtime(tfg.Logger()).deserialize_cuda_engine(data).create_execution_context(),
             ]
    results = []
    for run in paths:
        try:
            results.append(("ran", run()))
        except EngineFileError as e:
            results.append(("error", str(e)))
    return results


def payload(marker) -> str:
    return f"open({str(marker)!r}, 'w').write('ran')"


def test_the_engine_file_holds_no_source(engine_bytes):
    _, version, manifest, _ = unpack(engine_bytes)
    assert version == 2 and "kernel_sources" not in manifest
    text = json.dumps(manifest)
    assert "tl.load" not in text and "triton.jit" not in text and "def " not in text
    assert len(manifest["layers"][0]["attrs"]["kernel"]) == 64          # the hash of the text, not the text


def test_generated_kernels_are_regenerated_and_run(engine_bytes, tmp_path, fake_cuda):
    """The unedited engine, as a GPU build would have it: its chain runs as the regenerated Triton kernel."""
    data = edit(engine_bytes, lambda m, a: None)
    for key in list(generated._SOURCES):                      # nothing left over from the build in this process
        generated._SOURCES.pop(key)
        generated._MODULES.pop(key, None)
    engine = Runtime("cpu").deserialize(data)
    key = engine.layers[0].attrs["kernel"]
    assert generated.has_source(key) and key not in generated._MODULES       # regenerated at load, not compiled yet
    ctx = ExecutionContext(engine, "cpu")
    assert ctx.substituted == {}
    torch.testing.assert_close(ctx.run({"x": X})["y"], torch.relu(X * 2 + B) - X)
    assert key in generated._MODULES                                          # the generated kernel is what ran


OLD_STYLE = '''import triton
import triton.language as tl


@triton.jit
def pointwise_kernel(x: eval("{payload}")):
    pass


@triton.jit
def eval(x):
    pass
'''


@pytest.mark.parametrize("version", [2, 1])
def test_kernel_source_in_the_manifest_is_refused(engine_bytes, tmp_path, fake_cuda, version):
    marker = tmp_path / "marker"
    text = OLD_STYLE.replace("{payload}", payload(marker).replace('"', "'"))

    def put_source(manifest, attrs):
        manifest["kernel_sources"] = {source_hash(text): text}
        attrs["kernel"] = source_hash(text)
    data = edit(engine_bytes, put_source, version)
    results = outcomes(data, tmp_path)
    assert all(kind == "error" for kind, _ in results), results
    assert all("rebuild" in msg for _, msg in results)
    assert not marker.exists()


MALICIOUS = {
    "op name with code": lambda a, p: step(a, 2).update(op=f"Relu(s1)\n    {p}\n#"),
    "op not in the op table": lambda a, p: step(a, 2).update(op="Exec"),
    "argument with code": lambda a, p: step(a, 0).update(args=["in0", f"c0); {p}; (0"]),
    "argument out of range": lambda a, p: step(a, 0).update(args=["in0", "s9"]),
    "literal with code": lambda a, p: a["consts"][0]["$dict"].update(value=p),
    "literal dtype with code": lambda a, p: a["consts"][0]["$dict"].update(dtype=f"float32\n{p}"),
    "attribute with code": lambda a, p: step(a, 2).update(op="LeakyRelu", attrs={"$dict": {"alpha": f"1); {p}; (1"}}),
    "attribute that is a weight": lambda a, p: step(a, 2).update(op="LeakyRelu", attrs={"$dict": {"alpha": {"$tensor": "b"}}}),
    "unknown attribute": lambda a, p: step(a, 2).update(attrs={"$dict": {"code": p}}),
    "output with code": lambda a, p: a.update(outputs=[f"s3.to(tl.float32)); {p}#"]),
    "output dtype with code": lambda a, p: a.update(out_dtypes=[f"float32)\n{p}\n#"]),
    "kernel hash that is a path": lambda a, p: a.update(kernel="../../../tmp/evil"),
    "extra program field": lambda a, p: a.update(source=p),
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_malicious_chain_programs_run_nothing(engine_bytes, tmp_path, fake_cuda, case):
    marker = tmp_path / "marker"
    data = edit(engine_bytes, lambda m, a: MALICIOUS[case](a, payload(marker)))
    results = outcomes(data, tmp_path)
    assert all(kind == "error" for kind, _ in results), (case, results)
    assert not marker.exists()


def test_a_program_changed_with_its_hash_runs_what_it_says(engine_bytes, tmp_path, fake_cuda):
    """Relu → Sigmoid, and a layer name holding code (names never reach the generated source)."""
    marker = tmp_path / "marker"

    def change(manifest, attrs):
        step(attrs, 2).update(op="Sigmoid")
        manifest["layers"][0]["name"] = f"chain\n{payload(marker)}\n#"
    data = rehash(edit(engine_bytes, change))
    results = outcomes(data, tmp_path)
    assert [kind for kind, _ in results] == ["ran"] * len(results), results
    want = torch.sigmoid(X * 2 + B) - X                         # the edited program, by hand
    for _, y in results[:4]:
        torch.testing.assert_close(y, want)
    assert not marker.exists()


def test_a_program_whose_hash_was_not_updated_is_refused(engine_bytes, tmp_path, fake_cuda):
    data = edit(engine_bytes, lambda m, a: step(a, 2).update(op="Sigmoid"))
    results = outcomes(data, tmp_path)
    assert all(kind == "error" and "is not the one it was built with" in msg for kind, msg in results), results


@pytest.mark.parametrize("case", ["op name with code", "argument with code", "output dtype with code",
                                  "attribute with code", "literal with code"])
def test_the_context_checks_the_program_itself(engine_bytes, fake_cuda, case, tmp_path):
    """Whatever the file reader checked, creating a context regenerates from the program and refuses a bad one."""
    engine = from_bytes(engine_bytes)
    layer = engine.layers[0]
    layer.tactic = GENERATED
    wrapped = {"steps": [{"$dict": dict(s)} for s in layer.attrs["steps"]],
               "consts": [{"$dict": dict(c)} for c in layer.attrs["consts"]],
               "outputs": list(layer.attrs["outputs"]), "out_dtypes": list(layer.attrs["out_dtypes"])}
    MALICIOUS[case](wrapped, payload(tmp_path / "marker"))
    layer.attrs.update(steps=[s["$dict"] for s in wrapped["steps"]], consts=[c["$dict"] for c in wrapped["consts"]],
                       outputs=wrapped["outputs"], out_dtypes=wrapped["out_dtypes"])
    if case == "attribute with code":
        layer.attrs["steps"][2]["attrs"] = {"alpha": layer.attrs["steps"][2]["attrs"]["$dict"]["alpha"]}
    with pytest.raises(EngineFileError, match="malformed program"):
        ExecutionContext(engine, "cpu")
    assert not (tmp_path / "marker").exists()
