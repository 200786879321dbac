/**
 * The Worker side of a `threads_review4_test.ts` race: fills large blocks
 * with a pattern, gives their pages back to the core, then allocates small
 * blocks so that new slabs are carved from those pages, again and again,
 * while the test's main thread takes snapshots.
 *
 * @module
 */

import { SharedHeap, type SharedHeapDescriptor } from "./mod.ts";

const scope = globalThis as unknown as {
  postMessage(message: unknown): void;
  onmessage: ((event: MessageEvent<Command>) => void) | null;
};

/** What the test asks. */
export interface Command {
  heap: SharedHeapDescriptor;
  rounds: number;
  /** Word 0 set to 1 by the Worker when done. */
  flag: SharedArrayBuffer;
}

scope.onmessage = (e: MessageEvent<Command>) => {
  const { heap: descriptor, rounds, flag } = e.data;
  let error: string | undefined;
  try {
    const heap = SharedHeap.attach(descriptor);
    const sizes = [64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448];
    for (let r = 0; r < rounds; r++) {
      // 3s in every word of a large block, its pages back to the core
      const big = heap.alloc(16 * 4096 * 4);
      new Int32Array(heap.buffer, big, (16 * 4096 * 4) >> 2).fill(3);
      heap.free(big);
      heap.emptyCache();
      // new slabs, carved where the 3s were
      const small: number[] = [];
      for (const size of sizes) {
        for (let k = 0; k < 4; k++) small.push(heap.alloc(size));
      }
      for (const offset of small) heap.free(offset);
      heap.emptyCache();
    }
    heap.detach();
  } catch (err) {
    error = String(err);
  }
  Atomics.store(new Int32Array(flag), 0, 1);
  scope.postMessage({ error });
};
