"""The TF32 line of the build log (issue 17.4): present exactly for CUDA builds that allow TF32, naming the cost and
the way out; absent on the CPU and with --noTF32."""

import torch

from tensorforge.builder import BuilderConfig
from tensorforge.builder.builder import tf32_note


def test_cuda_build_with_tf32_says_so_and_how_to_turn_it_off():
    note = tf32_note(BuilderConfig(tf32=True), torch.device("cuda"))
    assert "TF32 on" in note and "--noTF32" in note and "tf32=False" in note


def test_no_line_without_tf32_or_on_the_cpu():
    assert tf32_note(BuilderConfig(tf32=False), torch.device("cuda")) is None
    assert tf32_note(BuilderConfig(tf32=True), torch.device("cpu")) is None
