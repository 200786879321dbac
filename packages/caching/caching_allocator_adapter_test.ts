import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, ManualStream } from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import { HostSource } from "./_test_host_source.ts";
import { PYTORCH_SEGMENTS } from "./caching_options.ts";
import { CachingAllocatorAdapter } from "./caching_allocator_adapter.ts";

describe("CachingAllocatorAdapter", () => {
  it("CachingAllocatorAdapter.allocate() returns DataPtrs into segment memory that free their block", () => {
    const caching = new CachingAllocator(new HostSource(), PYTORCH_SEGMENTS);
    const allocator = new CachingAllocatorAdapter(caching);
    const a = allocator.allocate(100);
    const b = allocator.allocate(100);
    assert.equal(a.memory, b.memory); // same 2 MiB segment
    assert.equal(b.byteOffset - a.byteOffset, 512);
    new Uint8Array(a.memory, a.byteOffset, 100).fill(7);
    const c = allocator.clone(a);
    assert.deepEqual(
      [...new Uint8Array(c.memory, c.byteOffset, 3)],
      [7, 7, 7],
    );
    assert.equal(caching.memoryStats().allocation.all.current, 3);
    for (const p of [a, b, c]) p.release();
    assert.equal(caching.allocatedBytes, 0);
    caching.validate();
  });

  it("CachingAllocatorAdapter gives zero-byte pointers that own nothing", () => {
    const caching = new CachingAllocator(new HostSource());
    const allocator = new CachingAllocatorAdapter(caching);
    const p = allocator.allocate(0);
    assert.equal(p.byteLength, 0);
    assert.equal(p.owns, false);
    p.release();
    assert.equal(caching.memoryStats().numDeviceAlloc, 0);
  });

  it("CachingAllocatorAdapter supports the raw interface and a stream", () => {
    const caching = new CachingAllocator(new HostSource());
    const stream = new ManualStream();
    const allocator = new CachingAllocatorAdapter(caching, stream);
    const block = allocator.rawAllocate(4096);
    assert.equal(block.stream, stream);
    assert.equal(caching.allocatedBytes, 4096);
    allocator.rawDeallocate(block);
    assert.equal(caching.allocatedBytes, 0);
    assert.throws(() => allocator.rawDeallocate(block), /already freed/);
  });
  it("CachingAllocatorAdapter.rawDeallocate() refuses a block of another caching allocator and junk, freeing nothing", () => {
    const caching = new CachingAllocator(new HostSource());
    const other = new CachingAllocator(new HostSource());
    const allocator = new CachingAllocatorAdapter(caching);
    const foreign = other.allocate(4096);
    const mine = allocator.rawAllocate(4096);
    assert.throws(
      () => allocator.rawDeallocate(foreign),
      (e: Error) =>
        e instanceof InvalidArgumentError &&
        /^Cannot free CachedBlock\(.*\): it is not a block of this adapter's CachingAllocator$/
          .test(e.message),
    );
    assert.equal(other.allocatedBytes, 4096);
    for (const junk of [{}, null, undefined, 42, "block", [], () => {}]) {
      assert.throws(
        () => allocator.rawDeallocate(junk as never),
        (e: Error) =>
          e instanceof InvalidArgumentError &&
          !/undefined|an bytes/.test(
            e.message.replace(/^Cannot free undefined/, ""),
          ),
      );
    }
    assert.throws(
      () => allocator.rawDeallocate({} as never),
      /^InvalidArgumentError: Cannot free an object: it is not a block/,
    );
    assert.equal(caching.allocatedBytes, 4096);
    allocator.rawDeallocate(mine);
    foreign.release();
    caching.validate();
    other.validate();
  });
});
