/**
 * Streams whose `id` is not stable: a getter that answers differently from
 * one read to the next, or an id changed after the stream was used. Pools
 * are keyed by the id, so the caching allocator refuses such a stream with
 * an {@linkcode InvalidArgumentError} in `allocate`, `allocateAsync`,
 * `recordStream` and the adapter, and the refused call changes nothing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  COMPLETED_FENCE,
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
  type Stream,
} from "@allot/core";
import { CachingAllocator, CachingAllocatorAdapter } from "./mod.ts";
import { assertRefused } from "../core/_test_hostile.ts";

const KiB = 1024;

function setup() {
  const source = new MockSegmentSource({ capacityBytes: 64 << 20 });
  const a = new CachingAllocator(source);
  const snapshot = () => {
    a.validate();
    return {
      stats: a.memoryStats(),
      segments: a.snapshot().segments,
      reserved: source.reservedBytes,
    };
  };
  return { a, source, snapshot };
}

/** A stream whose id getter returns the next value of `ids` on each read. */
function shifting(ids: readonly number[]): Stream {
  let i = 0;
  return {
    get id() {
      return ids[Math.min(i++, ids.length - 1)];
    },
    fence: () => COMPLETED_FENCE,
  };
}

/** A stream whose id can be changed after it was used. */
function mutable(id: number): Stream & { id: number } {
  return { id, fence: () => COMPLETED_FENCE };
}

const getter = (error: unknown) =>
  error instanceof InvalidArgumentError &&
  /id must be a data property that can be made read-only, not a getter/.test(
    error.message,
  );
describe("caching: stream ids must be stable", () => {
  it("a getter that answers differently on each read is refused everywhere; nothing changes", async () => {
    const { a, snapshot } = setup();
    using kept = a.allocate(4 * KiB); // something to compare
    const calls: [string, (s: Stream) => unknown][] = [
      ["allocate", (s) => a.allocate(KiB, { stream: s })],
      ["allocate (large)", (s) => a.allocate(4 << 20, { stream: s })],
      ["recordStream", (s) => a.recordStream(kept, s)],
      ["block.recordStream", (s) => kept.recordStream(s)],
      ["new CachingAllocatorAdapter", (s) => new CachingAllocatorAdapter(a, s)],
    ];
    for (const [label, call] of calls) {
      assertRefused(label, () => call(shifting([7, 8, 9, 10])), {
        error: InvalidArgumentError,
        snapshot,
      });
      assert.throws(() => call(shifting([7, 8, 9])), getter, label);
      assert.throws(() => call(shifting([7])), getter, label); // even stable
    }
    const before = snapshot();
    await assert.rejects(
      a.allocateAsync(KiB, { stream: shifting([7, 8, 9]) }),
      getter,
    );
    assert.deepEqual(snapshot(), before);
    // The block is untouched: freed on its own stream, straight back.
    kept.release();
    assert.equal(a.memoryStats().allocatedBytes.all.current, 0);
  });

  it("the id is made read-only when first used: it cannot change while blocks use it", () => {
    const { a } = setup();
    const s = mutable(7);
    const block = a.allocate(KiB, { stream: s });
    assert.throws(() => {
      s.id = 8;
    }, TypeError);
    assert.throws(
      () => Object.defineProperty(s, "id", { value: 8 }),
      TypeError,
    );
    assert.equal(s.id, 7);
    block.release();
    a.validate();
    using again = a.allocate(KiB, { stream: s });
    assert.equal(again.stream, s); // the caller's own object, kept
    // An inherited id is shadowed by a read-only own one.
    const proto = { id: 9, fence: () => COMPLETED_FENCE };
    const child = Object.create(proto) as Stream & { id: number };
    a.allocate(KiB, { stream: child }).release();
    assert.throws(() => {
      child.id = 10;
    }, TypeError);
    proto.id = 11; // the prototype's changes; the stream's does not
    assert.equal(child.id, 9);
    assert.equal(a.allocate(KiB, { stream: child }).stream, child);
    a.validate();
  });

  it("plain and inherited data ids are accepted, and the stream object is kept", () => {
    const { a } = setup();
    class Inherited {
      fence() {
        return COMPLETED_FENCE;
      }
    }
    Object.defineProperty(Inherited.prototype, "id", { value: 41 });
    const frozen = Object.freeze({ id: 42, fence: () => COMPLETED_FENCE });
    // No own id can be added to a non-extensible object: taken only when
    // the inherited id cannot change either.
    const sealedProto = Object.freeze({ id: 43, fence: () => COMPLETED_FENCE });
    const sealed = Object.preventExtensions(Object.create(sealedProto));
    const open = { id: 44, fence: () => COMPLETED_FENCE };
    const stuck = Object.preventExtensions(Object.create(open)) as Stream;
    assert.throws(() => a.allocate(KiB, { stream: stuck }), getter);
    open.id = 45; // why: this would change the stream's id under the allocator
    assert.equal(stuck.id, 45);
    for (
      const s of [
        new ManualStream(),
        new Inherited() as Stream,
        frozen,
        sealed as Stream,
      ]
    ) {
      using b = a.allocate(KiB, { stream: s });
      assert.equal(b.stream, s);
      using c = a.allocate(KiB);
      c.recordStream(s);
      new CachingAllocatorAdapter(a, s).allocate(KiB).release();
    }
    a.validate();
  });

  it("model: before first use the id may change; from then on it is read-only and every call is taken", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("set" as const), id: fc.nat(3) }),
      fc.record({ kind: fc.constant("allocate" as const), id: fc.constant(0) }),
      fc.record({ kind: fc.constant("record" as const), id: fc.constant(0) }),
      fc.record({ kind: fc.constant("free" as const), id: fc.constant(0) }),
    );
    fc.assert(
      fc.property(fc.nat(3), fc.array(op, { maxLength: 16 }), (id0, ops) => {
        const { a } = setup();
        const s = mutable(id0);
        let first: number | undefined;
        const live = [a.allocate(KiB)];
        for (const o of ops) {
          if (o.kind === "set") {
            if (first === undefined) s.id = o.id;
            else {
              assert.throws(() => {
                s.id = o.id;
              }, TypeError);
            }
          } else if (o.kind === "allocate") {
            live.push(a.allocate(KiB, { stream: s }));
          } else if (o.kind === "record") {
            a.recordStream(live[live.length - 1], s);
          } else if (live.length > 1) {
            live.shift()!.release();
            continue;
          } else continue;
          first ??= o.kind === "set" ? undefined : s.id;
          if (first !== undefined) assert.equal(s.id, first);
          a.validate();
        }
        for (const b of live) b.release();
        a.validate();
        assert.equal(a.memoryStats().allocatedBytes.all.current, 0);
      }),
      { numRuns: 200 },
    );
  });
});
