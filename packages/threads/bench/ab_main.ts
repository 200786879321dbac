/**
 * A/B of this tree's `SharedHeap` against another build of it (main's, say),
 * same process, interleaved, each heap through a call site of its own:
 * process CPU time of replays of the log-uniform and tensor-shaped traces,
 * warm (reused heaps, 3 replays a sample) and fresh (a new 512 MiB heap per
 * replay). Prints the median ratio other/this (above 1: this tree faster)
 * and the range over the pairs of samples.
 *
 * Copy the other build's `packages/threads` (non-test files) into a folder
 * under the repository root, so its `@allot/core` import resolves:
 *
 * ```sh
 * mkdir -p .ab_main && for f in $(git ls-tree --name-only main packages/threads/ | grep -v _test | grep '\.ts$'); do git show main:$f > .ab_main/$(basename $f); done
 * deno run -A packages/threads/bench/ab_main.ts .ab_main 41
 * ```
 *
 * An A/A run (the same folder twice: `ab_main.ts packages/threads`) shows
 * the noise of the machine.
 *
 * @module
 */

import process from "node:process";
import { SharedHeap } from "../mod.ts";
import {
  logUniformTrace,
  tensorTrace,
  type Trace,
} from "../../cpu/bench/trace.ts";

interface Heap {
  alloc(n: number): number;
  free(offset: number): void;
  close(): void;
}
type Make = (byteLength: number) => Heap;

function replayThis(heap: Heap, trace: Trace, slots: Int32Array): void {
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
}

// The same loop again: a call site of its own for the other build.
function replayOther(heap: Heap, trace: Trace, slots: Int32Array): void {
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
}

function cpuMs(fn: () => void): number {
  const c0 = process.cpuUsage();
  fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1e3;
}

function run(
  name: string,
  trace: Trace,
  makeThis: Make,
  makeOther: Make,
  fresh: boolean,
  pairs: number,
): void {
  const size = 512 << 20;
  const reps = fresh ? 1 : 3;
  let a = makeThis(size), b = makeOther(size);
  const sa = new Int32Array(trace.slots), sb = new Int32Array(trace.slots);
  for (let w = 0; w < 3; w++) {
    replayThis(a, trace, sa);
    replayOther(b, trace, sb);
  }
  const ratios: number[] = [];
  for (let p = 0; p < pairs; p++) {
    let ta = 0, tb = 0;
    for (const which of p % 2 === 0 ? [0, 1] : [1, 0]) {
      for (let r = 0; r < reps; r++) {
        if (which === 0) {
          if (fresh) (a.close(), a = makeThis(size));
          ta += cpuMs(() => replayThis(a, trace, sa));
        } else {
          if (fresh) (b.close(), b = makeOther(size));
          tb += cpuMs(() => replayOther(b, trace, sb));
        }
      }
    }
    ratios.push(tb / ta);
  }
  a.close();
  b.close();
  const s = [...ratios].sort((x, y) => x - y);
  console.log(
    `${name} ${fresh ? "fresh" : "warm"}: other/this CPU time ${
      s[s.length >> 1].toFixed(3)
    } (${s[0].toFixed(3)}..${s[s.length - 1].toFixed(3)}, ${pairs} pairs)`,
  );
}

if (import.meta.main) {
  const dir = Deno.args[0] ?? ".ab_main";
  const pairs = Number(Deno.args[1] ?? 21);
  const url = new URL(`../../../${dir}/mod.ts`, import.meta.url);
  const other = (await import(url.href)) as { SharedHeap: typeof SharedHeap };
  const makeThis: Make = (n) => SharedHeap.create(n);
  const makeOther: Make = (n) => other.SharedHeap.create(n);
  const lu = logUniformTrace(200_000);
  run("log-uniform", lu, makeThis, makeOther, false, pairs);
  run("tensor", tensorTrace(200), makeThis, makeOther, false, pairs);
  run("log-uniform", lu, makeThis, makeOther, true, Math.max(5, pairs >> 1));
}
