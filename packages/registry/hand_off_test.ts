import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DoubleFreeError, UnsupportedOperationError } from "@allot/core";
import { OwnershipRegistry } from "./ownership_registry.ts";

function reply<T>(worker: Worker): Promise<T> {
  return new Promise((resolve, reject) => {
    worker.onmessage = (e) => resolve(e.data as T);
    worker.onerror = (e) => {
      e.preventDefault();
      reject(new Error(e.message));
    };
  });
}

describe("OwnershipRegistry hand-off to a real Worker", () => {
  it("OwnershipRegistry.transferOut() moves ownership to a Worker, which frees it; and back", async () => {
    const worker = new Worker(
      new URL("./_test_worker.ts", import.meta.url).href,
      { type: "module", name: "hand-off-worker" },
    );
    try {
      using registry = new OwnershipRegistry();
      const data = registry.newArray("f64", 1000);
      for (let i = 0; i < data.length; i++) data[i] = i;
      const buffer = registry.transferOut(data);
      assert.equal(registry.requestedBytes, 0);
      assert.ok(!registry.isRegistered(data));
      const answer = reply<Record<string, number | string>>(worker);
      worker.postMessage({ op: "transfer", buffer }, [buffer]);
      assert.equal(data.length, 0, "the sender's view is detached");
      assert.deepEqual(await answer, {
        sum: 499500,
        worker: "hand-off-worker",
        ownedBytes: 8000,
        lengthAfterFree: 0,
        totalAfter: 0,
      });

      const back = reply<{ buffer: ArrayBuffer; totalAfter: number }>(worker);
      worker.postMessage({ op: "send-back", length: 5 });
      const got = await back;
      assert.equal(got.totalAfter, 0, "the worker gave up ownership");
      const received = new Uint32Array(got.buffer);
      registry.adopt(received);
      assert.deepEqual([...received], [0, 3, 6, 9, 12]);
      assert.equal(registry.requestedBytes, 20);
      registry.unregister(received);
      assert.equal(received.length, 0);
    } finally {
      const closed = reply<{ leaks: number }>(worker);
      worker.postMessage({ op: "close" });
      assert.deepEqual(await closed, { leaks: 0 });
      worker.terminate();
    }
  });

  it("OwnershipRegistry shares a SharedArrayBuffer with a Worker that borrows it", async () => {
    const worker = new Worker(
      new URL("./_test_worker.ts", import.meta.url).href,
      { type: "module" },
    );
    try {
      using registry = new OwnershipRegistry();
      const shared = registry.newArray("i32", 64, { shared: true });
      shared.fill(1);
      const done = reply<{ done: boolean; registered: boolean }>(worker);
      worker.postMessage({ op: "share", array: shared, add: 41 });
      assert.deepEqual(await done, { done: true, registered: false });
      assert.ok(shared.every((v) => v === 42), "the worker wrote in place");
      assert.ok(registry.isRegistered(shared), "the owner still owns it");
      assert.throws(
        () => registry.transferOut(shared),
        /SharedArrayBuffer \(share it instead\)/,
      );
      registry.unregister(shared);
    } finally {
      worker.terminate();
    }
  });

  it("OwnershipRegistry.transferOut() refuses what cannot move and changes nothing", () => {
    using registry = new OwnershipRegistry();
    const block = registry.newArray("f32", 8);
    registry.addAlias(block, block.subarray(4));
    const custom = new Float32Array(4);
    registry.register(custom, { deleter: () => {} });
    const before = registry.stats();
    assert.throws(() => registry.transferOut(block), /buffer with aliases/);
    assert.throws(
      () => registry.transferOut(custom),
      UnsupportedOperationError,
    );
    assert.throws(
      () => registry.transferOut(new Float32Array(2)),
      DoubleFreeError,
    );
    assert.deepEqual(registry.stats(), before);
    registry.unregister(block.subarray(4));
    registry.unregister(block);
    registry.unregister(custom);
    const detached = new ArrayBuffer(8);
    const view = new Uint8Array(detached);
    structuredClone(detached, { transfer: [detached] });
    assert.throws(
      () => registry.adopt(view),
      /Cannot adopt a Uint8Array: its ArrayBuffer is detached/,
    );
  });
});
