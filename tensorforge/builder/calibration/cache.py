"""TensorRT's calibration cache, a text file: read caches TensorRT wrote, write caches TensorRT reads.

    TRT-8601-EntropyCalibration2          first line: TRT-<version>-<algorithm>
    input: 3c010204                       then `tensor name: <8 hex digits>` per tensor, one a line
    /conv1/Conv_output_0: 3d8f5c29

The hex digits are the IEEE-754 float32 *scale* written big-endian (struct '>f'); for INT8 the scale is
amax / 127, so `3c010204` is 1/127 (a tensor in [-1, 1]). Names may contain ': ' themselves (TensorRT writes
`(Unnamed Layer* 8) [Constant]_output: …`), so the value is what follows the *last* ': '. <version> is
TensorRT's version number (8601 = 8.6.1; TensorRT 10 writes 100300 for 10.3.0 and rejects another version's
header); `write_cache` keeps the header a read cache had and otherwise writes `DEFAULT_VERSION`. Reading then
writing a cache gives back the same bytes (entry order, hex digits, final newline kept).
"""

import struct
from dataclasses import dataclass, field

from ...util.errors import BuildError

DEFAULT_VERSION = "8601"
HEADER_NAMES = {"entropy2": "EntropyCalibration2", "entropy": "EntropyCalibration", "minmax": "MinMaxCalibration",
                "legacy": "LegacyCalibration", "percentile": "PercentileCalibration"}
_ALGORITHM_OF = {v: k for k, v in HEADER_NAMES.items()}


@dataclass
class CalibrationCache:
    version: str = DEFAULT_VERSION
    header_algorithm: str = "EntropyCalibration2"
    entries: list[tuple[str, str]] = field(default_factory=list)    # (tensor name, 8 hex digits), in file order
    final_newline: bool = True

    @property
    def algorithm(self) -> str | None:
        """Our algorithm name for the header's, None for a header we have no algorithm for."""
        return _ALGORITHM_OF.get(self.header_algorithm)

    def scales(self) -> dict[str, float]:
        return {name: hex_to_float(h) for name, h in self.entries}

    def amaxes(self, levels: float = 127.0) -> dict[str, float]:
        return {name: s * levels for name, s in self.scales().items()}


def float_to_hex(value: float) -> str:
    return struct.pack(">f", float(value)).hex()


def hex_to_float(text: str) -> float:
    return struct.unpack(">f", bytes.fromhex(text))[0]


def read_cache(data: bytes | str, what: str = "calibration cache") -> CalibrationCache:
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) and not isinstance(data, str) \
        else str(data)
    lines = text.split("\n")
    final_newline = text.endswith("\n")
    if final_newline:
        lines = lines[:-1]
    if not lines or not lines[0].startswith("TRT-") or lines[0].count("-") < 2:
        raise BuildError(f"{what} does not start with a TRT-<version>-<algorithm> line",
                         "give a cache written by TensorRT or tensorforge (or delete it to calibrate again)")
    _, version, algorithm = lines[0].split("-", 2)
    entries = []
    for n, line in enumerate(lines[1:], start=2):
        name, sep, value = line.rpartition(": ")
        value = value.strip()
        if not sep or len(value) != 8 or any(c not in "0123456789abcdefABCDEF" for c in value):
            raise BuildError(f"{what}, line {n}: {line[:60]!r} is not `tensor_name: <8 hex digits>`",
                             "fix or delete the cache file")
        entries.append((name, value))
    return CalibrationCache(version, algorithm, entries, final_newline)


def write_cache(cache: CalibrationCache) -> bytes:
    lines = [f"TRT-{cache.version}-{cache.header_algorithm}"] + [f"{n}: {h}" for n, h in cache.entries]
    return ("\n".join(lines) + ("\n" if cache.final_newline else "")).encode("utf-8")


def cache_from_amax(amax: dict[str, float], algorithm: str, levels: float = 127.0,
                    version: str = DEFAULT_VERSION) -> CalibrationCache:
    """A cache of scales amax / levels, in the given (network) order."""
    return CalibrationCache(version, HEADER_NAMES.get(algorithm, algorithm),
                            [(name, float_to_hex(a / levels)) for name, a in amax.items()])
