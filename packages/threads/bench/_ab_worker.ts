/**
 * The Worker side of `ab_workers.ts`: imports the build of `@allot/threads`
 * it is told to (by module URL), attaches to the shared heap and replays a
 * log-uniform trace on it when the start word flips.
 *
 * @module
 */

import { logUniformTrace, type Trace } from "../../cpu/bench/trace.ts";

interface Heap {
  alloc(n: number): number;
  free(offset: number): void;
  detach(): void;
}
interface Build {
  SharedHeap: { attach(descriptor: unknown): Heap };
}

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  onmessage: ((event: MessageEvent) => void) | null;
};

function replay(heap: Heap, trace: Trace, slots: Int32Array): void {
  const { kind, slot, byteLength } = trace;
  for (let i = 0; i < kind.length; i++) {
    if (kind[i] === 1) slots[slot[i]] = heap.alloc(byteLength[i]);
    else heap.free(slots[slot[i]]);
  }
}

let build: Build | undefined;
let heap: Heap | undefined;

scope.onmessage = async (event: MessageEvent) => {
  const m = event.data;
  if (m.type === "replay") {
    build ??= (await import(m.module)) as Build;
    heap ??= build.SharedHeap.attach(m.heap);
    const trace = logUniformTrace(m.operations, m.live, m.seed);
    const slots = new Int32Array(trace.slots);
    replay(heap, trace, slots); // warm
    const sync = new Int32Array(m.sync as SharedArrayBuffer);
    Atomics.add(sync, 1, 1);
    Atomics.notify(sync, 1);
    while (Atomics.load(sync, 0) === 0) Atomics.wait(sync, 0, 0, 50);
    for (let r = 0; r < m.repeats; r++) replay(heap, trace, slots);
    scope.postMessage({ ops: trace.kind.length * m.repeats });
  } else if (m.type === "detach") {
    heap?.detach();
    heap = undefined;
    scope.postMessage({ ops: 0 });
  }
};
