"""trtexec's `name:value` list syntax: --shapes/--minShapes/--optShapes/--maxShapes and --loadInputs.

    --shapes=x:1x3x224x224,mask:1x128        name ':' dims, pairs separated by ','
    --shapes='input:0':1x3x224x224            a name in single quotes may contain ':' (and ',')
    --loadInputs='x':C:\\data\\x.bin           after a quoted name, everything past the ':' is the value
    --shapes=len:scalar  or  len:             a 0-d input

Entry points: `parse_shapes(spec, flag)`, `parse_named_values(spec, flag)`. As in trtexec, an unquoted
name ends at the LAST ':' of its pair, so `input:0:1x3` names `input:0`. Errors are UsageError, one line.
"""

from ..util.errors import UsageError

Shape = tuple[int, ...]

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
    return {name: parse_dims(value, flag, name) for name, value in _pairs(spec, flag, "shapes")}


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
