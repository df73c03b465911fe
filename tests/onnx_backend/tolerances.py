"""Per-case tolerance overrides for the ONNX backend suite — the ONE reviewed place for them.

The suite's default is rtol 1e-3, atol 1e-7 (per test data.json for model tests). An entry here loosens
exactly one case and says why; there is no global loosening. Keys are test names without the _cpu suffix.
"""

TOLERANCES: dict[str, dict[str, float]] = {
    # The expected imaginary parts are exact zeros / float32 round-off of the generator's FFT; an inverse DFT
    # of values up to ~54 computed once in float64 differs by ≤ 2e-6 absolute (4e-8 of the signal's scale).
    "test_dft_inverse": {"rtol": 1e-3, "atol": 1e-5},
    "test_dft_inverse_opset19": {"rtol": 1e-3, "atol": 1e-5},
}
