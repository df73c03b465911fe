"""Guards the rooms' import table (DESIGN.md, restated in docs/architecture.md): every import of a room must be
an allowed arrow.

Every import form is read with `ast`: `import tensorforge.x`, `import tensorforge`, `from tensorforge import x`,
`from tensorforge.x import y`, relative `from . import x` / `from .. import x` / `from ..x import y`, and the
dynamic `importlib.import_module("tensorforge.x")` / `import_module(".x", __package__)` / `__import__(...)` with a
literal (or `f"{__package__}..."`) name. A dynamic import whose name cannot be read is itself a violation unless
listed in DYNAMIC_OK with its reason. The package's own top-level files belong to rooms (TOP_LEVEL_FILES):
`__init__.py` is the public face (api), `__main__.py` is cli, `version.py` is a leaf like util.
The negative tests plant bad imports (in source text and in a copy of the package) and assert they are caught.
"""

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "tensorforge"

# DESIGN.md's table, row by row (room → rooms it may import); `serve` is the Ray Serve room added beside it
# (docs/architecture.md): api, engine, runtime, util, and nothing imports it but cli.
ORDER = ["util", "ir", "plugin", "parser", "passes", "kernels", "codegen", "engine", "builder", "runtime",
         "compare", "api", "backend", "serve", "frontend_torch", "cli"]
_ABOVE = {r: set(ORDER[:i]) for i, r in enumerate(ORDER)}
ALLOWED = {
    "util": set(),
    "ir": {"util"},
    "plugin": {"ir", "util"},
    "parser": {"ir", "plugin", "util"},
    "passes": {"ir", "util"},
    "kernels": {"ir", "plugin", "util"},
    "codegen": {"ir", "util"},
    "engine": {"ir", "util"},
    "builder": _ABOVE["builder"],                       # "all of the above" (engine included: see DESIGN_MD_IMPLIED)
    "runtime": {"engine", "kernels", "codegen", "plugin", "util"},
    "compare": _ABOVE["compare"],                       # "anything above"
    "api": _ABOVE["api"] - {"compare"},                 # "anything above but compare"
    "backend": {"api"},
    "serve": {"api", "engine", "runtime", "util"},
    "frontend_torch": {"ir", "builder", "api", "engine", "runtime", "util"},
    "cli": set(ORDER) - {"cli"},                        # "anything"
}
ONLY_IMPORTED_BY = {"cli": set(), "serve": {"cli"}, "frontend_torch": {"cli"}}     # "nothing imports it (but …)"
NOT_IN_DESIGN_MD = {"serve", "frontend_torch"}                            # rows docs/architecture.md has and DESIGN.md does not yet
# DESIGN.md lists engine/ after builder/, so its builder row's "all of the above" leaves engine out literally,
# while the same row's job is "Builder.build() → Engine"; docs/architecture.md lists engine first.
DESIGN_MD_IMPLIED = {"builder": {"engine"}}
TOP_LEVEL_FILES = {"__init__.py": "api", "__main__.py": "cli", "version.py": "util"}
ONNX_USERS = {"parser", "compare", "backend"}
ORT_USERS = {"compare"}
DYNAMIC_OK = {
    "plugin/loader.py": "imports the user's plugin modules by the names they configure, never a tensorforge room",
    "cli/main.py": "imports the chosen subcommand's module; cli may import anything",
    "kernels/compile_cache.py": "a compile worker imports the module defining the Triton kernel it compiles for the parent",
    "kernels/compile_pool.py": "a compile worker imports the module defining the Triton kernel it compiles for the parent",
    "__init__.py": "resolves `tfg.<name>` on first use (PEP 562): the names it re-exports and the room named",
}


def room_of(rel: str) -> str:
    """'runtime/context.py' → 'runtime'; top-level files by TOP_LEVEL_FILES ('backend.py' → 'backend')."""
    parts = rel.split("/")
    if len(parts) > 1:
        return parts[0]
    return TOP_LEVEL_FILES.get(parts[0], parts[0].removesuffix(".py"))


def _package_of(rel: str) -> list[str]:
    """The dotted package a file's relative imports start from ('runtime/context.py' → tensorforge.runtime)."""
    return ["tensorforge", *rel.split("/")[:-1]]


def _resolve_relative(rel: str, level: int, module: str | None) -> str | None:
    base = _package_of(rel)
    if level - 1 >= len(base):
        return None                                      # climbs out of the package
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _dynamic_name(call: ast.Call, rel: str) -> str | None:
    """The module a literal import_module/__import__ call names, or None when it cannot be read."""
    if not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        name = arg.value
    elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.FormattedValue) \
            and isinstance(arg.values[0].value, ast.Name) and arg.values[0].value.id == "__package__" \
            and len(arg.values) > 1 and isinstance(arg.values[1], ast.Constant):
        name = ".".join(_package_of(rel)) + arg.values[1].value      # f"{__package__}.library.{x}"
    else:
        return None
    if name.startswith("."):
        level = len(name) - len(name.lstrip("."))
        return _resolve_relative(rel, level, name.lstrip(".") or None)
    return name


