/**
 * In-process A/B of the caching hit path (issue #18): this working tree's
 * `@allot/caching` and `@allot/core` against the same packages at a git ref
 * (default `main`), both loaded in one process. Four pairs (allocate + free
 * from a warm cache): `allocateId` / `freeById` at 64 KiB and on a seeded
 * log-uniform cycle of 1 B to 8 MiB, and the handle API on both; and the
 * handle API at 4 KiB with 100 and 10,000 frees pending on fences of another
 * stream (each free its own fence, none complete: `run.ts`'s pending-frees
 * scenario). Each round
 * runs every pair once per side, the side that goes first alternating, with a
 * collection before each run; the figure is the median over rounds of the
 * per-round ratio ref / this (greater is better for this tree), its middle
 * half (the 25th to 75th percentile of the rounds) and its range,
 * the fastest round of each side and the JS heap per operation.
 *
 * A shared machine swings single rounds by 2x either way; ratios taken in
 * one round see the same load, which is why this compares in one process
 * rather than across runs of `run.ts`. Check the harness with `--ref=HEAD` on
 * a clean tree: the medians should come out near 1.
 *
 * The median of one process moves by about ±10 % between processes for
 * the same code (the JIT's choices differ), so repeat the run and report the
 * range of the medians.
 *
 * Times are CPU time of the process by default (`--clock=wall` for
 * wall-clock time): on a loaded machine, time spent descheduled is noise.
 *
 * Run: `deno run -A --v8-flags=--expose-gc packages/caching/bench/hit_path_ab.ts [--ref=main] [--rounds=25] [--pairs=100000] [--clock=cpu|wall]`
 *
 * @module
 */

import process from "node:process";
import { ManualStream } from "@allot/core";
import { ArrayBufferSegmentSource } from "./_array_buffer_source.ts";
import * as current from "../mod.ts";
import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";

/** What the harness uses of a `CachingAllocator`, old or new. */
interface Allocator {
  allocateId(byteLength: number): number;
  freeById(id: number): void;
  allocate(byteLength: number): {
    release(): void;
    recordStream(stream: ManualStream): void;
  };
  readonly pendingFreeCount: number;
  validate(): void;
}

/** What the harness uses of a `@allot/caching` module, old or new. */
interface CachingModule {
  CachingAllocator: new (source: ArrayBufferSegmentSource) => Allocator;
}

const ref = flag("ref", "main");
const rounds = Number(flag("rounds", "25"));
const pairs = Number(flag("pairs", "100000"));

/** A seeded generator of numbers in [0, 1) (mulberry32). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = rng(18);
const sizes = Array.from(
  { length: 4096 },
  () => Math.floor(2 ** (random() * 23)),
);

type Loop = (n: number) => void;
const NAMES = [
  "id, 64 KiB",
  "id, varied",
  "handle, 64 KiB",
  "handle, varied",
  "handle, 4 KiB, 100 pending",
  "handle, 4 KiB, 10,000 pending",
];

/** A warm allocator of module `m` with `n` frees pending, one fence each. */
function pending(m: CachingModule, n: number): Allocator {
  const a = new m.CachingAllocator(new ArrayBufferSegmentSource());
  const stream = new ManualStream();
  for (let i = 0; i < n; i++) {
    const block = a.allocate(4096);
    block.recordStream(stream);
    block.release();
  }
  a.allocate(4096).release();
  if (a.pendingFreeCount !== n) throw new Error("frees not pending");
  return a;
}

