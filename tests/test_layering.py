"""Guards DESIGN.md's import table: every `tensorforge.<room>` import must be an allowed arrow.

Reads every module's imports with `ast` (absolute `tensorforge.x` and relative `..x` forms) and fails on
any import of a room that the table does not allow, and on `onnx`/`onnxruntime` imports outside the rooms
allowed to use them.
"""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "tensorforge"

EVERYTHING = {"util", "ir", "plugin", "parser", "passes", "kernels", "codegen", "builder", "engine", "runtime",
              "compare", "api", "backend", "cli", "version"}
ALLOWED = {
    "util": set(),
    "ir": {"util"},
    "plugin": {"ir", "util"},
    "parser": {"ir", "plugin", "util"},
    "passes": {"ir", "util"},
    "kernels": {"ir", "plugin", "util"},
    "codegen": {"ir", "util"},
    "builder": {"util", "ir", "plugin", "parser", "passes", "kernels", "codegen", "engine"},
    "engine": {"ir", "util"},
    "runtime": {"engine", "kernels", "codegen", "plugin", "util"},
    "compare": EVERYTHING - {"cli", "compare"},
    "api": EVERYTHING - {"compare", "cli", "api", "backend"},
    "backend": {"api", "util"},
    "cli": EVERYTHING - {"cli"},
    "__main__": {"cli"},
}
ONNX_USERS = {"parser", "compare", "backend"}
ORT_USERS = {"compare"}
ALWAYS_OK = {"version"}   # the version constants module has no imports


def _room(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.name != "__init__.py" else "__init__"


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg_parts = list(path.relative_to(PKG).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - (node.level - 1)] if node.level > 1 else pkg_parts
                if node.level - 1 > len(pkg_parts):
                    continue
                mod = ".".join(["tensorforge", *base] + ([node.module] if node.module else []))
                if not node.module and not base:
                    for a in node.names:
                        yield f"tensorforge.{a.name}", node.lineno
                    continue
                if not node.module:
                    for a in node.names:
                        yield f"{mod}.{a.name}", node.lineno
                    continue
                yield mod, node.lineno
            else:
                yield node.module or "", node.lineno


def test_import_table():
    bad = []
    files = sorted(PKG.rglob("*.py"))
    assert len(files) > 20, "the package is missing"
    for path in files:
        room = _room(path)
        if room == "__init__":
            continue
        for mod, line in _imports(path):
            parts = mod.split(".")
            if parts[0] == "tensorforge" and len(parts) > 1:
                target = parts[1].removesuffix(".py")
                if target in (room,) or target in ALWAYS_OK:
                    continue
                if target not in ALLOWED.get(room, set()):
                    bad.append(f"{path.relative_to(PKG)}:{line}: {room} imports {target}")
            elif parts[0] == "onnx" and room not in ONNX_USERS:
                bad.append(f"{path.relative_to(PKG)}:{line}: {room} imports onnx")
            elif parts[0] == "onnxruntime" and room not in ORT_USERS:
                bad.append(f"{path.relative_to(PKG)}:{line}: {room} imports onnxruntime")
    assert not bad, "imports that break DESIGN.md's table:\n" + "\n".join(bad)


def test_checker_catches_a_bad_arrow(tmp_path):
    """The parser of imports itself: a relative import from runtime of builder is seen as runtime → builder."""
    fake = PKG / "runtime" / "context.py"
    found = {m for m, _ in _imports(fake)}
    assert "tensorforge.engine" in found and "tensorforge.kernels" in found
