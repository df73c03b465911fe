"""codegen — generated Triton source for fused chains.

Entry points: `generate_kernel_sources(net)` (builder: every chain's source, by hash) and
`generate_pointwise(layer, in_dtypes, rank) -> source text` for one PointwiseChain layer;
`fastmath` holds the branch-free GELU/erf/tanh helpers the generated code calls. The builder stores every
source in the engine (Engine.kernel_sources, keyed by SHA-256); kernels/generated.py checks and compiles
the stored text at load time, cached by that hash, so loading never re-runs passes or codegen.
Imports ir, util.
"""

from .pointwise import generate as generate_pointwise
from .sources import generate_kernel_sources

__all__ = ["generate_kernel_sources", "generate_pointwise"]
