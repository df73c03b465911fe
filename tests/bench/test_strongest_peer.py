"""bench/peers.py: the strongest peer is the fastest one that ran (tensorforge and failed peers excluded), ratios
against it and against compile+graph, and the freezing switch restored whatever happens."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
peers = pytest.importorskip("peers")


def _st(ms):
    return {"median_ms": ms, "spread_pct": 1.0}


def test_fastest_timed_peer_wins_and_errors_and_the_engine_are_ignored():
    runners = {"tensorforge": _st(0.5), "eager": _st(4.0), "eager+graph": _st(1.0), "compile": _st(2.0),
               "compile+graph": _st(0.8), "freeze+graph": _st(0.7), "max-autotune+graph": {"error": "capture failed"}}
    assert peers.strongest(runners) == ("freeze+graph", 0.7)
    r = peers.ratios(runners)
    assert r == {"strongest_peer": "freeze+graph", "strongest_peer_ms": 0.7, "ratio_vs_strongest": round(0.5 / 0.7, 3),
                 "ratio_vs_compile_graph": round(0.5 / 0.8, 3)}


def test_ties_go_to_the_earlier_peer_and_no_peer_gives_none():
    assert peers.strongest({"freeze+graph": _st(0.7), "compile+graph": _st(0.7)}) == ("compile+graph", 0.7)
    assert peers.strongest({"tensorforge": _st(0.1), "compile": {"error": "x"}}) == (None, None)
    r = peers.ratios({"tensorforge": _st(0.1)})
    assert r["ratio_vs_strongest"] is None and r["ratio_vs_compile_graph"] is None


def test_max_autotune_counts_when_it_is_the_fastest():
    runners = {"tensorforge": _st(0.9), "compile+graph": _st(1.2), "freeze+graph": _st(1.0),
               "max-autotune+graph": _st(0.95)}
    assert peers.ratios(runners)["strongest_peer"] == "max-autotune+graph"
    assert peers.ratios(runners)["ratio_vs_strongest"] == round(0.9 / 0.95, 3)


def test_freezing_is_set_inside_and_restored_even_on_error():
    import torch._inductor.config as cfg
    before = cfg.freezing
    with peers.inductor_freezing(True):
        assert cfg.freezing is True
    assert cfg.freezing == before
    with pytest.raises(RuntimeError):
        with peers.inductor_freezing(not before):
            assert cfg.freezing == (not before)
            raise RuntimeError("compile failed")
    assert cfg.freezing == before


def test_a_failing_compiled_peer_is_reported_not_dropped_and_freezing_restored(monkeypatch):
    import torch
    import torch._inductor.config as cfg
    seen = []

    def broken_compile(model, mode=None):
        seen.append((mode, cfg.freezing))
        raise RuntimeError("inductor exploded\nsecond line")
    monkeypatch.setattr(torch, "compile", broken_compile)
    model = torch.nn.Linear(4, 4)
    out = peers.time_peers(model, (torch.randn(2, 4),), ["eager", "compile", "freeze+graph", "max-autotune+graph"],
                           lambda fn: (fn(), _st(1.0))[1], log=lambda m: None, cuda=True)
    assert out["eager"] == _st(1.0)
    assert out["compile"]["error"] == "torch.compile failed: RuntimeError: inductor exploded"
    assert "error" in out["freeze+graph"] and "error" in out["max-autotune+graph"]
    assert seen == [(None, False), (None, True), ("max-autotune-no-cudagraphs", True)]
    assert cfg.freezing is False
    # on the CPU the graph peers are not applicable: reported as such, and nothing is compiled for them
    seen.clear()
    out = peers.time_peers(model, (torch.randn(2, 4),), ["freeze+graph", "max-autotune+graph"],
                           lambda fn: _st(1.0), log=lambda m: None, cuda=False)
    assert out == {"freeze+graph": {"error": "no CUDA graphs on the CPU"},
                   "max-autotune+graph": {"error": "no CUDA graphs on the CPU"}} and seen == []
