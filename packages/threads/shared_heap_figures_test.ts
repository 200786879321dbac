/**
 * `SharedHeap.stats()` figures over real Workers: totals exact after
 * concurrent allocate / free / remote free from several Workers, and peaks
 * exact when the Workers' calls are ordered (one Worker's blocks still live
 * while another allocates, or freed first).
 *
 * @module
 */

import assert from "node:assert/strict";
import { SharedHeap } from "./mod.ts";
import { Crew } from "./_test_figures_crew.ts";
import { RING } from "./_test_figures_worker.ts";

const MiB = 1 << 20;

Deno.test("SharedHeap figures: totals exact after 3 Workers churn at once, with remote frees", async () => {
  const heap = SharedHeap.create(48 * MiB);
  const crew = new Crew(3);
  try {
    await crew.all({ type: "attach", heap: heap.descriptor() });
    const ring = new SharedArrayBuffer(4 * (3 + RING));
    const runs = crew.workers.map((_, i) =>
      crew.ask(i, { type: "churn", ops: 3000, seed: 17 + i, ring })
    );
    Atomics.store(new Int32Array(ring), 0, 1);
    Atomics.notify(new Int32Array(ring), 0);
    const reports = await Promise.all(runs);
    const sum = (
      k: "allocations" | "allocatedBytes" | "frees" | "freedBytes",
    ) => reports.reduce((n, r) => n + r[k], 0);
    // blocks still live: each Worker's own, and hand-offs nobody took
    const left: number[] = reports.flatMap((r) => r.offsets);
    const r = new Int32Array(ring);
    for (let s = r[2]; s < r[1]; s++) {
      if (r[3 + s] !== 0) left.push(r[3 + s] - 1);
    }
    const liveBytes = left.reduce((n, o) => n + heap.usableByteLength(o), 0);
    const st = heap.stats();
    assert.ok(sum("frees") > 0 && sum("allocations") > 1000, "real work");
    assert.equal(st.allocations.allocated, sum("allocations"));
    assert.equal(st.allocations.freed, sum("frees"));
    assert.equal(st.allocations.current, left.length);
    assert.equal(st.allocatedBytes.allocated, sum("allocatedBytes"));
    assert.equal(st.allocatedBytes.freed, sum("freedBytes"));
    assert.equal(st.allocatedBytes.current, liveBytes);
    assert.ok(st.allocatedBytes.peak >= liveBytes);
    assert.ok(st.allocatedBytes.peak <= sum("allocatedBytes"));
    assert.ok(st.allocations.peak <= sum("allocations"));
    for (const o of left) heap.free(o);
    const end = heap.stats();
    assert.equal(end.allocations.current, 0);
    assert.equal(end.allocatedBytes.current, 0);
    assert.equal(end.allocatedBytes.freed, end.allocatedBytes.allocated);
    assert.equal(end.allocations.freed, end.allocations.allocated);
    heap.validate();
    await crew.all({ type: "detach" });
    // a detached arena's totals stay in the sums
    assert.deepEqual(heap.stats().allocations, end.allocations);
  } finally {
    crew.close();
    heap.close();
  }
});

Deno.test("SharedHeap figures: peaks are exact when Workers take turns or overlap", async () => {
  const heap = SharedHeap.create(32 * MiB);
  const crew = new Crew(2);
  try {
    await crew.all({ type: "attach", heap: heap.descriptor() });
    const sizes = [100, 5000, 20_000, 300_000, 64];
    const a = await crew.ask(0, { type: "alloc", sizes });
    const x = a.allocatedBytes;
    assert.equal(heap.stats().allocatedBytes.peak, x);
    await crew.ask(0, { type: "free", offsets: a.offsets });
    // B after A freed: the peak stays x (not the sum of the two)
    const b = await crew.ask(1, { type: "alloc", sizes });
    assert.equal(heap.stats().allocatedBytes.peak, x);
    assert.equal(heap.stats().allocations.peak, sizes.length);
    // A again while B holds: both at once
    const a2 = await crew.ask(0, { type: "alloc", sizes: [...sizes, 1] });
    const both = b.allocatedBytes + a2.allocatedBytes;
    let st = heap.stats();
    assert.equal(st.allocatedBytes.current, both);
    assert.equal(st.allocatedBytes.peak, both);
    assert.equal(st.allocations.peak, 2 * sizes.length + 1);
    // B frees A's blocks (remote), A frees B's: the peak stays
    await crew.ask(1, { type: "free", offsets: a2.offsets });
    await crew.ask(0, { type: "free", offsets: b.offsets });
    st = heap.stats();
    assert.equal(st.allocatedBytes.current, 0);
    assert.equal(st.allocatedBytes.peak, both);
    // a reset from the main thread applies to every Worker's figures
    const held = await crew.ask(1, { type: "alloc", sizes: [4096] });
    heap.resetPeakStats();
    heap.resetAccumulatedStats();
    st = heap.stats();
    assert.equal(st.allocatedBytes.peak, held.allocatedBytes);
    assert.equal(st.allocatedBytes.allocated, 0);
    assert.equal(st.allocatedBytes.freed, 0);
    const more = await crew.ask(0, { type: "alloc", sizes: [70_000] });
    st = heap.stats();
    assert.equal(
      st.allocatedBytes.peak,
      held.allocatedBytes + more.allocatedBytes,
    );
    assert.equal(st.allocatedBytes.allocated, more.allocatedBytes);
    await crew.ask(1, { type: "free", offsets: held.offsets });
    await crew.ask(0, { type: "free", offsets: more.offsets });
    st = heap.stats();
    assert.equal(
      st.allocatedBytes.freed,
      held.allocatedBytes + more.allocatedBytes,
    );
    assert.equal(
      st.allocatedBytes.allocated - st.allocatedBytes.freed,
      st.allocatedBytes.current + 0 - held.allocatedBytes,
    );
    assert.equal(st.allocations.current, 0);
    await crew.all({ type: "detach" });
  } finally {
    crew.close();
    heap.close();
  }
});
