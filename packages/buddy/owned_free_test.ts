import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DoubleFreeError } from "@allot/core";
import { BuddyAllocator } from "./buddy_allocator.ts";

function fill(buddy: BuddyAllocator, address: number, n: number, v: number) {
  buddy.bytes(address, n).fill(v);
}

describe("BuddyAllocator: stale ownership between DataPtr and free()", () => {
  it("a raw free of a DataPtr's block cannot free the next owner's block", () => {
    const buddy = new BuddyAllocator();
    const p = buddy.allocate(256);
    const address = p.getContext() as number;
    try {
      buddy.free(address); // the misuse
    } catch {
      // refused (the fix)
    }
    const q = buddy.alloc(256);
    fill(buddy, q, 256, 0xab);
    p.release();
    // q's block must still be live and untouched
    assert.equal(buddy.byteLengthOf(q), 256);
    const r = buddy.alloc(256);
    fill(buddy, r, 256, 0xcd);
    assert.notEqual(r, q, "q's block was freed by p.release()");
    assert.ok(buddy.bytes(q, 256).every((b) => b === 0xab));
    buddy.free(q);
    buddy.free(r);
    assert.equal(buddy.stats().allocatedBytes.current, 0);
  });

  it("refuses a raw free of a block a live DataPtr owns; nothing changes", () => {
    const buddy = new BuddyAllocator();
    const p = buddy.allocate(256);
    const address = p.getContext() as number;
    const before = JSON.stringify(buddy.stats());
    assert.throws(
      () => buddy.free(address),
      (e: unknown) =>
        e instanceof DoubleFreeError &&
        /owned by a live DataPtr/.test(e.message),
    );
    assert.throws(() => buddy.rawDeallocate(address), DoubleFreeError);
    assert.throws(() => buddy.rawDeleter()(address), DoubleFreeError);
    assert.equal(JSON.stringify(buddy.stats()), before);
    p.release();
    assert.equal(buddy.stats().allocatedBytes.current, 0);
  });

  it("a large block owned by a DataPtr is refused too", () => {
    const buddy = new BuddyAllocator();
    const p = buddy.allocate(3 << 20);
    const address = p.getContext() as number;
    assert.ok(address < 0, "a large block");
    const before = JSON.stringify(buddy.stats());
    assert.throws(() => buddy.free(address), DoubleFreeError);
    assert.equal(JSON.stringify(buddy.stats()), before);
    p.release();
    assert.equal(buddy.stats().allocatedBytes.current, 0);
  });

  it("double release of one DataPtr frees once", () => {
    const buddy = new BuddyAllocator();
    const p = buddy.allocate(256);
    p.release();
    const q = buddy.allocate(256);
    p.release();
    p.clear();
    assert.equal(buddy.stats().allocatedBytes.current, 256);
    assert.equal(q.released, false);
    q.release();
    assert.equal(buddy.stats().allocatedBytes.current, 0);
  });

  it("a context taken with releaseContext is freed by the raw verb", () => {
    const buddy = new BuddyAllocator();
    const p = buddy.allocate(256);
    const address = p.releaseContext() as number;
    buddy.free(address);
    assert.equal(buddy.stats().allocatedBytes.current, 0);
    const raw = buddy.rawAllocate(16);
    buddy.rawDeallocate(raw);
    assert.equal(buddy.stats().allocatedBytes.current, 0);
  });

  it("a DataPtr of allocator A never frees into B", () => {
    const a = new BuddyAllocator();
    const b = new BuddyAllocator();
    const pa = a.allocate(256);
    const pb = b.allocate(256);
    assert.equal(pa.getContext(), pb.getContext()); // same address numbers
    // B refuses A's address while B's own DataPtr owns that address.
    assert.throws(() => b.free(pa.getContext() as number), DoubleFreeError);
    pa.release();
    assert.equal(a.stats().allocatedBytes.current, 0);
    assert.equal(b.stats().allocatedBytes.current, 256);
    pb.release();
    assert.equal(b.stats().allocatedBytes.current, 0);
  });

  it("model: raw and owned frees interleaved keep byte patterns and stats", () => {
    const buddy = new BuddyAllocator({ strict: true });
    const owned = new Map<number, ReturnType<BuddyAllocator["allocate"]>>();
    const raw = new Map<number, number>();
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) >>> 0) % n;
    for (let step = 0; step < 2000; step++) {
      const op = rnd(5);
      if (op === 0) {
        const p = buddy.allocate(8 + rnd(200));
        const a = p.getContext() as number;
        fill(buddy, a, p.byteLength, step & 0xff);
        owned.set(a, p);
        raw.set(a, step & 0xff);
      } else if (op === 1) {
        const n = 8 + rnd(200);
        const a = buddy.alloc(n);
        fill(buddy, a, n, step & 0xff);
        raw.set(a, step & 0xff);
      } else if (raw.size > 0) {
        const keys = [...raw.keys()];
        const a = keys[rnd(keys.length)];
        const p = owned.get(a);
        if (op === 2 && p !== undefined) {
          // the misuse: raw free of an owned block is refused
          assert.throws(() => buddy.free(a), DoubleFreeError);
        } else if (p !== undefined) {
          p.release();
          owned.delete(a);
          raw.delete(a);
        } else {
          buddy.free(a);
          raw.delete(a);
        }
      }
      for (const [a, v] of raw) {
        const n = owned.get(a)?.byteLength ?? 8;
        assert.ok(buddy.bytes(a, n).every((b) => b === v), `step ${step}`);
      }
    }
    for (const p of owned.values()) p.release();
    for (const a of raw.keys()) if (!owned.has(a)) buddy.free(a);
    assert.equal(buddy.stats().allocatedBytes.current, 0);
  });
});
