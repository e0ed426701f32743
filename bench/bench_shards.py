#!/usr/bin/python3
"""The step-time cost of gradient shards (INDUCT_OPT_GRAD_SHARDS) on one machine.

One long-lived `bench_step step` process per shard count, driven in turns (round r
times every shard count once, so load from other processes hits all alike); prints the
median wall and process-CPU milliseconds per training step over all rounds, and each
process's peak resident memory above its start (VmHWM; the activation workspace shrinks
to batch/S sequences, the shard tree adds up to ceil(log2 S) gradient copies).

usage: bench/bench_shards.py --build build [--shards 1,2,4,8] [--rounds 6] [--steps 10]
                             [-- bench_step options, e.g. --seq 64 --batch 32]
"""
import argparse
import json
import os
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--shards", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("rest", nargs="*", help="bench_step step options (after --)")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "bench_step")
    shards = [int(s) for s in a.shards.split(",")]
    procs = {s: subprocess.Popen([exe, "step", *a.rest, "--grad-shards", str(s)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for s in shards}

    def ask(p, line):
        p.stdin.write(line + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline()) if line != "quit" else None

    for s in shards:
        ask(procs[s], "warm 3")
    wall = {s: [] for s in shards}
    cpu = {s: [] for s in shards}
    for _ in range(a.rounds):
        for s in shards:
            r = ask(procs[s], f"run {a.steps}")
            wall[s] += r["ms"]
            cpu[s] += r["cpu_ms"]
    rss = {s: ask(procs[s], "rss") for s in shards}
    base = statistics.median(cpu[shards[0]])
    print(f"bench_step step {' '.join(a.rest)}: {a.rounds} rounds x {a.steps} steps")
    print("| S | median ms/step (wall) | median CPU ms/step | CPU vs S=%d | peak RSS MiB |"
          % shards[0])
    print("|---|---|---|---|---|")
    for s in shards:
        c = statistics.median(cpu[s])
        mib = (rss[s]["peak_rss_kib"] - rss[s]["base_rss_kib"]) / 1024
        print(f"| {s} | {statistics.median(wall[s]):.2f} | {c:.2f} | {c / base:.2f}x "
              f"| {mib:.1f} |")
    for s in shards:
        ask(procs[s], "quit")
        procs[s].wait()


if __name__ == "__main__":
    main()
