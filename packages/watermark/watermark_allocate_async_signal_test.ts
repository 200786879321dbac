/**
 * `WatermarkAllocator.allocateBufferAsync(n, { signal })`: the signal is
 * read and checked once, an aborted signal rejects with its reason (before
 * anything is done, or during the wait for work that never completes), the
 * buffers pending free stay pending and nothing else changes, and no
 * listener is left on the signal.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
} from "@allot/core";
import { WatermarkAllocator } from "./mod.ts";

const MiB = 1024 * 1024;

/** 40 MiB pending on `stuck` on a 64 MiB device: 40 MiB more must wait. */
function setup() {
  const allocator = new WatermarkAllocator(
    new MockSegmentSource({ capacityBytes: 64 * MiB }),
    { highWatermarkRatio: 1, lowWatermarkRatio: 1 },
  );
  const stuck = new ManualStream();
  const a = allocator.allocateBuffer(40 * MiB);
  allocator.recordEvents([a], stuck);
  a.release();
  assert.equal(allocator.stats().pendingFreeBytes, 40 * MiB);
  return { allocator, stuck };
}

const stateOf = <M>(allocator: WatermarkAllocator<M>) => ({
  stats: allocator.stats(),
  snapshot: allocator.snapshot(),
});

/** A signal whose listeners are counted (those still registered). */
function countedSignal(signal: AbortSignal): Set<unknown> {
  const listeners = new Set<unknown>();
  const wrapped = new Map<unknown, EventListener>();
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((
    type: string,
    fn: EventListener,
    options?: AddEventListenerOptions,
  ) => {
    listeners.add(fn);
    const w = (e: Event) => {
      if (options?.once) listeners.delete(fn);
      fn(e);
    };
    wrapped.set(fn, w);
    add(type, w, options);
  }) as typeof signal.addEventListener;
  signal.removeEventListener = ((type: string, fn: EventListener) => {
    listeners.delete(fn);
    remove(type, wrapped.get(fn) ?? fn);
  }) as typeof signal.removeEventListener;
  return listeners;
}

describe("@allot/watermark allocateBufferAsync({ signal })", () => {
  it("refuses a value that is not an AbortSignal, naming the call, and changes nothing", async () => {
    const { allocator } = setup();
    const before = stateOf(allocator);
    for (
      const signal of [{}, 1, null, "x", Object.create(AbortSignal.prototype)]
    ) {
      await assert.rejects(
        allocator.allocateBufferAsync(40 * MiB, { signal } as never),
        (e) =>
          e instanceof InvalidArgumentError &&
          e.message.startsWith(`Cannot allocate ${40 * MiB} bytes: signal`),
      );
    }
    assert.deepEqual(stateOf(allocator), before);
  });

  it("an already aborted signal rejects with its reason before anything is done", async () => {
    const { allocator } = setup();
    const before = stateOf(allocator);
    const reason = new Error("stop");
    await assert.rejects(
      allocator.allocateBufferAsync(40 * MiB, {
        signal: AbortSignal.abort(reason),
      }),
      (e) => e === reason,
    );
    assert.deepEqual(stateOf(allocator), before);
  });

  it("aborting the wait for work that never completes rejects with the reason: the buffer stays pending, nothing changes, no failure counted, no listener left", async () => {
    const { allocator, stuck } = setup();
    // the attempts before the wait (as allocateBuffer makes them)
    assert.equal(
      allocator.tryAllocateBuffer(40 * MiB, { pool: "shared" }),
      undefined,
    );
    const controller = new AbortController();
    const listeners = countedSignal(controller.signal);
    const before = stateOf(allocator);
    const waiting = allocator.allocateBufferAsync(40 * MiB, {
      pool: "shared",
      signal: controller.signal,
    });
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(listeners.size, 1, "waits with a listener on the signal");
    const reason = new Error("give up");
    controller.abort(reason);
    await assert.rejects(waiting, (e) => e === reason);
    assert.equal(listeners.size, 0, "listener left on the signal");
    // the same attempts again, then the wait: nothing changed
    assert.deepEqual(stateOf(allocator), before);
    assert.equal(allocator.stats().pendingFreeBytes, 40 * MiB);
    allocator.validate();
    // the work completes later: the memory comes back as usual
    stuck.completeAll();
    const b = await allocator.allocateBufferAsync(40 * MiB, {
      pool: "shared",
    });
    assert.equal(allocator.stats().pendingFreeBytes, 0);
    b.release();
  });

  it("a wait that ends with the work removes its listener, and reads the signal once", async () => {
    const { allocator, stuck } = setup();
    const controller = new AbortController();
    const listeners = countedSignal(controller.signal);
    let reads = 0;
    const options = {
      pool: "shared" as const,
      get signal() {
        reads++;
        // a second read would hand the wait an aborted signal
        return reads === 1 ? controller.signal : AbortSignal.abort();
      },
    };
    const waiting = allocator.allocateBufferAsync(40 * MiB, options);
    setTimeout(() => stuck.completeAll(), 5);
    const b = await waiting;
    assert.equal(b.pool, "shared");
    assert.equal(reads, 1);
    assert.equal(listeners.size, 0, "listener left on the signal");
    b.release();
    allocator.validate();
  });
});
