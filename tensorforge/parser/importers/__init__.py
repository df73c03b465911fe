"""Built-in importers, one op family per module. Importing this package registers them (explicit list)."""

from . import elementwise  # noqa: F401
from . import legacy  # noqa: F401
from . import constants  # noqa: F401
from . import conv, pool, norm, linalg, nn_misc  # noqa: F401,E401
from . import shape, indexing, reduce, tensor_misc  # noqa: F401,E401
from . import control, sequence, quant, random, bitwise, detection, rnn, signal, extra, ml  # noqa: F401,E401
from . import attention  # noqa: F401
from . import contrib  # noqa: F401  (onnxruntime com.microsoft ops)
from . import contrib_conv, contrib_quant, contrib_attention  # noqa: F401,E401  (com.microsoft FusedConv; QGemm,
#   DynamicQuantizeLSTM; MultiHeadAttention, GroupQueryAttention)
