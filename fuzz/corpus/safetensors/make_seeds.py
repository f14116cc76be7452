#!/usr/bin/env python3
"""Regenerates the seed corpus for fuzz/fuzz_safetensors.cc: a few tiny valid
safetensors images and a few near-misses, written next to this script."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def image(header, data=b"", pad=True):
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    raw = text.encode()
    if pad:
        raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


SEEDS = {
    "valid_single_f32": image({"w": entry("F32", [2, 2], 0, 16)}, bytes(range(16))),
    "valid_metadata_mixed": image(
        {"__metadata__": {"format": "pt"},
         "a": entry("BF16", [3], 0, 6),
         "b": entry("U32", [1, 2], 6, 14),
         "c": entry("BOOL", [2], 14, 16),
         "d": entry("F8_E4M3", [0, 4], 16, 16)},
        bytes(range(16))),
    "valid_scalar_i64": image({"s": entry("I64", [], 0, 8)}, b"\x01" * 8),
    "valid_empty": image({}),
    "bad_overlap": image({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, bytes(12)),
    "bad_shape_bytes": image({"a": entry("F16", [3], 0, 4)}, bytes(4)),
    "bad_dtype": image({"a": entry("F4", [2], 0, 1)}, bytes(1)),
    "bad_past_end": image({"a": entry("U8", [8], 0, 8)}, bytes(4)),
    "bad_header_len": struct.pack("<Q", 1 << 40) + b"{}",
    "bad_json": image('{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]', bytes(4)),
}

for name, blob in SEEDS.items():
    with open(os.path.join(HERE, name + ".safetensors"), "wb") as f:
        f.write(blob)
