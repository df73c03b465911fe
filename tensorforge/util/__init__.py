"""util — logging with severities, error types with actionable messages, device and file helpers.

Entry points: `errors.TensorforgeError`, `log.get_logger`, `device.resolve_device`, `fileio.atomic_write`.
This room imports nothing else of tensorforge.
"""
