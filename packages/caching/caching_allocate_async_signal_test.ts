/**
 * `CachingAllocator.allocateAsync(n, { signal })`: the signal is read and
 * checked once, an aborted signal rejects with its reason (before anything
 * is done, or during the wait for a fence that never completes) and the
 * pending frees stay pending, no listener is left on the signal, and a
 * request above the allowed bytes is refused at once instead of waiting.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
} from "@allot/core";
import { CachingAllocator, CachingOutOfMemoryError } from "./mod.ts";

const MiB = 1024 * 1024;

/** A full device: 1 MiB live on a 2 MiB device, 1 MiB pending on `stuck`. */
function setup() {
  const a = new CachingAllocator(
    new MockSegmentSource({ capacityBytes: 2 * MiB }),
  );
  const stuck = new ManualStream();
  const live = a.allocate(MiB);
  const freed = a.allocate(MiB);
  freed.recordStream(stuck);
  freed.release();
  assert.equal(a.pendingFreeCount, 1);
  return { a, stuck, live };
}

function stateOf(a: CachingAllocator<unknown>) {
  return {
    stats: a.memoryStats(),
    segments: a.snapshot().segments,
    pending: a.pendingFreeCount,
  };
}

/** A signal that counts its listeners (added, removed, still there). */
function countedSignal(signal: AbortSignal) {
  const listeners = new Set<unknown>();
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((
    type: string,
    fn: EventListener,
    options?: AddEventListenerOptions,
  ) => {
    listeners.add(fn);
    const once = (e: Event) => {
      listeners.delete(fn);
      fn(e);
    };
    add(type, options?.once ? once : fn, options);
    if (options?.once) onceOf.set(fn, once);
  }) as typeof signal.addEventListener;
  const onceOf = new Map<unknown, EventListener>();
  signal.removeEventListener = ((type: string, fn: EventListener) => {
    listeners.delete(fn);
    remove(type, onceOf.get(fn) ?? fn);
    onceOf.delete(fn);
  }) as typeof signal.removeEventListener;
  return listeners;
}

describe("@allot/caching allocateAsync({ signal })", () => {
  it("refuses a value that is not an AbortSignal, naming the call, and changes nothing", async () => {
    const { a } = setup();
    const before = stateOf(a);
    for (
      const signal of [{}, 1, null, "x", Object.create(AbortSignal.prototype)]
    ) {
      await assert.rejects(
        a.allocateAsync(2 * MiB, { signal } as never),
        (e) =>
          e instanceof InvalidArgumentError &&
          e.message.startsWith("Cannot allocate 2097152 bytes: signal") &&
          e.name === "InvalidArgumentError",
      );
    }
    assert.deepEqual(stateOf(a), before);
  });

  it("an already aborted signal rejects with its reason before anything is done, even a completed fence's take-back", async () => {
    const { a, stuck } = setup();
    stuck.completeAll(); // the pending free could come back now
    const before = stateOf(a);
    const reason = new Error("stop");
    await assert.rejects(
      a.allocateAsync(4096, { signal: AbortSignal.abort(reason) }),
      (e) => e === reason,
    );
    assert.deepEqual(stateOf(a), before);
    a.validate();
  });

  it("aborting the wait for a fence that never completes rejects with the reason: the free stays pending, no OOM counted, no listener left", async () => {
    const { a, stuck } = setup();
    const controller = new AbortController();
    const listeners = countedSignal(controller.signal);
    const numOoms = a.memoryStats().numOoms;
    const waiting = a.allocateAsync(2 * MiB, { signal: controller.signal });
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(listeners.size, 1, "waits with a listener on the signal");
    const reason = new Error("give up");
    controller.abort(reason);
    await assert.rejects(waiting, (e) => e === reason);
    assert.equal(listeners.size, 0, "listener left on the signal");
    assert.equal(a.pendingFreeCount, 1);
    assert.equal(a.memoryStats().numOoms, numOoms);
    a.validate();
    // the fence completes later: the block comes back as usual
    stuck.completeAll();
    using b = await a.allocateAsync(MiB);
    assert.equal(a.pendingFreeCount, 0);
    assert.equal(b.blockByteLength, MiB);
  });

  it("a wait that ends with the fence removes its listener, and reads the signal once", async () => {
    const { a, stuck, live } = setup();
    const controller = new AbortController();
    const listeners = countedSignal(controller.signal);
    let reads = 0;
    const options = {
      get signal() {
        reads++;
        // a second read would hand the wait an aborted signal
        return reads === 1 ? controller.signal : AbortSignal.abort();
      },
    };
    const waiting = a.allocateAsync(MiB, options);
    setTimeout(() => stuck.completeAll(), 5);
    using b = await waiting;
    assert.equal(b.blockByteLength, MiB);
    assert.equal(reads, 1);
    assert.equal(listeners.size, 0, "listener left on the signal");
    live.release();
    a.validate();
  });

  it("a request above the allowed bytes is refused at once, not after the fences", async () => {
    const { a } = setup();
    a.setMemoryFraction(0.5); // 1 MiB allowed
    const before = stateOf(a);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const hang = new Promise((_, reject) => {
      timer = setTimeout(
        () => reject(new Error("waited for a fence that cannot help")),
        2000,
      );
    });
    try {
      await assert.rejects(
        Promise.race([a.allocateAsync(2 * MiB), hang]),
        CachingOutOfMemoryError,
      );
    } finally {
      clearTimeout(timer);
    }
    const after = stateOf(a);
    assert.deepEqual(after.segments, before.segments);
    assert.equal(after.pending, 1);
    assert.deepEqual({ ...after.stats, numOoms: 0 }, {
      ...before.stats,
      numOoms: 0,
    });
  });
});
