// A Worker for hand_off_test.ts: it owns what it receives by transfer, and
// only borrows what it receives by sharing.
import { OwnershipRegistry } from "./mod.ts";

const registry = new OwnershipRegistry({ track: true });

type Message =
  | { op: "transfer"; buffer: ArrayBuffer }
  | { op: "send-back"; length: number }
  | { op: "share"; array: Int32Array; add: number }
  | { op: "close" };

/** The parts of a Worker's global scope used here (typed without the worker lib). */
interface WorkerScope {
  onmessage: ((event: MessageEvent<Message>) => void) | null;
  postMessage(message: unknown, transfer?: Transferable[]): void;
  close(): void;
}
const scope = globalThis as unknown as WorkerScope;

scope.onmessage = (event: MessageEvent<Message>) => {
  const m = event.data;
  if (m.op === "transfer") {
    const array = new Float64Array(m.buffer);
    registry.adopt(array);
    let sum = 0;
    for (const v of array) sum += v;
    const worker = registry.allocationInfo(array)?.worker;
    const ownedBytes = registry.requestedBytes;
    registry.unregister(array); // the receiver frees it
    scope.postMessage({
      sum,
      worker,
      ownedBytes,
      lengthAfterFree: array.length,
      totalAfter: registry.requestedBytes,
    });
  } else if (m.op === "send-back") {
    const array = registry.newArray("u32", m.length);
    for (let i = 0; i < m.length; i++) array[i] = i * 3;
    const buffer = registry.transferOut(array);
    scope.postMessage({ buffer, totalAfter: registry.requestedBytes }, [
      buffer,
    ]);
  } else if (m.op === "share") {
    // Borrowed: never registered here, never freed here.
    for (let i = 0; i < m.array.length; i++) Atomics.add(m.array, i, m.add);
    scope.postMessage({
      done: true,
      registered: registry.isRegistered(m.array),
    });
  } else {
    const leaks = registry.dispose();
    scope.postMessage({ leaks: leaks?.records.length ?? 0 });
    scope.close();
  }
};
