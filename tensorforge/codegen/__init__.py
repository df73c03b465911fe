"""codegen — generated Triton source for fused chains, from the layers' own data.

Entry points: `chain_source(layer, tensors)` (one PointwiseChain → source text; the builder and the runtime both
call it, so an engine file stores only the chain's program and the text's SHA-256, never text),
`generate_kernel_sources(net)` (builder: every chain's source by hash), `generate_pointwise(layer, in_dtypes, rank)`
(the generator itself), `chain_problem(attrs, n_inputs)` (the program's well-formedness, checked before generating).
`fastmath` holds the branch-free GELU/erf/tanh helpers the generated code calls. kernels/generated.py compiles
the text, cached by its hash. Imports ir, util.
"""

from .chain_check import chain_problem
from .pointwise import generate as generate_pointwise
from .sources import ChainDataError, chain_source, generate_kernel_sources, source_hash

__all__ = ["ChainDataError", "chain_problem", "chain_source", "generate_kernel_sources", "generate_pointwise",
           "source_hash"]
