"""The compile pool's spawned workers do not re-run the user's script (kernels/compile_pool._workers_skip_main).

A build script without an `if __name__ == "__main__":` guard, run as a file (`python build.py`, the usual way) and
as a module (`python -m`), starts the pool and waits for one job. Oracle: the script's own top-level marker,
printed by every process that executes the file: exactly once (the parent) — spawned children import a script's
`__main__` by default, which printed it once more per worker and broke the pool. Also: the parent's `__main__`
keeps its `__file__` and `__spec__` afterwards.
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r'''
import os, sys
print("TOP-LEVEL RAN", os.getpid(), flush=True)
from tensorforge.kernels import compile_pool
pool = compile_pool.CompilePool(2, sys.argv[1])
fut = pool._spawn_submit(os.getpid)                    # what CompilePool.submit calls
child = fut.result(timeout=120)
main = sys.modules["__main__"]
print("CHILD", child != os.getpid(), "FILE", getattr(main, "__file__", None) is not None,
      "SPEC", (main.__spec__ is not None) == (len(sys.argv) > 2), flush=True)
pool._executor().shutdown()
'''


def _run(tmp_path, as_module: bool, skip_main=True) -> str:
    script = SCRIPT if skip_main else SCRIPT.replace("pool = ", "compile_pool._workers_skip_main = "
                                                     "__import__('contextlib').nullcontext\npool = ", 1)
    (tmp_path / "user_build_script.py").write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    args = ["-m", "user_build_script"] if as_module else [str(tmp_path / "user_build_script.py")]
    extra = ["module"] if as_module else []
    proc = subprocess.run([sys.executable, *args, str(tmp_path / "cache"), *extra], capture_output=True, text=True,
                          env=env, timeout=300, cwd=str(tmp_path))
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("as_module", [False, True])
def test_workers_do_not_rerun_a_guardless_script(tmp_path, as_module):
    out = _run(tmp_path, as_module)
    assert out.count("TOP-LEVEL RAN") == 1, out
    assert "CHILD True FILE True SPEC True" in out, out


def test_without_the_guard_the_children_rerun_it(tmp_path):
    """The oracle can fail: spawning with the parent's __main__ visible re-runs the script in the child."""
    out = _run(tmp_path, False, skip_main=False)
    assert out.count("TOP-LEVEL RAN") >= 2, out
