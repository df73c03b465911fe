"""trtexec's `name:value` list syntax: --shapes/--minShapes/--optShapes/--maxShapes and --loadInputs.

    --shapes=x:1x3x224x224,mask:1x128        name ':' dims, pairs separated by ','
    --shapes='input:0':1x3x224x224            a name in single quotes may contain ':' (and ',')
    --loadInputs='x':C:\\data\\x.bin           after a quoted name, everything past the ':' is the value
    --shapes=len:scalar  or  len:             a 0-d input

Entry points: `parse_shapes(spec, flag)`, `parse_named_values(spec, flag)`, `check_in_profiles(shapes, engine)`
(an inference shape fits a profile, checked before any input is allocated). As in trtexec, an unquoted
name ends at the LAST ':' of its pair, so `input:0:1x3` names `input:0`. Errors are UsageError, one line.
"""

import math

from ..util.errors import ShapeError, UsageError

Shape = tuple[int, ...]
MAX_DIM = 2**31 - 1
MAX_ELEMENTS = 2**34        # one input (64 GiB of float32), as the engine schema bounds its profiles

_EXAMPLE = {"shapes": "name:1x3x224x224[,name2:...]", "files": "name:file.bin[,name2:file2.npy]"}


def _split_pairs(spec: str, flag: str) -> list[str]:
    """Split on ',' outside single quotes; a quote must be closed."""
    items, cur, quoted = [], [], False
    for ch in spec:
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if quoted:
        raise UsageError(f"{flag}: unbalanced single quote in {spec!r}", "quote a whole name: 'input:0':1x3x224x224")
    items.append("".join(cur))
    return [i.strip() for i in items]


def _split_pair(item: str, flag: str, kind: str) -> tuple[str, str]:
    """`'quoted name':value` or `name:value` split at the last ':'."""
    if item.startswith("'"):
        end = item.find("'", 1)
        name, rest = item[1:end], item[end + 1:]
        if not rest.startswith(":"):
            raise UsageError(f"{flag}: expected ':' after the quoted name in {item!r}", f"write {_EXAMPLE[kind]}")
        value = rest[1:]
    else:
        if "'" in item:
            raise UsageError(f"{flag}: a single quote may only wrap the whole name in {item!r}",
                             "write 'input:0':value")
        name, sep, value = item.rpartition(":")
        if not sep:
            raise UsageError(f"{flag}: {item!r} has no ':' between name and value", f"write {_EXAMPLE[kind]}")
    if not name:
        raise UsageError(f"{flag}: {item!r} has an empty input name", f"write {_EXAMPLE[kind]}")
    return name, value


def parse_dims(text: str, flag: str, name: str) -> Shape:
    """'1x3x224x224' → (1, 3, 224, 224); 'scalar' or '' → () (a 0-d tensor)."""
    text = text.strip()
    if text in ("", "scalar"):
        return ()
    dims = []
    for part in text.split("x"):
        part = part.strip()
        if not part.isdigit():
            raise UsageError(f"{flag}: input {name!r} has a bad dimension {part!r} in {text!r}",
                             "dimensions are non-negative integers joined by 'x', e.g. 1x3x224x224")
        if len(part) > 10 or int(part) > MAX_DIM:
            raise UsageError(f"{flag}: input {name!r} has dimension {part[:20]} in {text!r}, above {MAX_DIM}",
                             "dimensions must fit in 32 bits")
        dims.append(int(part))
    return tuple(dims)


def _pairs(spec: str, flag: str, kind: str) -> list[tuple[str, str]]:
    if not spec.strip():
        raise UsageError(f"{flag} needs a value", f"write {flag}={_EXAMPLE[kind]}")
    out, seen = [], set()
    for item in _split_pairs(spec, flag):
        if not item:
            raise UsageError(f"{flag}: empty entry in {spec!r}", "separate entries with single commas")
        name, value = _split_pair(item, flag, kind)
        if name in seen:
            raise UsageError(f"{flag}: input {name!r} is given twice", "give each input once")
        seen.add(name)
        out.append((name, value))
    return out


def parse_shapes(spec: str, flag: str = "--shapes") -> dict[str, Shape]:
    """`x:1x3x224x224,y:1x10` → {"x": (1, 3, 224, 224), "y": (1, 10)}, in the order given."""
    out = {name: parse_dims(value, flag, name) for name, value in _pairs(spec, flag, "shapes")}
    for name, dims in out.items():
        if math.prod(dims) > MAX_ELEMENTS:
            raise UsageError(f"{flag}: input {name!r} of shape {format_shape(dims)} would hold {math.prod(dims)} "
                             f"elements (at most {MAX_ELEMENTS})", "give the shape of one real input")
    return out


def parse_named_values(spec: str, flag: str = "--loadInputs") -> dict[str, str]:
    """`x:x.bin,'in:0':/data/in.npy` → {"x": "x.bin", "in:0": "/data/in.npy"}; values must be non-empty."""
    out = {}
    for name, value in _pairs(spec, flag, "files"):
        if not value:
            raise UsageError(f"{flag}: input {name!r} has no file", f"write {flag}={_EXAMPLE['files']}")
        out[name] = value
    return out


def format_shape(shape) -> str:
    """(1, 3, 224, 224) → '1x3x224x224'; () → 'scalar' (trtexec's spelling)."""
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


def check_in_profiles(shapes: dict, engine) -> None:
    """Every given inference shape must fit the engine: rank, static dims, and some profile's [min, max].

    Runs before inputs are allocated, so `--shapes=x:99999999x99999999` is a one-line ShapeError, not 40 PB."""
    for info in engine.inputs:
        shape = shapes.get(info.name)
        if shape is None:
            continue
        want = f"the engine's input is {info.describe()}"
        if info.shape is not None and len(shape) != len(info.shape):
            raise ShapeError(f"input {info.name!r}: shape {format_shape(shape)} has rank {len(shape)}; {want}",
                             "give a shape of the engine's rank")
        for k, (d, e) in enumerate(zip(shape, info.shape or ())):
            if isinstance(e, int) and e >= 0 and d != e:
                raise ShapeError(f"input {info.name!r}: dimension {k} is {d} in {format_shape(shape)}; {want}",
                                 "static dimensions cannot change after the build")
        ranges = [p[info.name] for p in engine.profiles if info.name in p]
        if ranges and not any(len(lo) == len(shape) and all(a <= d <= b for a, d, b in zip(lo, shape, hi))
                              for lo, _, hi in ranges):
            spans = "; ".join(f"{format_shape(lo)} .. {format_shape(hi)}" for lo, _, hi in ranges)
            raise ShapeError(f"input {info.name!r}: shape {format_shape(shape)} is outside every optimization "
                             f"profile ({spans})", "choose a shape inside a profile, or rebuild with wider ones")
