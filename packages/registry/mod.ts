/**
 * `@allot/registry`: how allot packages compose, and who owns which memory.
 *
 * - {@linkcode Registry}: which {@linkcode Allocator} serves which device,
 *   with PyTorch's priority rule (a registration replaces the current one
 *   only at equal or higher priority). An instance, never global static
 *   registration; {@linkcode defaultRegistry} is created on first use,
 *   with `@allot/cpu`'s `CpuAllocator` serving `cpu` at priority 0.
 *   `storage()` and `buffer()` make `@allot/storage` objects on a device.
 * - {@linkcode OwnershipRegistry}: SCL-Core's registry of live allocations:
 *   records with an allocation kind (`heap`, `system`, `aligned`, `custom`),
 *   reference-counted buffers with aliases, statistics and a printable
 *   report, leak reports on `dispose()` or at exit, tracking (stack, time,
 *   worker), zero-copy hand-off and Worker transfer.
 * - {@linkcode RegistryGuard} (`using`), {@linkcode ArrayOwner} (hand-off),
 *   {@linkcode WorkspacePool} (one scratch array per rank).
 *
 * @example Resolve an allocator; own arrays with aliases; report leaks
 * ```ts
 * import { AllocatorBase, DataPtr, Device } from "@allot/core";
 * import { OwnershipRegistry, Registry } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * class Plain extends AllocatorBase<ArrayBuffer, null> {
 *   readonly device: Device = Device.cpu();
 *   allocate(byteLength: number): DataPtr<ArrayBuffer, null> {
 *     return new DataPtr(new ArrayBuffer(byteLength), 0, byteLength, this.device);
 *   }
 * }
 * const devices = new Registry();
 * devices.set("cpu", new Plain());
 *
 * const leaks: number[] = [];
 * const owner = new OwnershipRegistry({ onLeak: (r) => leaks.push(r.byteLength) });
 * const block = owner.newArray("f32", 1024, { allocator: devices.get("cpu:0") });
 * const rows = [block.subarray(0, 512), block.subarray(512)];
 * owner.addAlias(block, rows[1]); // two references: block and rows[1]
 * owner.unregister(block);
 * assert.equal(rows[1].length, 512); // still alive through the alias
 * owner.dispose(); // rows[1] was never unregistered: reported, then freed
 * assert.deepEqual(leaks, [4096]);
 * ```
 *
 * @module
 */

export * from "./ownership_registry.ts";
export * from "./record_store.ts";
export * from "./registry.ts";
export * from "./registry_guard.ts";
export * from "./workspace_pool.ts";
