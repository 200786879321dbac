// The handle-less block pair behind @allot/webgpu's GpuCachingAllocator
// (`_takeBlock` / `_giveBlock`): a model test against the handle API on a
// twin allocator (the same places, the same stats, every byte back), and
// the guard of `_giveBlock`.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { DoubleFreeError, LeakDetector, MockSegmentSource } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import {
  type _BlockHooks,
  type _BlockPlace,
  type CachedBlock,
  CachingAllocator,
} from "./caching_allocator.ts";

const hooks = (CachingAllocator as unknown as Record<symbol, _BlockHooks>)[
  Symbol.for("allot.caching.blockHooks")
];
const _takeBlock = hooks.take;
const _giveBlock = hooks.give;

type Op = { alloc: number } | { free: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      alloc: fc.oneof(
        fc.integer({ min: 0, max: 4096 }),
        fc.integer({ min: 1, max: 12 * 2 ** 20 }),
      ),
    }),
  },
  { weight: 2, arbitrary: fc.record({ free: fc.nat() }) },
);

describe("CachingAllocator _takeBlock / _giveBlock", () => {
  it("places, counts and frees like allocate() / release() (model)", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
        const bare = new CachingAllocator(new MockSegmentSource());
        const twin = new CachingAllocator(new MockSegmentSource());
        const blocks: _BlockPlace<unknown>[] = [];
        const handles: CachedBlock[] = [];
        for (const op of ops) {
          if ("alloc" in op) {
            const b = _takeBlock(bare, op.alloc)!;
            const h = twin.allocate(op.alloc);
            assert.equal(b.segment.raw.byteOffset + b.offset, h.byteOffset);
            assert.equal(b.size, h.blockByteLength);
            blocks.push(b);
            handles.push(h);
          } else if (blocks.length > 0) {
            const i = op.free % blocks.length;
            _giveBlock(bare, blocks.splice(i, 1)[0]);
            handles.splice(i, 1)[0].release();
          }
          bare.validate();
          assert.deepEqual(bare.stats(), twin.stats());
        }
        for (const b of blocks) _giveBlock(bare, b);
        for (const h of handles) h.release();
        bare.validate();
        assert.equal(bare.allocatedBytes, 0);
        assert.deepEqual(bare.stats(), twin.stats());
        bare.emptyCache();
        assert.equal(bare.reservedBytes, 0);
      }),
      { numRuns: modelRuns() },
    );
  });

  it("refuses what is no live block from _takeBlock, changing nothing", () => {
    const allocator = new CachingAllocator(new MockSegmentSource());
    const b = _takeBlock(allocator, 1000)!;
    const id = allocator.allocateId(1000);
    const before = allocator.stats();
    for (const bad of [{}, null, 42, { offset: 0, size: 512, segment: {} }]) {
      assert.throws(
        () => _giveBlock(allocator, bad as unknown as _BlockPlace<unknown>),
        DoubleFreeError,
      );
    }
    assert.deepEqual(allocator.stats(), before);
    _giveBlock(allocator, b);
    assert.throws(() => _giveBlock(allocator, b), DoubleFreeError);
    allocator.freeById(id);
    allocator.validate();
    assert.equal(allocator.allocatedBytes, 0);
  });

  it("leaves handles to allocate() while a leak detector watches them", () => {
    const allocator = new CachingAllocator(new MockSegmentSource(), {
      leakDetector: new LeakDetector(),
    });
    assert.equal(_takeBlock(allocator, 1000), undefined);
    assert.equal(allocator.allocatedBytes, 0);
  });
});
