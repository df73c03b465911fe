"""Timing cache: what the builder measured, kept on disk so that a rebuild re-times nothing.

Entry points: `TimingCache.load(path)`, `cache.lookup(device_key, key)`, `cache.record(...)`, `cache.save(path)`,
`layer_signature(layer, inputs, tactic_ids)`. The file is versioned JSON, readable by `tensorforge inspect`:

    {"format": "tensorforge-timing-cache", "version": 1,
     "devices": {"cuda:NVIDIA H200:sm_90 torch-2.11.0": {
         "<sha256 of the signature, 32 hex>": {"op": "Conv", "signature": {...}, "best": "conv.torch_ref",
                                               "times_ms": {"conv.torch_ref": 0.041, ...},
                                               "rejected": {"conv.x": "reason"}, "out_strides": [[...]]}}}}

A layer signature is everything that decides which tactic is fastest and nothing else: op, attributes (tensor
attributes by shape, dtype and content hash), input shapes, strides and dtypes at the profile's opt point, which
inputs are constants, and the candidate tactic ids (the config space). Saving merges with the file on disk (entries
measured in this process win) and writes atomically, so concurrent builders never leave a half-written cache.
"""

import hashlib
import json
import os
from pathlib import Path

import torch

from ..ir import Network
from ..util.errors import BuildError
from ..util.fileio import atomic_write
from ..version import __version__

FORMAT = "tensorforge-timing-cache"
VERSION = 1


def device_key(fingerprint: str) -> str:
    """Kernel speeds depend on the GPU and on the torch build (cuBLAS, cuDNN, Triton): both key the cache."""
    return f"{fingerprint} torch-{torch.__version__}"


def _network_json(net: Network) -> dict:
    """A control-flow body (If/Loop/Scan attribute) as plain JSON: its layers, tensor types and constant digests.
    Two bodies get the same signature exactly when they compute the same thing on the same types."""
    return {"inputs": list(net.inputs), "outputs": list(net.outputs),
            "constants": {k: _attr_json(v) for k, v in sorted(net.constants.items())},
            "tensors": {k: [str(t.dtype), None if t.shape is None else [str(d) for d in t.shape]]
                        for k, t in sorted(net.tensors.items())},
            "layers": [{"op": la.op, "inputs": list(la.inputs), "outputs": list(la.outputs),
                        "attrs": _attr_json(dict(sorted(la.attrs.items())))} for la in net.layers]}


def _attr_json(value):
    if isinstance(value, Network):
        return {"$network": _network_json(value)}
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""      # 0-d too
        digest = hashlib.sha256(raw).hexdigest()[:16]
        return {"$tensor": [list(t.shape), str(t.dtype).replace("torch.", ""), digest]}
    if isinstance(value, (list, tuple)):
        return [_attr_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _attr_json(v) for k, v in sorted(value.items())}
    return value


def layer_signature(layer, inputs: list[dict | None], tactic_ids: list[str]) -> tuple[str, dict]:
    """(key, signature). `inputs` holds per input {"shape", "dtype", "stride", "const"} (None when absent)."""
    sig = {"op": layer.op, "attrs": _attr_json(dict(sorted(layer.attrs.items()))), "inputs": inputs,
           "tactics": sorted(tactic_ids)}
    text = json.dumps(sig, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32], sig


class TimingCache:
    """In-memory cache: device key → signature key → entry. `hits`/`misses` count lookups of this build."""

    def __init__(self, devices: dict[str, dict[str, dict]] | None = None):
        self.devices: dict[str, dict[str, dict]] = devices or {}
        self.hits = 0
        self.misses = 0
        self.recorded = 0          # entries measured since this object was made (nothing new: no need to save)

    # ---- queries and updates ------------------------------------------------------------------
    def lookup(self, dev: str, key: str) -> dict | None:
        entry = self.devices.get(dev, {}).get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def record(self, dev: str, key: str, entry: dict) -> None:
        self.devices.setdefault(dev, {})[key] = dict(entry, tensorforge_version=__version__)
        self.recorded += 1

    def merge(self, other: "TimingCache", prefer_other: bool = False) -> int:
        """Add `other`'s entries; on a key present in both, keep ours unless `prefer_other`. Returns entries added."""
        added = 0
        for dev, entries in other.devices.items():
            mine = self.devices.setdefault(dev, {})
            for key, entry in entries.items():
                if key not in mine:
                    added += 1
                if key not in mine or prefer_other:
                    mine[key] = entry
        return added

    def __len__(self) -> int:
        return sum(len(v) for v in self.devices.values())

    # ---- files --------------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "tensorforge_version": __version__,
                "devices": {d: dict(sorted(e.items())) for d, e in sorted(self.devices.items())}}

    def serialize(self) -> bytes:
        return json.dumps(self.to_json(), indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data, what: str = "timing cache") -> "TimingCache":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BuildError(f"{what} is not a tensorforge timing cache", "point --timingCacheFile at a cache written "
                             "by tensorforge, or at a new path")
        if data.get("version") != VERSION:
            raise BuildError(f"{what} has timing-cache version {data.get('version')}; this tensorforge ({__version__}) "
                             f"reads version {VERSION}", "delete the file (it is rebuilt on the next build) or use "
                             "--noBuilderCache")
        devices = data.get("devices")
        if not isinstance(devices, dict) or not all(isinstance(v, dict) for v in devices.values()):
            raise BuildError(f"{what} is malformed (no 'devices' table)", "delete it; the next build writes a new one")
        return cls({d: dict(e) for d, e in devices.items()})

    @classmethod
    def deserialize(cls, data: bytes, what: str = "timing cache") -> "TimingCache":
        try:
            obj = json.loads(bytes(data).decode())
        except (UnicodeDecodeError, ValueError) as e:
            raise BuildError(f"{what} is not valid JSON ({e})", "delete it; the next build writes a new one") from e
        return cls.from_json(obj, what)

    @classmethod
    def load(cls, path) -> "TimingCache":
        """A missing file is an empty cache (the first build creates it); an unreadable one is an error."""
        p = Path(path)
        if not p.exists():
            return cls()
        if p.is_dir():
            raise BuildError(f"timing cache path {p} is a folder", "name a file, e.g. --timingCacheFile=cache.json")
        return cls.deserialize(p.read_bytes(), f"timing cache {p}")

    def save(self, path) -> int:
        """Merge with what is on disk now (another build may have added entries), then write atomically.

        Returns the number of entries written. Holds an advisory lock (flock) on `<file>.lock` beside the cache across
        read-merge-write, as trtexec does, so two builders saving at once both keep their new entries.
        """
        p = Path(path)
        with _Lock(p.with_name(p.name + ".lock")):
            merged = TimingCache({d: dict(e) for d, e in self.devices.items()})
            if p.exists():
                merged.merge(TimingCache.load(p))
            atomic_write(p, merged.serialize())
        return len(merged)


class _Lock:
    """flock on a lock file beside the cache (created once, left in place: removing it would race with a waiter)
    where the OS has flock; elsewhere the atomic rename alone protects the file, and two builders saving at once
    may each lose the other's new entries, never the file."""

    def __init__(self, path: Path):
        self.path, self.fd = path, None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:
            return self
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return self          # missing folder: the atomic write below reports the real problem
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            import fcntl
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
        return False
