"""Writes a safetensors batch of I32 tensors, every id 5: write_batch.py out.st src=2x3 tgt_in=3x2 ...
(a shape of one number is 1-D), for tests of how tfmc run checks --inputs."""
import json
import struct
import sys

out, specs = sys.argv[1], sys.argv[2:]
header, offset, data = {}, 0, b""
for spec in specs:
    name, dims = spec.split("=")
    shape = [int(d) for d in dims.split("x")]
    count = 1
    for d in shape:
        count *= d
    header[name] = {"dtype": "I32", "shape": shape, "data_offsets": [offset, offset + 4 * count]}
    offset += 4 * count
    data += struct.pack(f"<{count}i", *([5] * count))
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
