"""TensorRT's calibration cache text format: read a TensorRT-written cache, write one, byte-for-byte round trips."""

import pytest

from tensorforge.builder.calibration import cache_from_amax, read_cache, write_cache
from tensorforge.util.errors import BuildError

# as TensorRT 7.2 wrote it for MNIST (a public sample's cache, names with spaces and ': ' included)
TRT_CACHE = (b"TRT-7202-EntropyCalibration2\n"
             b"data: 3c008912\n"
             b"conv1: 3c60dd38\n"
             b"pool1: 3c60dd38\n"
             b"(Unnamed Layer* 4) [Fully Connected]_output: 3d65992f\n"
             b"prob: 3c083ffd\n")


def _ieee(hex8: str) -> float:
    """IEEE-754 binary32 by hand: sign, 8 exponent bits (bias 127), 23 mantissa bits."""
    bits = int(hex8, 16)
    sign = -1.0 if bits >> 31 else 1.0
    exp, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    return sign * (1 + mant / 2**23) * 2.0 ** (exp - 127)


def test_reads_a_tensorrt_cache():
    c = read_cache(TRT_CACHE)
    assert (c.version, c.header_algorithm, c.algorithm) == ("7202", "EntropyCalibration2", "entropy2")
    names = [n for n, _ in c.entries]
    assert names == ["data", "conv1", "pool1", "(Unnamed Layer* 4) [Fully Connected]_output", "prob"]
    scales = c.scales()
    assert scales["data"] == pytest.approx(_ieee("3c008912"), rel=1e-7)
    assert scales["data"] == pytest.approx(1 / 127.47, rel=1e-3)         # an input in about [-1, 1]
    assert c.amaxes()["conv1"] == pytest.approx(127 * _ieee("3c60dd38"), rel=1e-7)


def test_round_trip_is_byte_for_byte():
    assert write_cache(read_cache(TRT_CACHE)) == TRT_CACHE
    no_newline = TRT_CACHE.rstrip(b"\n")
    assert write_cache(read_cache(no_newline)) == no_newline


def test_written_cache_has_tensorrts_header_and_big_endian_hex_scales():
    data = write_cache(cache_from_amax({"x": 1.0, "y": 2.0}, "minmax"))
    # 1/127 = 0x3c010204 (the familiar scale of a [-1, 1] tensor); 2/127 one exponent step up: 0x3c810204
    assert data == b"TRT-8601-MinMaxCalibration\nx: 3c010204\ny: 3c810204\n"
    assert _ieee("3c010204") == pytest.approx(1 / 127, rel=1e-7)
    assert write_cache(read_cache(data)) == data


@pytest.mark.parametrize("bad", [b"hello\nx: 3c010204\n", b"TRT-8601-EntropyCalibration2\nx 3c010204\n",
                                 b"TRT-8601-EntropyCalibration2\nx: 3c01020\n"])
def test_malformed_cache_is_one_line_error(bad):
    with pytest.raises(BuildError) as e:
        read_cache(bad)
    assert "\n" not in str(e.value)
