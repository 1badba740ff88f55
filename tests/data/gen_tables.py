#!/usr/bin/python3
"""Writes the small array files learned_test reads.

Run with Debian's interpreter: /usr/bin/python3 tests/data/gen_tables.py
table_5x4_f32.npy / table_5x4_f64.npy: numpy.save of T[r, c] = r + c / 10.
table.safetensors: two tensors, written per the safetensors spec
(8-byte little-endian header length, JSON header, raw buffer):
  "wpe" F32 [5, 4] = T, "other" F64 [2] = [1.5, -2.5].
"""
import json
import os
import struct

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
table = np.array([[r + c / 10 for c in range(4)] for r in range(5)])
np.save(os.path.join(here, "table_5x4_f32.npy"), table.astype(np.float32))
np.save(os.path.join(here, "table_5x4_f64.npy"), table.astype(np.float64))

wpe = table.astype("<f4").tobytes()
other = np.array([1.5, -2.5], dtype="<f8").tobytes()
header = {
    "__metadata__": {"format": "pt"},
    "wpe": {"dtype": "F32", "shape": [5, 4], "data_offsets": [0, len(wpe)]},
    "other": {"dtype": "F64", "shape": [2],
              "data_offsets": [len(wpe), len(wpe) + len(other)]},
}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(os.path.join(here, "table.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + wpe + other)
