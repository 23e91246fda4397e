#!/usr/bin/env python3
"""Cost model of data-parallel training: ring all-reduce time and scaling efficiency.

For a step that computes for C ms per rank (fixed batch per rank: weak scaling) and all-reduces
B bytes of gradients, a ring all-reduce over N ranks takes
    A(N) = 2(N-1)/N * B / bandwidth + 2(N-1) * latency
and the scaling efficiency (N ranks' throughput over N times one rank's) is
    without overlap:  C / (C + A(N))             (the all-reduce starts after backward)
    with overlap:     C / max(C + tail, C/3 + A(N))
The buckets' all-reduces overlap backward (about 2/3 of C), so they cannot start before the forward
(C/3) is done, and the last bucket's, tail = A(N) * last_bucket_fraction, can only start once
backward has ended. last_bucket_fraction is the share of the gradient bytes in the bucket that
becomes ready last: for the 1024³ step, Linear's weight and bias (99.9%), so overlap cannot help
it; with the default 25 MiB buckets, any model under 25 MiB is one bucket (fraction 1).

Prints a Markdown table. Example (the numbers of bench/README.md's section):
    python3 bench/dist_cost_model.py --compute-ms 32 --grad-bytes 4206592 --last-bucket-fraction 0.999
"""

import argparse

NETWORKS = [  # (name, bits per second, latency per message in seconds)
    ("1 Gbit/s", 1e9, 50e-6),
    ("10 Gbit/s", 10e9, 10e-6),
    ("100 Gbit/s", 100e9, 2e-6),
]
RANKS = [2, 4, 16, 64, 256]


def ring_allreduce_ms(ranks, grad_bytes, bits_per_second, latency_s):
    bandwidth = bits_per_second / 8
    return 1e3 * (2 * (ranks - 1) / ranks * grad_bytes / bandwidth + 2 * (ranks - 1) * latency_s)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compute-ms", type=float, required=True, help="forward + backward + step per rank, ms")
    parser.add_argument("--grad-bytes", type=int, required=True, help="gradient bytes all-reduced per step")
    parser.add_argument("--last-bucket-fraction", type=float, default=1.0,
                        help="share of the gradient bytes in the bucket ready last (default 1: no overlap possible)")
    args = parser.parse_args()
    print(f"compute {args.compute_ms:g} ms per step per rank, {args.grad_bytes / 1e6:.2f} MB of gradients, "
          f"last bucket {100 * args.last_bucket_fraction:.1f}% of them\n")
    print("| network (latency) | N | all-reduce ms | efficiency, no overlap | efficiency, overlap |")
    print("|---|---|---|---|---|")
    for name, bits, latency in NETWORKS:
        for ranks in RANKS:
            allreduce = ring_allreduce_ms(ranks, args.grad_bytes, bits, latency)
            plain = args.compute_ms / (args.compute_ms + allreduce)
            tail = allreduce * args.last_bucket_fraction
            overlapped = args.compute_ms / max(args.compute_ms + tail, args.compute_ms / 3 + allreduce)
            print(f"| {name} ({latency * 1e6:g} µs) | {ranks} | {allreduce:.3g} | {100 * plain:.0f}% | {100 * overlapped:.0f}% |")


if __name__ == "__main__":
    main()
