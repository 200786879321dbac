/**
 * The Worker side of the threads benchmark: replays a trace on its own
 * handle of the shared heap when the start word flips, or acknowledges
 * hand-off messages.
 *
 * @module
 */

import { SharedHeap, SharedHeapAllocator } from "../mod.ts";
import type { SharedHeapDescriptor } from "../mod.ts";
import { logUniformTrace, type Trace } from "../../cpu/bench/trace.ts";
import { arenaCounters, counterDelta } from "../_counters.ts";

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  onmessage: ((event: MessageEvent) => void) | null;
};

function replay(heap: SharedHeap, trace: Trace, slots: Int32Array): void {
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
}

let heap: SharedHeap | undefined;
let allocator: SharedHeapAllocator | undefined;

scope.onmessage = (event: MessageEvent) => {
  const m = event.data;
  if (m.type === "replay") {
    heap ??= SharedHeap.attach(m.heap as SharedHeapDescriptor);
    const trace = logUniformTrace(m.operations, m.live, m.seed);
    const slots = new Int32Array(trace.slots);
    replay(heap, trace, slots); // warm
    const sync = new Int32Array(m.sync as SharedArrayBuffer);
    Atomics.add(sync, 1, 1);
    Atomics.notify(sync, 1);
    while (Atomics.load(sync, 0) === 0) Atomics.wait(sync, 0, 0, 50);
    const before = arenaCounters(heap);
    const t0 = performance.now();
    for (let r = 0; r < m.repeats; r++) replay(heap, trace, slots);
    const ms = performance.now() - t0;
    const counters = counterDelta(arenaCounters(heap), before);
    scope.postMessage({
      type: "done",
      ms,
      ops: trace.kind.length * m.repeats,
      counters,
    });
  } else if (m.type === "attach") {
    heap = SharedHeap.attach(m.heap as SharedHeapDescriptor);
    allocator = new SharedHeapAllocator(heap);
    scope.postMessage({ type: "ok" });
  } else if (m.type === "descriptor") {
    allocator!.receive(m.descriptor).release();
    scope.postMessage({ type: "ok" });
  } else if (m.type === "bytes") {
    scope.postMessage({ type: "ok" });
  } else if (m.type === "detach") {
    heap?.detach();
    heap = undefined;
    scope.postMessage({ type: "ok" });
  }
};