def _is_dynamic_import(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id in ("__import__", "import_module")) or \
        (isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__"))


def imported_modules(source: str, rel: str):
    """(dotted module, line) for every import in `source` (file `rel` inside tensorforge/); an unreadable
    dynamic import yields (None, line)."""
    for node in ast.walk(ast.parse(source, filename=rel)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve_relative(rel, node.level, node.module) if node.level else node.module
            if mod is None:
                continue
            if mod == "tensorforge" or mod == ".".join(_package_of(rel)):
                for a in node.names:                     # `from tensorforge import builder`, `from . import x`
                    yield f"{mod}.{a.name}", node.lineno
            else:
                yield mod, node.lineno
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            yield _dynamic_name(node, rel), node.lineno


def _target_room(mod: str, rooms: set[str]) -> str:
    """The room a dotted tensorforge module belongs to; `tensorforge` itself (or a name that is no room,
    `from tensorforge import build`) is the package __init__, i.e. the api face."""
    parts = mod.split(".")
    if len(parts) == 1 or parts[1] not in rooms | {"__init__", "__main__", "version"}:
        return TOP_LEVEL_FILES["__init__.py"]
    return room_of(parts[1] + ".py") if parts[1] in ("__init__", "__main__", "version") else parts[1]


def violations(source: str, rel: str, rooms: set[str] | None = None) -> list[str]:
    """Every import in `source` (as file `rel` of tensorforge/) that breaks the table, one line each."""
    rooms = set(ORDER) if rooms is None else rooms
    room, bad = room_of(rel), []
    for mod, line in imported_modules(source, rel):
        where = f"{rel}:{line}: {room}"
        if mod is None:
            if rel not in DYNAMIC_OK:
                bad.append(f"{where} has a dynamic import whose module cannot be read (list it in DYNAMIC_OK)")
            continue
        top = mod.split(".")[0]
        if top == "tensorforge":
            target = _target_room(mod, rooms)
            if target == room:
                continue
            if target not in ALLOWED.get(room, set()):
                bad.append(f"{where} imports {target} ({mod})")
            elif target in ONLY_IMPORTED_BY and room not in ONLY_IMPORTED_BY[target]:
                bad.append(f"{where} imports {target}, which only {ONLY_IMPORTED_BY[target] or 'nothing'} may import")
        elif top == "onnx" and room not in ONNX_USERS:
            bad.append(f"{where} imports onnx")
        elif top == "onnxruntime" and room not in ORT_USERS:
            bad.append(f"{where} imports onnxruntime")
    return bad


def check_tree(pkg: Path) -> list[str]:
    files = sorted(pkg.rglob("*.py"))
    rooms = {p.name.removesuffix(".py") for p in pkg.iterdir() if p.name != "__pycache__"}
    bad = []
    for path in files:
        rel = path.relative_to(pkg).as_posix()
        bad += violations(path.read_text(), rel, rooms)
    return bad


def test_import_table():
    files = sorted(PKG.rglob("*.py"))
    assert len(files) > 20, "the package is missing"
    unknown = {room_of(p.relative_to(PKG).as_posix()) for p in files} - set(ALLOWED)
    assert not unknown, f"rooms missing from the table: {sorted(unknown)} (add them to DESIGN.md and here)"
    bad = check_tree(PKG)
    assert not bad, "imports that break DESIGN.md's table:\n" + "\n".join(bad)


# --- negative tests: planted imports are caught -------------------------------------------------------------

@pytest.mark.parametrize("planted", [
    "from tensorforge import builder",
    "from tensorforge.builder.config import BuilderConfig",
    "import tensorforge.parser",
    "import tensorforge.passes.pipeline as p",
    "import tensorforge",
    "from tensorforge import build",
    "from .. import builder",
    "from ..parser import parse_model",
    "from ..builder.config import BuilderConfig",
    "import importlib\nimportlib.import_module('tensorforge.parser')",
    "from importlib import import_module\nimport_module('..passes', __package__)",
    "__import__('tensorforge.builder')",
    "def f():\n    from ..api import build\n    return build",
    "import onnx",
    "from onnxruntime import InferenceSession",
])
def test_planted_bad_import_in_runtime_is_caught(planted):
    found = violations(planted + "\n", "runtime/planted.py")
    assert len(found) == 1 and found[0].startswith("runtime/planted.py:"), found


@pytest.mark.parametrize("rel,planted,target", [
    ("__init__.py", "from .cli.main import main", "cli"),
    ("__init__.py", "from . import compare", "compare"),
    ("api/planted.py", "from ..serve import app", "serve"),
    ("engine/planted.py", "from tensorforge import runtime", "runtime"),
    ("version.py", "from .ir import Network", "ir"),
    ("kernels/planted.py", "from . import x\nfrom .. import codegen", "codegen"),
    ("backend.py", "from .builder import build_engine", "builder"),
    ("compare/planted.py", "from ..api.high_level import Engine", "api"),
])
def test_other_planted_arrows_are_caught(rel, planted, target):
    found = violations(planted + "\n", rel)
    assert len(found) == 1 and f"imports {target}" in found[0], found


def test_unreadable_dynamic_import_is_caught():
    found = violations("import importlib\nname = 'x'\nimportlib.import_module(name)\n", "runtime/planted.py")
    assert len(found) == 1 and "cannot be read" in found[0]


@pytest.mark.parametrize("rel,ok", [
    ("runtime/planted.py", "from ..engine import Engine\nfrom . import context\nfrom .context import x\n"
                           "import tensorforge.kernels.registry\nimportlib.import_module('tensorforge.codegen')"),
    ("builder/planted.py", "from tensorforge import parser, passes\nfrom ..version import __version__"),
    ("cli/planted.py", "from ..serve import app\nfrom .. import compare"),
    ("serve/planted.py", "from ..api import load\nfrom ..runtime import ExecutionContext"),
    ("__init__.py", "from .api import build\nfrom .util.errors import TensorforgeError\nfrom .version import v"),
])
def test_allowed_imports_pass(rel, ok):
    assert violations(ok + "\n", rel) == []


def test_planted_imports_in_a_copy_of_the_package_are_caught(tmp_path):
    """The whole checker on a copy of the real package with two bad lines added to runtime/: exactly those two."""
    copy = tmp_path / "tensorforge"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    victim = copy / "runtime" / "context.py"
    n = len(victim.read_text().splitlines())
    victim.write_text(victim.read_text() + "\nfrom tensorforge import builder\nimport importlib\n"
                      "importlib.import_module(\"tensorforge.parser\")\n")
    bad = check_tree(copy)
    assert bad == [f"runtime/context.py:{n + 2}: runtime imports builder (tensorforge.builder)",
                   f"runtime/context.py:{n + 4}: runtime imports parser (tensorforge.parser)"], bad


# --- the table is the documents' table ----------------------------------------------------------------------

def parse_rooms_table(markdown: str) -> dict[str, set[str]]:
    """room → allowed rooms from a `| room | one job | may import |` markdown table (DESIGN.md's wording:
    "nothing of ours", "all of the above", "anything above [but X]", "anything", "a, b — never c")."""
    rows = []
    for line in markdown.splitlines():
        m = re.match(r"^\|\s*`([a-z_]+)(?:/|\.py)`\s*\|.*\|\s*([^|]+?)\s*\|\s*$", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    names = [r for r, _ in rows]
    out = {}
    for i, (room, text) in enumerate(rows):
        text = text.split(";")[0].split("—")[0].strip().rstrip(".")
        above = set(names[:i])
        if text == "nothing of ours":
            allowed = set()
        elif text in ("all of the above", "anything above"):
            allowed = above
        elif text.startswith("anything above but "):
            allowed = above - {t.strip() for t in text.removeprefix("anything above but ").split(",")}
        elif text == "anything":
            allowed = set(names) - {room}
        else:
            allowed = {t.strip() for t in text.split(",")}
        out[room] = allowed
    return out


def test_table_is_docs_architecture_table():
    assert parse_rooms_table((ROOT / "docs" / "architecture.md").read_text()) == ALLOWED


def test_table_is_design_md_table():
    design = ROOT.parent / "shared" / "DESIGN.md"
    if not design.exists():
        pytest.skip("DESIGN.md (the steering document) lies outside this checkout here")
    parsed = parse_rooms_table(design.read_text())
    assert parsed, "no rooms table found in DESIGN.md"
    for room, extra in DESIGN_MD_IMPLIED.items():
        parsed[room] |= extra
    missing = NOT_IN_DESIGN_MD - set(parsed)           # once DESIGN.md has the row, it is compared like the rest
    want = {room: allowed - missing for room, allowed in ALLOWED.items() if room not in missing}
    assert parsed == want


def test_table_parser_reads_the_wording():
    md = ("| `a/` | x | nothing of ours |\n| `b/` | x | a |\n| `c.py` | x | anything above but b |\n"
          "| `d/` | x | a, b — never c |\n| `e/` | x | anything; nothing imports it |\n")
    assert parse_rooms_table(md) == {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"a", "b"}, "e": {"a", "b", "c", "d"}}
