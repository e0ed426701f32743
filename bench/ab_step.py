"""Same-run A/B of two libinduct builds' training step (not a test).

    /usr/bin/python3 bench/ab_step.py OLD_BUILD NEW_BUILD CONFIG THREADS [ROUNDS [STEPS]]
    /usr/bin/python3 bench/ab_step.py --cache OLD_BUILD NEW_BUILD CONFIG THREADS [ROUNDS [N]]

Starts build/bench/bench_step of both builds on the same configuration of bench.py
(a ... g; NAME:key=value,... changes fields, e.g. c:mlp=1024,layernorm=1), warms both
up, then alternates ROUNDS rounds of STEPS timed steps each (e1 runs 8x and b 10x more
steps per round), so that load from other processes hits both alike; prints the median
and minimum ms per step of each and the ratio new / old. Use it to check that a change
made no configuration slower (bench/README.md).

With --cache the rounds are bench_step's `cache N` command instead (N rounds of a plain
forward, a cache of every hook point but attn.hook_result, and one of every point; N
defaults to 5): prints each build's median plain forward and the median cache / plain
forward (both caches), and the same from the minima (docs/hooks.md, "Cost").
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (CONFIGS, the peer protocol)


def config_of(spec):
    """bench.CONFIGS[NAME], with NAME:key=value,... overriding fields (integers)."""
    name, _, over = spec.partition(":")
    c = dict(bench.CONFIGS[name])
    for kv in filter(None, over.split(",")):
        k, _, v = kv.partition("=")
        if k not in c:
            sys.exit("ab_step: %s has no field %r" % (name, k))
        c[k] = type(c[k])(v)
    return c


def cache_rounds(peers, rounds, per):
    keys = ("plain", "cache", "cache_result")
    ms = [{k: [] for k in keys} for _ in peers]
    for p in peers:
        p.ask("cache 2")
    for _ in range(rounds):
        for i, p in enumerate(peers):
            r = p.ask("cache %d" % per)
            for k in keys:
                ms[i][k] += r[k]
    return ms


def main():
    args = sys.argv[1:]
    cache = "--cache" in args
    if cache:
        args.remove("--cache")
    if len(args) < 4:
        sys.exit(__doc__)
    old, new, cfg, threads = args[:4]
    rounds = int(args[4]) if len(args) > 4 else 6
    per = int(args[5]) if len(args) > 5 else 5
    name = cfg.partition(":")[0]
    if not cache:
        per *= {"e1": 8, "a": 10, "b": 10}.get(name, 1)
    c = config_of(cfg)
    peers = [bench.lib_peer(b, c, int(threads)) for b in (old, new)]
    for p in peers:
        p.ask("warm 3")
    if cache:
        ms = cache_rounds(peers, rounds, per)
        for p in peers:
            p.close()
        for label, m in zip(("old", "new"), ms):
            med = {k: statistics.median(v) for k, v in m.items()}
            low = {k: min(v) for k, v in m.items()}
            print("%s %sT %s: plain %.2f ms, cache %.2fx, with hook_result %.2fx "
                  "(minima: plain %.2f ms, %.2fx, %.2fx)" % (
                      cfg, threads, label, med["plain"], med["cache"] / med["plain"],
                      med["cache_result"] / med["plain"], low["plain"],
                      low["cache"] / low["plain"], low["cache_result"] / low["plain"]))
        return
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
