"""IProgressMonitor: TensorRT's build-progress callback (`config.progress_monitor = monitor`).

    class Monitor(trt.IProgressMonitor):
        def phase_start(self, phase_name, parent_phase, num_steps): ...
        def step_complete(self, phase_name, step) -> bool: return True     # False cancels the build
        def phase_finish(self, phase_name): ...

Phases here: "Building engine" (3 steps: network → IR, graph passes + tactic choice, serialization) with the
child "Choosing tactics" (one step per layer after the graph passes). A cancelled build returns None from
build_serialized_network, as TensorRT's does. `MonitorBridge` turns the builder's per-layer callback into these.
"""

from ...util.errors import BuildError
from .strict import TrtObject

TOP, TACTICS = "Building engine", "Choosing tactics"


class IProgressMonitor(TrtObject):
    """Subclass and override; the defaults do nothing and never cancel."""

    def __init__(self):
        pass

    def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
        pass

    def step_complete(self, phase_name: str, step: int) -> bool:
        return True

    def phase_finish(self, phase_name: str) -> None:
        pass


class BuildCancelled(BuildError):
    pass


class MonitorBridge:
    """The builder's `progress` callback (`begin(n)` before the first layer, then one call per layer) → monitor."""

    def __init__(self, monitor: IProgressMonitor):
        self.monitor, self.step, self.open = monitor, 0, False

    def top_step(self, step: int) -> None:
        if not self.monitor.step_complete(TOP, step):
            raise BuildCancelled("the build was cancelled by the progress monitor", "")

    def begin(self, num_layers: int) -> None:
        self.monitor.phase_start(TACTICS, TOP, num_layers)
        self.open = True

    def __call__(self, layer, *_) -> None:
        if not self.monitor.step_complete(TACTICS, self.step):
            raise BuildCancelled("the build was cancelled by the progress monitor", "")
        self.step += 1

    def finish(self) -> None:
        if self.open:
            self.monitor.phase_finish(TACTICS)
            self.open = False
