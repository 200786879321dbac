import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  DoubleFreeError,
  InvalidArgumentError,
  OutOfMemoryError,
} from "@allot/core";
import { SystemAllocator } from "@allot/cpu";
import { BuddyAllocator } from "./buddy_allocator.ts";
import { modelRuns } from "../core/_test_faults.ts";

function pow2(units: number): number {
  let p = 1;
  while (p < units) p *= 2;
  return p;
}

interface Live {
  address: number;
  byteLength: number;
  tag: number;
}

function bytesOf(buddy: BuddyAllocator, block: Live): Uint8Array {
  return buddy.bytes(block.address, block.byteLength);
}

describe("BuddyAllocator", () => {
  it("BuddyAllocator.alloc() splits a pool into power-of-two blocks and free() merges them", () => {
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 1024,
      maxPoolByteLength: 1024,
      minBlockByteLength: 64,
    });
    const a = buddy.alloc(64);
    const b = buddy.alloc(64);
    const c = buddy.alloc(200);
    assert.deepEqual(
      [a, b, c].map((x) => buddy.byteOffsetOf(x)),
      [0, 64, 256],
    );
    assert.equal(buddy.byteLengthOf(c), 256);
    assert.equal(buddy.allocatedBytes, 64 + 64 + 256);
    assert.equal(buddy.largestFreeBytes, 512);
    buddy.free(a);
    buddy.free(b);
    buddy.free(c);
    assert.equal(buddy.largestFreeBytes, 1024);
    assert.equal(buddy.alloc(1024), 0);
  });

  it("BuddyAllocator grows by pools up to the maximum and then refuses", () => {
    const system = new SystemAllocator();
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 4096,
      maxPoolByteLength: 3 * 4096,
      backing: system,
    });
    const blocks = [buddy.alloc(4096), buddy.alloc(4096), buddy.alloc(4096)];
    assert.equal(buddy.poolCount, 3);
    assert.equal(system.allocatedBytes, 3 * 4096);
    const before = buddy.stats();
    assert.throws(
      () => buddy.alloc(64),
      (e: unknown) =>
        e instanceof OutOfMemoryError && e.requestedBytes === 64 &&
        e.largestFreeBytes === 0 && /3 pools of 4096 bytes/.test(e.message),
    );
    assert.deepEqual(buddy.stats(), before);
    buddy.free(blocks[1]);
    assert.equal(buddy.alloc(64) >= 0, true); // still works
    buddy.free(blocks[0]);
    assert.equal(buddy.trim(), 4096);
    assert.equal(system.allocatedBytes, 2 * 4096);
  });

  it("BuddyAllocator turns a refusal of the backing allocator into an OutOfMemoryError and changes nothing", () => {
    const system = new SystemAllocator({ capacityBytes: 2 * 4096 });
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 4096,
      maxPoolByteLength: 8 * 4096,
      minBlockByteLength: 64,
      backing: system,
    });
    const blocks = [buddy.alloc(4096), buddy.alloc(100)];
    const before = buddy.stats();
    assert.throws(
      () => buddy.alloc(4096),
      (e: unknown) =>
        e instanceof OutOfMemoryError && e.requestedBytes === 4096 &&
        /the backing allocator refused/.test(e.message),
    );
    assert.deepEqual(buddy.stats(), before);
    assert.equal(system.allocatedBytes, 2 * 4096);
    buddy.free(blocks[1]);
    assert.equal(buddy.largestFreeBytes, 4096);
    const c = buddy.alloc(4096); // the freed pool, merged back whole
    assert.equal(buddy.byteLengthOf(c), 4096);
    buddy.free(c);
    buddy.free(blocks[0]);
    assert.equal(buddy.trim(), 2 * 4096);
    assert.equal(system.allocatedBytes, 0);
  });

  it("BuddyAllocator sends requests longer than a pool to the backing allocator", () => {
    const system = new SystemAllocator();
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 4096,
      backing: system,
    });
    const big = buddy.alloc(10000);
    assert.ok(big < 0);
    assert.equal(buddy.byteLengthOf(big), 10000);
    assert.equal(buddy.allocatedBytes, 10000);
    buddy.view(big, Uint8Array).fill(1);
    buddy.free(big);
    assert.throws(() => buddy.free(big), DoubleFreeError);
    assert.equal(system.allocatedBytes, 0);
  });

  it("BuddyAllocator refuses bad input and foreign or freed addresses and changes nothing", () => {
    const buddy = new BuddyAllocator({ initialPoolByteLength: 4096 });
    const a = buddy.alloc(100);
    const before = buddy.stats();
    for (const bad of [-1, 1.5, NaN, Infinity, "9" as unknown as number]) {
      assert.throws(() => buddy.alloc(bad), InvalidArgumentError);
    }
    assert.throws(() => buddy.free(NaN), InvalidArgumentError);
    assert.throws(() => buddy.free(a + 64), DoubleFreeError);
    assert.throws(() => buddy.free(a + 1), DoubleFreeError);
    assert.throws(() => buddy.free(1 << 30), DoubleFreeError);
    assert.throws(() => buddy.free(-64), DoubleFreeError);
    assert.deepEqual(buddy.stats(), before);
    buddy.free(a);
    assert.throws(() => buddy.free(a), DoubleFreeError);
    assert.throws(
      () =>
        new BuddyAllocator({
          initialPoolByteLength: 4096,
          maxPoolByteLength: 100,
        }),
      InvalidArgumentError,
    );
    assert.throws(
      () => new BuddyAllocator({ minBlockByteLength: 48 }),
      InvalidArgumentError,
    );
  });

  it("BuddyAllocator.allocate() returns pointers that free their block on release", () => {
    const buddy = new BuddyAllocator({
      initialPoolByteLength: 4096,
      minBlockByteLength: 64,
    });
    const ptr = buddy.allocate(100);
    assert.equal(ptr.byteLength, 100);
    assert.ok(ptr.device.equals(buddy.device));
    assert.equal(buddy.allocatedBytes, 128);
    ptr.release();
    assert.equal(buddy.allocatedBytes, 0);
    const raw = buddy.rawAllocate(10);
    buddy.rawDeallocate(raw);
    assert.throws(() => buddy.rawDeallocate(raw), DoubleFreeError);
  });

  it("BuddyAllocator keeps its invariants over long random sequences with trims", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(16, 64),
        fc.array(
          fc.tuple(
            fc.nat(10),
            fc.oneof(fc.nat(300), fc.nat(5000), fc.nat(20000)),
            fc.nat(),
          ),
          // 1,000 runs in CI (modelRuns) of 20-100 ops (60 runs of 50-1,000
          // before); the nightly task runs more of them
          { minLength: 20, maxLength: 100, size: "max" },
        ),
        (min, ops) => {
          const pool = 8192;
          const buddy = new BuddyAllocator({
            initialPoolByteLength: pool,
            maxPoolByteLength: 4 * pool,
            minBlockByteLength: min,
          });
          const live: Live[] = [];
          let tag = 1;
          for (const [kind, byteLength, pick] of ops) {
            if (kind === 10) {
              // Fully free pools go back; the rest stays as it was.
              const pools = buddy.poolCount;
              const freed = buddy.trim();
              assert.equal(freed % pool, 0);
              assert.equal(buddy.poolCount, pools - freed / pool);
              for (const block of live) {
                assert.ok(bytesOf(buddy, block).every((x) => x === block.tag));
              }
            } else if (kind < 5 || live.length === 0) {
              try {
                const address = buddy.alloc(byteLength);
                const block = { address, byteLength, tag: tag++ & 255 || 1 };
                bytesOf(buddy, block).fill(block.tag);
                live.push(block);
              } catch (error) {
                assert.ok(error instanceof OutOfMemoryError);
                // Only refused when no free block of the order exists and
                // no pool can be added (a 0-byte request still takes the
                // smallest block).
                assert.ok(
                  Math.max(byteLength, 1) > buddy.largestFreeBytes &&
                    buddy.poolCount * pool === 4 * pool,
                );
              }
            } else {
              const [block] = live.splice(pick % live.length, 1);
              assert.ok(bytesOf(buddy, block).every((x) => x === block.tag));
              buddy.free(block.address);
            }
            // No overlap within a memory; blocks aligned to their length.
            const spans = live.filter((b) => b.address >= 0).map((b) => ({
              memory: buddy.memoryOf(b.address),
              start: buddy.byteOffsetOf(b.address),
              length: buddy.byteLengthOf(b.address),
            })).sort((x, y) => x.start - y.start);
            for (const s of spans) {
              assert.equal(s.start % s.length, 0);
              assert.equal(s.start % min, 0);
            }
            for (let i = 0; i < spans.length; i++) {
              for (let j = i + 1; j < spans.length; j++) {
                if (spans[i].memory !== spans[j].memory) continue;
                assert.ok(spans[i].start + spans[i].length <= spans[j].start);
              }
            }
            const used = live.reduce(
              (s, b) =>
                s +
                (b.byteLength > pool
                  ? b.byteLength
                  : pow2(Math.max(1, Math.ceil(b.byteLength / min))) * min),
              0,
            );
            assert.equal(buddy.allocatedBytes, used);
            assert.ok(buddy.poolCount * pool <= 4 * pool);
            buddy.checkIntegrity();
          }
          for (const block of live) {
            assert.ok(bytesOf(buddy, block).every((x) => x === block.tag));
            buddy.free(block.address);
          }
          assert.equal(buddy.allocatedBytes, 0);
          if (buddy.poolCount > 0) assert.equal(buddy.largestFreeBytes, pool);
          buddy.trim();
          assert.equal(buddy.reservedBytes, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
