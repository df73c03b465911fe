"""`tensorforge exec` glue for the precision flags (issue 12): ExecOptions → BuilderConfig precision fields.

    --int8 --fp8 --best --stronglyTyped --precisionConstraints --layerPrecisions --layerOutputTypes --sparsity
    --calib=<cache>          read when the file exists; written after calibrating when --calibData is given
    --calibData=<dir|files>  calibration inputs (.npz per feed, .npy for a single-input model); --calibAlgo=algo
    --min/opt/maxShapesCalib the calibration profile (checked against the calibration batches' shapes)
exec_cmd.py calls `check(opts)` with the other checks and `apply(opts, config, log)` before building.
"""

import os

from ..builder import OptimizationProfile
from ..builder.calibration import CalibrationSource, cache_file_hooks
from ..util.errors import UsageError

FLAGS = ("--int8", "--fp8", "--best", "--calib", "--calibData", "--calibAlgo", "--minShapesCalib", "--optShapesCalib",
         "--maxShapesCalib", "--stronglyTyped", "--precisionConstraints", "--layerPrecisions", "--layerOutputTypes",
         "--sparsity")


def check(opts) -> None:
    quantized = opts.int8 or opts.fp8 or opts.best
    for flag in ("--calib", "--calibData", "--calibAlgo", "--minShapesCalib", "--optShapesCalib", "--maxShapesCalib"):
        if flag in opts.given and not quantized:
            raise UsageError(f"{flag} needs --int8, --fp8 or --best", f"add --int8, or drop {flag}")
    if opts.calib and not opts.calib_data and not os.path.exists(opts.calib):
        raise UsageError(f"calibration cache {opts.calib} does not exist",
                         "give --calibData=<folder> to calibrate and write it, or the path of an existing cache")
    given = [bool(opts.min_shapes_calib), bool(opts.opt_shapes_calib), bool(opts.max_shapes_calib)]
    if any(given) and given != [False, True, False] and not all(given):
        raise UsageError("give only --optShapesCalib, or all of --minShapesCalib, --optShapesCalib and "
                         "--maxShapesCalib", "the calibration profile follows --minShapes/--optShapes/--maxShapes")
    if opts.strongly_typed and (opts.fp16 or opts.bf16 or quantized):
        raise UsageError("--stronglyTyped takes the types from the model; --fp16/--bf16/--int8/--fp8/--best conflict",
                         "drop the precision flags or --stronglyTyped")


def _calib_profile(opts) -> OptimizationProfile | None:
    if not opts.opt_shapes_calib:
        return None
    prof = OptimizationProfile()
    for name, opt in opts.opt_shapes_calib.items():
        prof.set_shape(name, opts.min_shapes_calib.get(name, opt), opt, opts.max_shapes_calib.get(name, opt))
    return prof


def apply(opts, config, log) -> None:
    config.int8, config.fp8, config.best = opts.int8, opts.fp8, opts.best
    config.strongly_typed = opts.strongly_typed
    config.precision_constraints = opts.precision_constraints
    config.layer_precisions, config.layer_output_types = list(opts.layer_precisions), list(opts.layer_output_types)
    config.sparsity = opts.sparsity
    if not (opts.int8 or opts.fp8 or opts.best):
        return
    profile = _calib_profile(opts)
    config.calibration_profile = profile
    if opts.calib or opts.calib_data:
        read, write = cache_file_hooks(opts.calib) if opts.calib else (None, None)
        data = list(opts.calib_data)
        config.calibration = CalibrationSource(data or None, opts.calib_algo, read, write)
        what = f"cache {opts.calib}" if opts.calib and os.path.exists(opts.calib) else \
            f"{', '.join(data)} ({opts.calib_algo})"
        log.info(f"Calibration: {what}")
