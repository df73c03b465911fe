"""Built-in IR ops, one family per module. Importing this package registers them all (explicit list).

IR ops carry ONNX's name and latest semantics (attributes named as in ONNX); fused ops have names of their own.
"""

from . import elementwise  # noqa: F401
from . import activation  # noqa: F401
from . import conv, pool, norm, linalg, nn_misc, resize  # noqa: F401,E401
from . import shape, indexing, reduce, tensor_misc  # noqa: F401,E401
from . import control, sequence, quant, random, bitwise, detection, rnn, signal, extra  # noqa: F401,E401
from . import loss, attention, sequence_models, spatial, ml, training  # noqa: F401,E401
from . import ml_linear, ml_svm, ml_trees, ml_zipmap  # noqa: F401,E401  (ai.onnx.ml: linear, SVM, trees, ZipMap)
from . import contrib  # noqa: F401  (onnxruntime com.microsoft ops that are new math)
from . import contrib_quant  # noqa: F401  (com.microsoft QGemm, DynamicQuantizeLSTM with onnxruntime's rounding)
from . import contrib_attention  # noqa: F401  (com.microsoft MultiHeadAttention, GroupQueryAttention)
from . import fused  # noqa: F401
from . import quantized  # noqa: F401  (QuantizedConv/ConvTranspose/MatMul: Q/DQ fusion results)
from . import sparse  # noqa: F401  (SparseGemm: 2:4 structured-sparse weights, --sparsity)
