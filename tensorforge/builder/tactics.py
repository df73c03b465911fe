"""Tactic choice per layer.

For each layer, the kernels registry lists the applicable (tactic, config) pairs with reasons for the rest.
With one candidate, or when timing is off (CPU builds, optimisation level 0), the highest-priority
candidate wins. Timing on the target GPU and the persistent timing cache plug in here.
"""

import torch

from ..ir import Network
from ..kernels import candidates
from ..util.errors import BuildError
from ..util.log import get_logger
from .config import BuilderConfig


def choose_tactics(net: Network, device: torch.device, config: BuilderConfig, progress=None) -> None:
    log = get_logger()
    for layer in net.layers:
        found, reasons = candidates(layer, device)
        if not found:
            why = "; ".join(f"{k}: {v}" for k, v in reasons.items()) or "no tactic is registered"
            raise BuildError(f"layer {layer.name!r} ({layer.op}) has no tactic for {device.type}: {why}",
                             "build for another device or write a plugin for this op")
        tac, cfg = found[0]
        layer.tactic = tac.id(cfg)
        for name, why in reasons.items():
            log.verbose(f"layer {layer.name}: tactic {name} rejected: {why}")
        if progress is not None:
            progress(layer)
