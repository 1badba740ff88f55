"""Peer of bench/relative_bias_bench.cc: the PyTorch code HF transformers'
T5 runs for its relative position bias (models/t5/modeling_t5.py,
T5Attention.compute_bias and _relative_position_bucket), written out here
from that published formula:

    relative_position = memory_position - context_position       # [q, k]
    bidirectional: num_buckets //= 2;
                   buckets += (relative_position > 0) * num_buckets;
                   relative_position = |relative_position|
    causal:        relative_position = -min(relative_position, 0)
    max_exact = num_buckets // 2
    large = max_exact + (log(rp.float() / max_exact)
                         / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(long)
    large = min(large, num_buckets - 1)
    buckets += where(rp < max_exact, rp, large)
    values = embedding(buckets)                   # [q, k, H]
    values = values.permute([2, 0, 1])            # [H, q, k], a view

Timed: HF's compute_bias as it returns (a permuted view of the [q, k, H]
embedding output), and followed by .contiguous() (the [H, q, k] tensor
Phasor returns). Same table as the C++ side: table[b, h] = value(b·32 + h).

--check DIR compares bucket ids (bidirectional and causal) and the float32
bias with Phasor's dump (relative_bias_bench --phasor_dump=DIR): exact.
"""
import math
import sys

import numpy as np
import torch

import common

HEADS, BUCKETS, LENGTH, MAX_DISTANCE = 32, 32, 4096, 128


def relative_position_bucket(relative_position, bidirectional, num_buckets,
                             max_distance):
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position,
                                       torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, relative_position, large)


def compute_bias(embedding, length, bidirectional=True):
    context_position = torch.arange(length, dtype=torch.long)[:, None]
    memory_position = torch.arange(length, dtype=torch.long)[None, :]
    relative_position = memory_position - context_position
    buckets = relative_position_bucket(relative_position, bidirectional,
                                       BUCKETS, MAX_DISTANCE)
    values = embedding(buckets)              # [q, k, H]
    return values.permute([2, 0, 1]), buckets


def main():
    args = common.parser(__doc__).parse_args()
    embedding = torch.nn.Embedding(BUCKETS, HEADS)
    with torch.no_grad():
        embedding.weight.copy_(torch.from_numpy(
            common.input_values(BUCKETS * HEADS).reshape(BUCKETS, HEADS)))
    if args.check:
        ok = True
        with torch.no_grad():
            for bidirectional, name in ((True, "relative_ids_bidirectional.i32"),
                                        (False, "relative_ids_causal.i32")):
                _, buckets = compute_bias(embedding, LENGTH, bidirectional)
                ours = common.load_raw(args.check, name, "<i4", (LENGTH, LENGTH))
                same = bool(np.array_equal(ours, buckets.numpy()))
                print(f"check {name:55s} {'identical' if same else 'MISMATCH'}",
                      file=sys.stderr)
                ok &= same
            bias, _ = compute_bias(embedding, LENGTH)
            ours = common.load_raw(args.check, "relative_bias_f32.bin", "<f4",
                                   (HEADS, LENGTH, LENGTH))
            same = bool(np.array_equal(ours, bias.contiguous().numpy()))
            print(f"check {'bias [32,4096,4096] float32':55s} "
                  f"{'identical' if same else 'MISMATCH'}", file=sys.stderr)
            ok &= same
        sys.exit(0 if ok else 1)
    results = common.Results(args)
    for threads in common.thread_counts(args):
        torch.set_num_threads(threads)
        with torch.no_grad():
            results.add(f"hf_compute_bias_view/32x4096x4096/threads:{threads}",
                        lambda: compute_bias(embedding, LENGTH))
            results.add(f"hf_compute_bias_contiguous/32x4096x4096/threads:{threads}",
                        lambda: compute_bias(embedding, LENGTH)[0].contiguous())
    results.write("relative_bias")


if __name__ == "__main__":
    main()
