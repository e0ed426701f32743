"""Same-run A/B of two libinduct builds' training step (not a test).

    /usr/bin/python3 bench/ab_step.py OLD_BUILD NEW_BUILD CONFIG THREADS [ROUNDS [STEPS]]

Starts build/bench/bench_step of both builds on the same configuration of bench.py
(a ... f), warms both up, then alternates ROUNDS rounds of STEPS timed steps each (e1 runs
8x and b 10x more steps per round), so that load from other processes hits both alike;
prints the median and minimum ms per step of each and the ratio new / old. Use it to check
that a change made no configuration slower (bench/README.md).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (CONFIGS, the peer protocol)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    old, new, cfg, threads = sys.argv[1:5]
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 6
    per = int(sys.argv[6]) if len(sys.argv) > 6 else 5
    per *= {"e1": 8, "a": 10, "b": 10}.get(cfg, 1)
    c = bench.CONFIGS[cfg]
    peers = [bench.lib_peer(b, c, int(threads)) for b in (old, new)]
    for p in peers:
        p.ask("warm 3")
    ms = [[], []]
    for _ in range(rounds):
        for i, p in enumerate(peers):
            ms[i] += p.ask("run %d" % per)["ms"]
    for p in peers:
        p.close()
    a, b = statistics.median(ms[0]), statistics.median(ms[1])
    print("%s %sT: old %.2f ms (min %.2f), new %.2f ms (min %.2f), new/old %.3f" % (
        cfg, threads, a, min(ms[0]), b, min(ms[1]), b / a))


if __name__ == "__main__":
    main()
