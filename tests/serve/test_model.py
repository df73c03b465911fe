"""EngineModel without a server: shape-grouped batching, bucket padding (the CUDA-graph path, forced on the CPU),
the batch-dimension check at warm-up. Oracle: engine.run on each request alone."""

import numpy as np
import pytest
import torch

from serve_models import build_batch_sum, build_ragged

from tensorforge.serve.model import EngineLoadError, EngineModel


@pytest.fixture(scope="module")
def ragged(tmp_path_factory):
    path = tmp_path_factory.mktemp("ragged") / "ragged.engine"
    return path, build_ragged(path)


def _requests(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(s).astype(np.float32)} for s in shapes]


@pytest.mark.parametrize("pad", [False, True])
def test_requests_grouped_by_width_and_split_back(ragged, pad):
    path, engine = ragged
    model = EngineModel(path, device="cpu")
    assert (model.max_batch_size, model.buckets) == (8, [1, 2, 4, 8])
    model.graphs = pad                       # as on CUDA: rows padded up to the next bucket
    feeds = _requests([(2, 3), (1, 5), (3, 3), (1, 5)])
    outs = model.run_batch([{k: torch.from_numpy(v) for k, v in f.items()} for f in feeds])
    for f, o in zip(feeds, outs):
        want = engine.run(f)["y"]
        assert o["y"].shape == want.shape
        np.testing.assert_array_equal(o["y"].numpy(), want)
    # two widths → two engine runs: 5 rows of width 3 and 2 of width 5 (padded: 8 and 2)
    assert sorted(model.batch_stats) == ([2, 8] if pad else [2, 5])
    assert sum(c for c, _ in model.batch_stats.values()) == 2


def test_metadata_shapes_and_checks(ragged):
    path, _ = ragged
    model = EngineModel(path, device="cpu", max_batch_size=4)
    assert model.metadata()["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, -1]}]
    assert model.check({"x": ("FP32", (4, 6))}) == 4
    with pytest.raises(Exception, match="batch of 5 rows is outside"):
        model.check({"x": ("FP32", (5, 2))})
    with pytest.raises(Exception, match=r"shape \[2x7\] is outside"):
        model.check({"x": ("FP32", (2, 7))})


def test_output_without_the_batch_dimension_fails_warm_up(tmp_path):
    path = tmp_path / "sum.engine"
    build_batch_sum(path)
    model = EngineModel(path, device="cpu")
    with pytest.raises(EngineLoadError, match="does not keep the batch dimension"):
        model.warmup()
    unbatched = EngineModel(path, device="cpu", max_batch_size=0)   # served request by request instead
    assert unbatched.max_batch_size == 0 and unbatched.warmup() == 1
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = unbatched.run_batch([{"x": torch.from_numpy(x)}])
    np.testing.assert_array_equal(out["y"].numpy(), x.sum(0))


def test_a_broken_engine_file_is_an_engine_load_error(tmp_path):
    bad = tmp_path / "bad.engine"
    bad.write_bytes(b"not an engine")
    with pytest.raises(EngineLoadError, match="cannot load engine"):
        EngineModel(bad)
