/**
 * Paired A/B of `SharedHeap`'s scaling with Workers: this tree's build
 * against another (main's, or the commit before a change), in one process,
 * round by round in alternating order. Each round replays a log-uniform
 * trace (100,000 ops, ~500 live per Worker, 20 replays) with 1 Worker and
 * then with 2 Workers on a fresh 1 GiB heap of each build, and prints per
 * build the medians (ranges) over rounds of:
 *
 * - 2 Workers / 1 Worker, throughput by wall time (what `run.ts` reports);
 * - the same by CPU time per op (as if each Worker had a core of its own:
 *   2 x CPU ns per op of 1 Worker / that of 2), from each thread's on-CPU
 *   time (Linux `schedstat`);
 * - run-queue wait / CPU time of the Workers at 2 (above 0: they waited
 *   for a core, which lowers the wall ratio whatever the heap does);
 * - CPU ns per op of 1 Worker.
 *
 * Copy the other build's `packages/threads` (non-test files) into a folder
 * under the repository root, as for `ab_main.ts`:
 *
 * ```sh
 * mkdir -p .ab_main && for f in $(git ls-tree --name-only main packages/threads/ | grep -v _test | grep '\.ts$'); do git show main:$f > .ab_main/$(basename $f); done
 * deno run -A packages/threads/bench/ab_workers.ts .ab_main 15
 * ```
 *
 * @module
 */

import { busyThreads, threadTimes } from "./run.ts";

interface Build {
  SharedHeap: {
    create(byteLength: number): {
      descriptor(): unknown;
      detach(): void;
    };
  };
}

interface Round {
  wall: number;
  cpu: number;
  wait: number;
  ns1: number;
}

const MiB = 1 << 20;

function ask(w: Worker, message: unknown): Promise<{ ops: number }> {
  return new Promise((resolve) => {
    w.onmessage = (e) => resolve(e.data);
    w.postMessage(message);
  });
}

// One replay with `n` Workers on a fresh heap of `build`: throughput (ops
// per ms of wall time), CPU ns per op, run-queue wait / CPU of the Workers.
async function once(
  build: Build,
  module: string,
  workers: Worker[],
  n: number,
): Promise<{ throughput: number; cpuPerOp: number; wait: number }> {
  const heap = build.SharedHeap.create(1024 * MiB);
  const sync = new SharedArrayBuffer(8);
  const s = new Int32Array(sync);
  const done = workers.slice(0, n).map((w, i) =>
    ask(w, {
      type: "replay",
      module,
      heap: heap.descriptor(),
      operations: 100_000,
      live: 500,
      seed: 42 + i,
      repeats: 20,
      sync,
    })
  );
  while (Atomics.load(s, 1) < n) {
    await new Promise((r) => setTimeout(r, 1));
  }
  const times0 = threadTimes();
  const t0 = performance.now();
  Atomics.store(s, 0, 1);
  Atomics.notify(s, 0);
  const results = await Promise.all(done);
  const wall = performance.now() - t0;
  // Threads that ran at least 5 ms: the Workers (a replay is 50 - 100 ms).
  const { cpuNs, waitNs } = busyThreads(times0, threadTimes(), 5e6);
  const ops = results.reduce((a, r) => a + r.ops, 0);
  for (const w of workers.slice(0, n)) await ask(w, { type: "detach" });
  heap.detach();
  return {
    throughput: ops / wall,
    cpuPerOp: cpuNs / ops,
    wait: waitNs / cpuNs,
  };
}

function summary(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  return `${s[s.length >> 1].toFixed(2)} (${s[0].toFixed(2)}..${
    s[s.length - 1].toFixed(2)
  })`;
}

if (import.meta.main) {
  const dir = Deno.args[0] ?? ".ab_main";
  const rounds = Number(Deno.args[1] ?? 15);
  const sides = [
    ["this", new URL("../mod.ts", import.meta.url).href],
    [dir, new URL(`../../../${dir}/mod.ts`, import.meta.url).href],
  ] as const;
  const builds = await Promise.all(
    sides.map(async ([name, module]) => ({
      name,
      module,
      build: (await import(module)) as Build,
      workers: [0, 1].map(() =>
        new Worker(new URL("./_ab_worker.ts", import.meta.url), {
          type: "module",
        })
      ),
      rounds: [] as Round[],
    })),
  );
  for (let r = 0; r < rounds; r++) {
    for (const b of r & 1 ? [...builds].reverse() : builds) {
      const one = await once(b.build, b.module, b.workers, 1);
      const two = await once(b.build, b.module, b.workers, 2);
      b.rounds.push({
        wall: two.throughput / one.throughput,
        cpu: 2 * one.cpuPerOp / two.cpuPerOp,
        wait: two.wait,
        ns1: one.cpuPerOp,
      });
    }
  }
  console.log(
    `2 Workers / 1 Worker, median (range) of ${rounds} paired rounds`,
  );
  for (const b of builds) {
    const of = (k: keyof Round) => summary(b.rounds.map((x) => x[k]));
    console.log(
      `${b.name}: by wall time ${of("wall")}, by CPU time per op ${
        of("cpu")
      }; run-queue wait / CPU at 2 Workers ${
        of("wait")
      }; CPU ns per op, 1 Worker ${of("ns1")}`,
    );
  }
  for (const b of builds) for (const w of b.workers) w.terminate();
}
