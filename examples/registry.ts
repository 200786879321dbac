// Compose allocators through a Registry, own arrays through an
// OwnershipRegistry, hand memory to a Worker by transfer, and see a leak
// report. Run: deno run -A examples/registry.ts
import { AllocatorBase, DataPtr, Device } from "@allot/core";
import {
  ArrayOwner,
  OwnershipRegistry,
  Registry,
  RegistryGuard,
  WorkspacePool,
} from "@allot/registry";

/** A minimal CPU allocator: one ArrayBuffer per allocation. */
class PlainCpu extends AllocatorBase<ArrayBuffer, null> {
  readonly device: Device = Device.cpu();
  allocate(byteLength: number): DataPtr<ArrayBuffer, null> {
    return new DataPtr(
      new ArrayBuffer(byteLength),
      0,
      byteLength,
      this.device,
    );
  }
}

// 1. Composition: who serves which device.
const devices = new Registry();
devices.set("cpu", new PlainCpu(), { priority: 10 });
console.log(
  "cpu:0 is served by",
  devices.get("cpu:0").constructor.name,
  "at priority",
  devices.priorityOf("cpu"),
);

// 2. Ownership.
using registry = new OwnershipRegistry({
  track: true,
  onLeak: (report) => console.log(`\n${report.text}`),
});
const weights = registry.newArray("f32", 4096, {
  allocator: devices.get("cpu"),
});
const rows = Array.from({ length: 4 }, (_, i) => weights.subarray(i * 1024));
for (const row of rows.slice(1)) registry.addAlias(weights, row);

{
  using scratch = new RegistryGuard(registry, "f64", 1024);
  scratch.array.fill(1);
}

using pool = new WorkspacePool(registry, "f32", 256, { ranks: 2 });
for (let i = 0; i < 10; i++) pool.get(i % 2)[0] = i;

// Zero-copy hand-off: the consumer gets the array and an owner.
const owner = new ArrayOwner(registry, rows[1]);
owner.release();

console.log(registry.report());

// 3. Transfer to a Worker: ownership moves with the buffer.
const worker = new Worker(
  new URL("../packages/registry/_test_worker.ts", import.meta.url).href,
  { type: "module", name: "example-worker" },
);
const payload = registry.newArray("f64", 100);
payload.forEach((_, i) => payload[i] = i);
const buffer = registry.transferOut(payload);
const answer = await new Promise<{ sum: number; worker: string }>((resolve) => {
  worker.onmessage = (e) => resolve(e.data);
  worker.postMessage({ op: "transfer", buffer }, [buffer]);
});
console.log(`\n${answer.worker} summed ${answer.sum} and freed the buffer`);
worker.terminate();

// rows[2] and rows[3] and weights itself are never unregistered:
// dispose() at scope exit reports them, then frees them.
registry.unregister(weights);
