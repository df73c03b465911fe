"""TrtObject: what every object of TensorRT's Python API does here beyond its own methods.

- Context managers: `with trt.Builder(logger) as builder, builder.create_network(0) as network, ...` (the form of
  TensorRT's samples) works; leaving the block releases nothing early (Python frees the objects).
- Strict attributes: once constructed, setting an attribute the class does not have (`config.typo_flag = 1`)
  raises AttributeError naming the closest real attribute, instead of being kept silently and doing nothing.
Names starting with '_' stay free for the implementation.
"""

import difflib


class _Sealing(type):
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_sealed", True)
        return obj


def public_names(cls) -> list[str]:
    return sorted({n for klass in cls.__mro__ for n in vars(klass) if not n.startswith("_")})


class TrtObject(metaclass=_Sealing):
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("_") or not self.__dict__.get("_sealed") or name in self.__dict__ or \
                any(name in vars(klass) for klass in type(self).__mro__):
            object.__setattr__(self, name, value)
            return
        known = public_names(type(self)) + [n for n in self.__dict__ if not n.startswith("_")]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"its attributes are: {', '.join(sorted(set(known)))}"
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r} ({hint}); TensorRT would ignore or "
                             "reject it, tensorforge refuses it so a typo never passes silently")
