"""At load, the source of every generated kernel is made again from the layer's own data — never read from the file.

Entry point: `regenerate_kernels(engine) -> number of kernels`. For each PointwiseChain layer, codegen/ checks its
program (ops from the generator's table, attributes, references, dtypes) and generates the text with the same
deterministic function the builder used, reading the input dtypes and output rank from the engine's tensor table;
the text goes into kernels/generated.py's store under its SHA-256. The hash the builder wrote into the layer must
be that hash (a chain built without one, `kernel` "", runs its reference; its program is checked all the same):
a mismatch means the engine came from a tensorforge whose generator differs (or was edited), so the
kernel timed at build is not the one this process would run. Every failure is one EngineFileError naming the layer.
"""

from ..codegen import ChainDataError, chain_problem, chain_source
from ..engine import Engine
from ..kernels.generated import register_source
from ..util.errors import EngineFileError


def regenerate_kernels(engine: Engine, what: str | None = None) -> int:
    what = what or f"engine {engine.name!r}"
    count = 0
    for layer in engine.layers:
        if layer.op != "PointwiseChain":
            continue
        try:
            if not layer.attrs.get("kernel"):      # built without a generated kernel: the program is still checked
                why = chain_problem(layer.attrs, len(layer.inputs))
                if why is not None:
                    raise ChainDataError(why)
                continue
            text = chain_source(layer, engine.tensors)
        except ChainDataError as e:
            raise EngineFileError(f"{what}: layer {layer.name!r} (PointwiseChain) holds a malformed program: {e}",
                                  "rebuild the engine; a file that fails here was damaged or edited") from None
        key = register_source(text)
        recorded = layer.attrs.get("kernel", "")
        if recorded and recorded != key:
            raise EngineFileError(f"{what}: layer {layer.name!r}: the kernel generated from its program "
                                  f"({key[:12]}…) is not the one it was built with ({str(recorded)[:12]}…)",
                                  "rebuild the engine with this tensorforge")
        count += 1
    return count
