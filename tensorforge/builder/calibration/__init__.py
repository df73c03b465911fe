"""builder/calibration — post-training calibration and implicit quantization (TensorRT 8/10's --int8 era).

Entry points: `quantize_network` (the builder's step: ranges → Q/DQ layers), `calibrate` (run the fp32 network,
collect every tensor's range), `CalibrationSource` / `load_batches` (where batches and caches come from),
`read_cache` / `write_cache` (TensorRT's calibration cache text format). Files: histogram.py (collectors),
algorithms.py (entropy, min-max, percentile, legacy), cache.py, source.py, run.py, qdq_insert.py, quantize.py.
"""

from .algorithms import ALGORITHMS
from .cache import CalibrationCache, cache_from_amax, read_cache, write_cache
from .qdq_insert import QdqReport, has_qdq, insert_qdq
from .quantize import QuantizationResult, quantize_network
from .run import CalibrationSettings, calibrate
from .source import CalibrationSource, cache_file_hooks, configure, load_batches

__all__ = ["ALGORITHMS", "CalibrationCache", "CalibrationSettings", "CalibrationSource", "QdqReport",
           "QuantizationResult", "cache_file_hooks", "cache_from_amax", "calibrate", "configure", "has_qdq", "insert_qdq",
           "load_batches", "quantize_network", "read_cache", "write_cache"]
