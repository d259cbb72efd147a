"""Copies a safetensors file with NaN at element 5 of its first F32 tensor and +inf at element 5
of its second, dropping tfmc's checksum (as a file written by another tool has none)."""
import json
import math
import struct
import sys

data = open(sys.argv[1], "rb").read()
header_len = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + header_len])
header.get("__metadata__", {}).pop("tfmc_crc32", None)
body = bytearray(data[8 + header_len:])
poisoned = 0
for name in sorted(k for k in header if k != "__metadata__"):
    entry = header[name]
    begin, end = entry["data_offsets"]
    if entry["dtype"] != "F32" or end - begin < 24:
        continue
    body[begin + 20:begin + 24] = struct.pack("<f", math.nan if poisoned == 0 else math.inf)
    poisoned += 1
    if poisoned == 2:
        break
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + bytes(body))