/** The pair loops over warm allocators of module `m`. */
function loops(m: CachingModule): { loops: Loop[]; check: () => void } {
  const make = () => new m.CachingAllocator(new ArrayBufferSegmentSource());
  const id64 = make(), idVaried = make(), handle64 = make();
  const handleVaried = make();
  id64.freeById(id64.allocateId(65536));
  handle64.allocate(65536).release();
  for (const n of sizes) idVaried.freeById(idVaried.allocateId(n));
  for (const n of sizes) handleVaried.allocate(n).release();
  const pending100 = pending(m, 100), pending10k = pending(m, 10_000);
  let i = 0, j = 0;
  return {
    loops: [
      (n) => {
        for (let k = 0; k < n; k++) id64.freeById(id64.allocateId(65536));
      },
      (n) => {
        for (let k = 0; k < n; k++) {
          idVaried.freeById(idVaried.allocateId(sizes[i++ & 4095]));
        }
      },
      (n) => {
        for (let k = 0; k < n; k++) handle64.allocate(65536).release();
      },
      (n) => {
        for (let k = 0; k < n; k++) {
          handleVaried.allocate(sizes[j++ & 4095]).release();
        }
      },
      (n) => {
        for (let k = 0; k < n; k++) pending100.allocate(4096).release();
      },
      (n) => {
        for (let k = 0; k < n; k++) pending10k.allocate(4096).release();
      },
    ],
    check: () => {
      const all = [id64, idVaried, handle64, handleVaried, pending100];
      for (const a of [...all, pending10k]) a.validate();
    },
  };
}

/**
 * Milliseconds of CPU time this process used (`--clock=cpu`, the default:
 * time the scheduler gave to other processes of a loaded machine is not
 * counted), or of wall-clock time (`--clock=wall`).
 */
const clock = flag("clock", "cpu") === "wall"
  ? () => performance.now()
  : () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");
/** The `q` quantile of `v` (0.5: the median). */
const quantile = (v: number[], q: number) =>
  [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) * q)];
const median = (v: number[]) => quantile(v, 0.5);

/** JS heap bytes per operation (allocate or free) of `loop`. */
function heapPerOp(loop: Loop): number {
  const deltas: number[] = [];
  for (let b = 0; b < 40; b++) {
    if (b % 10 === 0) gc!();
    const h0 = Deno.memoryUsage().heapUsed;
    loop(500);
    const h1 = Deno.memoryUsage().heapUsed;
    if (h1 >= h0) deltas.push((h1 - h0) / 1000);
  }
  return median(deltas);
}

const before = loops(
  await importAtRef<CachingModule>(ref, "caching/mod.ts"),
);
const after = loops(current as unknown as CachingModule);
for (let w = 0; w < 5; w++) {
  for (let p = 0; p < NAMES.length; p++) {
    before.loops[p](pairs);
    after.loops[p](pairs);
  }
}
const ratios: number[][] = NAMES.map(() => []);
const fastest = NAMES.map(() => [Infinity, Infinity]);
for (let r = 0; r < rounds; r++) {
  for (let p = 0; p < NAMES.length; p++) {
    const ns = [0, 0];
    for (const side of r % 2 === 0 ? [0, 1] : [1, 0]) {
      gc();
      const t0 = clock();
      (side === 0 ? before : after).loops[p](pairs);
      ns[side] = ((clock() - t0) * 1e6) / pairs;
      fastest[p][side] = Math.min(fastest[p][side], ns[side]);
    }
    ratios[p].push(ns[0] / ns[1]);
  }
}
before.check();
after.check();
console.log(
  `\nCaching hit path, ${ref} / this tree (ns per pair; ${rounds} rounds of ${pairs} pairs)\n`,
);
console.log(
  "| pair | ref / this, median | middle half | range | fastest ref | fastest this | heap/op ref | heap/op this |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
NAMES.forEach((name, p) => {
  console.log(
    `| ${name} | ${median(ratios[p]).toFixed(2)} | ${
      quantile(ratios[p], 0.25).toFixed(2)
    }–${quantile(ratios[p], 0.75).toFixed(2)} | ${
      Math.min(...ratios[p]).toFixed(2)
    }–${Math.max(...ratios[p]).toFixed(2)} | ${fastest[p][0].toFixed(0)} | ${
      fastest[p][1].toFixed(0)
    } | ${heapPerOp(before.loops[p]).toFixed(1)} B | ${
      heapPerOp(after.loops[p]).toFixed(1)
    } B |`,
  );
});
