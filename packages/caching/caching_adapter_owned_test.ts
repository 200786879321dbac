import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DoubleFreeError } from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import { HostSource } from "./_test_host_source.ts";
import { CachingAllocatorAdapter } from "./caching_allocator_adapter.ts";

const bytes = (p: { memory: ArrayBuffer; byteOffset: number }) =>
  new Uint8Array(p.memory, p.byteOffset, 256);

describe("CachingAllocatorAdapter: one owner per block", () => {
  it("a raw free of a DataPtr's block never lets its release free the next owner's", () => {
    const caching = new CachingAllocator(new HostSource());
    const adapter = new CachingAllocatorAdapter(caching);
    const p = adapter.allocate(256);
    caching.free(p.getContext()!); // the misuse
    const q = adapter.allocate(256);
    bytes(q).fill(0xab);
    assert.throws(() => p.release(), DoubleFreeError);
    const r = adapter.allocate(256);
    bytes(r).fill(0xcd);
    assert.ok(bytes(q).every((b) => b === 0xab));
    assert.equal(caching.memoryStats().allocation.all.current, 2);
    q.release();
    r.release();
    assert.equal(caching.memoryStats().allocation.all.current, 0);
  });

  it("double release frees once; a block of A is refused by B", () => {
    const a = new CachingAllocatorAdapter(
      new CachingAllocator(new HostSource()),
    );
    const b = new CachingAllocatorAdapter(
      new CachingAllocator(new HostSource()),
    );
    const p = a.allocate(256);
    p.release();
    const q = a.allocate(256);
    p.release();
    assert.equal(a.caching.memoryStats().allocation.all.current, 1);
    const context = q.releaseContext()!;
    assert.throws(() => b.rawDeallocate(context));
    assert.equal(a.caching.memoryStats().allocation.all.current, 1);
    a.rawDeallocate(context);
    assert.equal(a.caching.memoryStats().allocation.all.current, 0);
  });
});
