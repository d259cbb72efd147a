"""Checks that checkpoint `avg` holds the element-wise mean of the parameters of the other
checkpoints: reads the safetensors files directly (8-byte header length, JSON header, data) with
the standard library only. The mean is summed in double in argument order and rounded to f32."""
import array
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        b, e = info["data_offsets"]
        values = array.array("f")
        values.frombytes(body[b:e])
        out[name] = values
    return out


def to_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


*inputs, avg_path = sys.argv[1:]
cks = [read(p) for p in inputs]
avg = read(avg_path)
params = [n for n in avg if not n.startswith("adam.")]
worst = 0.0
differ = 0
for n in params:
    for j in range(len(avg[n])):
        total = 0.0
        for c in cks:
            total += c[n][j]
        worst = max(worst, abs(to_f32(total / len(cks)) - avg[n][j]))
    differ += int(any(cks[0][n] != c[n] for c in cks[1:]))
print(f"params {len(params)}, max |avg - mean| = {worst:g}")
print(f"differ between inputs: {differ}")
