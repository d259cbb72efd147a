"""Prints how many rows of tensor `name` in checkpoint `path`, from row `first` on, are not all
zero: for an Adam moment, the embedding rows whose ids occurred in training (a row never seen has
no gradient, so its second moment stays exactly 0). Reads safetensors with the standard library."""
import array
import json
import struct
import sys

path, name, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "rb") as f:
    data = f.read()
n = struct.unpack("<Q", data[:8])[0]
info = json.loads(data[8:8 + n])[name]
b, e = info["data_offsets"]
values = array.array("f")
values.frombytes(data[8 + n + b:8 + n + e])
rows, width = info["shape"]
seen = sum(any(values[r * width:(r + 1) * width]) for r in range(first, rows))
print(f"{name}: {seen} of rows {first}..{rows - 1} trained")
