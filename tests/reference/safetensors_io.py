"""Minimal safetensors reader/writer (the `safetensors` package is not available here).

Format: u64 little-endian header length N, N bytes of JSON header, then the raw data section.
Header: {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
offsets relative to the start of the data section. Data is little-endian and C-contiguous.
"""
import json
import struct

import numpy as np

# safetensors dtype name <-> numpy dtype (little-endian explicitly, the format requires it).
_DTYPES = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
}
_WRITABLE = {"F32", "I32", "I64"}


def _dtype_name(arr):
    for name, dt in _DTYPES.items():
        if arr.dtype.kind == dt.kind and arr.dtype.itemsize == dt.itemsize and name in _WRITABLE:
            return name
    raise TypeError(f"unsupported dtype {arr.dtype} (supported: float32, int32, int64)")


def save(path, tensors, metadata=None):
    """Writes `tensors` (name -> np.ndarray) sorted by name, contiguous, header padded to 8."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        dname = _dtype_name(arr)
        data = np.ascontiguousarray(arr, dtype=_DTYPES[dname]).tobytes()
        header[name] = {"dtype": dname, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Pad with spaces so the data section starts 8-byte aligned (what the reference impl does).
    hbytes += b" " * (-len(hbytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for c in chunks:
            f.write(c)


def load(path, with_metadata=False):
    """Returns name -> np.ndarray (or (tensors, metadata) if with_metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: truncated safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds file size")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        dname = info["dtype"]
        if dname not in _DTYPES:
            raise TypeError(f"{path}: tensor {name}: unsupported dtype {dname}")
        dt = _DTYPES[dname]
        begin, end = info["data_offsets"]
        shape = tuple(int(s) for s in info["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * dt.itemsize or end > len(data):
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {begin},{end} for shape {shape}")
        # Copy so the result owns native-endian, writable memory.
        out[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
    return (out, metadata) if with_metadata else out
