/**
 * Third outside-in review of `@allot/core`: a signal that aborts during the
 * call that waits on it, and `Device` look-alikes.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DataPtr,
  DeferredFrees,
  Device,
  type Fence,
  InvalidArgumentError,
} from "./mod.ts";

describe("core third review", () => {
  it("DeferredFrees.synchronize() rejects with the reason when a fence's wait() aborts the signal, instead of waiting forever", async () => {
    const controller = new AbortController();
    const fence: Fence = {
      get completed() {
        return false;
      },
      wait() {
        controller.abort(new Error("stop"));
        return new Promise<void>(() => {}); // never completes
      },
    } as unknown as Fence;
    const released: number[] = [];
    const frees = new DeferredFrees<{ n: number; waitingFences: number }>(
      (item) => released.push(item.n),
    );
    frees.defer({ n: 1, waitingFences: 0 }, [1], [fence]);
    const outcome = await Promise.race([
      frees.synchronize({ signal: controller.signal }).then(
        () => "resolved",
        (e: unknown) => (e as Error).message,
      ),
      new Promise((resolve) => setTimeout(() => resolve("hung"), 500)),
    ]);
    assert.equal(outcome, "stop");
    // nothing changed: the item still waits
    assert.deepEqual(released, []);
    assert.equal(frees.count, 1);
  });

  it("Device.isDevice() and DataPtr refuse a Device look-alike that instanceof accepts", () => {
    const fake = Object.create(Device.prototype) as Device;
    assert.ok(fake instanceof Device);
    assert.equal(Device.isDevice(fake), false);
    assert.equal(Device.isDevice(Device.cpu()), true);
    assert.throws(
      () => new DataPtr(new ArrayBuffer(8), 0, 8, fake),
      InvalidArgumentError,
    );
    assert.equal(Device.cpu().equals(fake), false);
  });
});

// Device look-alikes that `instanceof` accepted in cpu, buddy and registry
// (each test failed before those packages used `Device.isDevice()`).
describe("Device look-alikes outside core", () => {
  const fake = () => Object.create(Device.prototype) as Device;

  it("CpuAllocator refuses a Device look-alike", async () => {
    const { CpuAllocator } = await import("@allot/cpu");
    assert.throws(
      () => new CpuAllocator({ device: fake() }),
      InvalidArgumentError,
    );
  });

  it(
    "Registry.set() refuses an allocator whose device cannot be printed with InvalidArgumentError",
    async () => {
      const { Registry } = await import("@allot/registry");
      const registry = new Registry();
      assert.throws(
        () =>
          registry.set("cpu", {
            device: Object.create(null),
            allocate() {},
          } as never),
        InvalidArgumentError,
      );
    },
  );
});
