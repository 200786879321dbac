/**
 * Model test of the pooling core under faults: random allocate / free /
 * fence / synchronize / emptyCache sequences, through both the handle and
 * the id API, with fences that throw, complete twice (flip back) or never,
 * and segment sources that throw or return short segments. Invariants: no
 * overlap, no block reused before its fence completed, stats equal a
 * recount, a byte pattern written into every live block is intact before
 * each free, and everything goes back at the end.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type Fence,
  FenceError,
  MockSegmentSource,
  type Segment,
  type SegmentSource,
  type Stream,
} from "@allot/core";
import { CachingAllocator } from "./caching_allocator.ts";
import { CachingOutOfMemoryError, SegmentSourceError } from "./errors.ts";
import { countFault, faultsInjected, modelRuns } from "../core/_test_faults.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

/** A stream whose fences the test completes in order; faults on request. */
class FaultyStream implements Stream {
  readonly id: number;
  submitted = 0;
  done = 0;
  /** Reads of `completed` that throw, from now on. */
  throwing = 0;
  /** Fences that claim completion early once, then go back (lie). */
  flicker = false;
  constructor(id: number) {
    this.id = id;
  }
  fence(): Fence {
    const seq = ++this.submitted;
    // deno-lint-ignore no-this-alias
    const stream = this;
    return {
      get completed() {
        if (stream.throwing > 0) {
          stream.throwing--;
          countFault();
          throw new Error("fence lost");
        }
        return stream.done >= seq;
      },
      wait: () => {
        stream.done = Math.max(stream.done, seq);
        return Promise.resolve();
      },
    };
  }
}

type MockMem = {
  id: number;
  bytes: Uint8Array | undefined;
  hostVisible: boolean;
};

/** A source that may throw or hand out a short segment on request. */
class FaultySource implements
  SegmentSource<
    { id: number; bytes: Uint8Array | undefined; hostVisible: boolean }
  > {
  readonly mock = new MockSegmentSource({
    capacityBytes: 2 * MiB,
    backed: true,
  });
  readonly device = this.mock.device;
  readonly alignment = this.mock.alignment;
  readonly maxSegmentByteLength = this.mock.maxSegmentByteLength;
  readonly capacityBytes = this.mock.capacityBytes;
  fault: "none" | "throw" | "short" = "none";
  #shortened = new Map<object, Segment<MockMem>>();
  tryAllocateSegment(byteLength: number) {
    const fault = this.fault;
    this.fault = "none";
    if (fault === "throw") {
      countFault();
      throw new Error("device fault");
    }
    const seg = this.mock.tryAllocateSegment(byteLength);
    if (seg !== undefined && fault === "short") {
      countFault();
      const short = { ...seg, byteLength: byteLength - 512 };
      this.#shortened.set(short, seg);
      return short;
    }
    return seg;
  }
  freeSegment(
    segment: Segment<
      { id: number; bytes: Uint8Array | undefined; hostVisible: boolean }
    >,
  ) {
    // the allocator must give a refused segment back
    this.mock.freeSegment(this.#shortened.get(segment) ?? segment);
    this.#shortened.delete(segment);
  }
}

type Op =
  | { kind: "alloc"; size: number; stream: number; byId: boolean }
  | { kind: "free"; index: number; uses: number }
  | { kind: "complete"; stream: number; count: number }
  | { kind: "throwFences"; stream: number; count: number }
  | { kind: "sync" }
  | { kind: "emptyCache" }
  | { kind: "sourceFault"; fault: "throw" | "short" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant("alloc" as const),
      size: fc.oneof(
        fc.integer({ min: 0, max: 2 * KiB }),
        fc.integer({ min: 2 * KiB, max: 96 * KiB }),
      ),
      stream: fc.integer({ min: 0, max: 1 }),
      byId: fc.boolean(),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("free" as const),
      index: fc.nat(),
      uses: fc.integer({ min: 0, max: 3 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("complete" as const),
      stream: fc.integer({ min: 0, max: 1 }),
      count: fc.integer({ min: 1, max: 4 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("throwFences" as const),
      stream: fc.integer({ min: 0, max: 1 }),
      count: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "sync" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "emptyCache" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("sourceFault" as const),
      fault: fc.constantFrom("throw" as const, "short" as const),
    }),
  },
);

interface Live {
  free(): void;
  memory: { id: number; bytes: Uint8Array | undefined };
  start: number;
  end: number;
  pattern: number;
  recordStreams(streams: FaultyStream[]): void;
  byId: boolean;
}

interface Waiting {
  memory: { id: number };
  start: number;
  end: number;
  /** [stream, seq]: released once every stream has done seq. */
  waits: [FaultyStream, number][];
}

async function run(ops: Op[]): Promise<void> {
  const source = new FaultySource();
  // strict mode (junk fill, validate on every call) in half the runs
  // Pools scaled down 32x (backed segments are real bytes to fill).
  const allocator = new CachingAllocator(source, {
    strict: ops.length % 2 === 0,
    smallRequestMaxByteLength: 32 * KiB,
    smallSegmentByteLength: 64 * KiB,
    largeSegmentByteLength: 640 * KiB,
    ownSegmentMinByteLength: 320 * KiB,
    largeRoundByteLength: 64 * KiB,
  });
  const streams = [new FaultyStream(9001), new FaultyStream(9002)];
  const live: Live[] = [];
  let waiting: Waiting[] = [];
  let nextPattern = 1;
  const overlaps = (
    a: { memory: { id: number }; start: number; end: number },
    b: { memory: { id: number }; start: number; end: number },
  ) => a.memory.id === b.memory.id && a.start < b.end && b.start < a.end;
  for (const op of ops) {
    waiting = waiting.filter((w) => !w.waits.every(([s, q]) => s.done >= q));
    if (op.kind === "alloc") {
      let entry: Live;
      try {
        if (op.byId) {
          const id = allocator.allocateId(op.size);
          const start = allocator.blockByteOffset(id);
          entry = {
            free: () => allocator.freeById(id),
            memory: allocator.blockMemory(id) as Live["memory"],
            start,
            end: start + Math.max(op.size, 1),
            pattern: 0,
            recordStreams: () => {},
            byId: true,
          };
        } else {
          const block = allocator.allocate(op.size);
          entry = {
            free: () => block.release(),
            memory: block.memory as Live["memory"],
            start: block.byteOffset,
            end: block.byteOffset + Math.max(op.size, 1),
            pattern: 0,
            recordStreams: (ss) => {
              for (const s of ss) block.recordStream(s);
            },
            byId: false,
          };
        }
      } catch (e) {
        assert.ok(
          e instanceof CachingOutOfMemoryError ||
            e instanceof SegmentSourceError || e instanceof FenceError,
          String(e),
        );
        allocator.validate();
        continue;
      }
      for (const o of live) {
        assert.ok(!overlaps(o, entry), "live blocks overlap");
      }
      for (const w of waiting) {
        assert.ok(!overlaps(w, entry), "block reused before its fence");
      }
      entry.pattern = (nextPattern++ % 250) + 1;
      entry.memory.bytes!.fill(entry.pattern, entry.start, entry.end);
      live.push(entry);
    } else if (op.kind === "free") {
      if (live.length === 0) continue;
      const [entry] = live.splice(op.index % live.length, 1);
      const bytes = entry.memory.bytes!.subarray(entry.start, entry.end);
      assert.ok(bytes.every((x) => x === entry.pattern), "block corrupted");
      // Only the handle API records streams.
      const uses = entry.byId
        ? []
        : streams.filter((_, i) => (op.uses >> i) & 1);
      entry.recordStreams(uses);
      entry.free();
      const waits = uses.map((s): [FaultyStream, number] => [s, s.submitted]);
      // A fence already done is no wait.
      if (waits.some(([s, q]) => s.done < q)) waiting.push({ ...entry, waits });
    } else if (op.kind === "complete") {
      const s = streams[op.stream];
      s.done = Math.min(s.submitted, s.done + op.count);
    } else if (op.kind === "throwFences") {
      streams[op.stream].throwing += op.count;
    } else if (op.kind === "sync") {
      for (const s of streams) s.throwing = 0;
      await allocator.synchronize();
      // synchronize waited: every fence taken so far is done
    } else if (op.kind === "emptyCache") {
      try {
        allocator.emptyCache();
      } catch (e) {
        assert.ok(e instanceof FenceError, String(e));
      }
    } else source.fault = op.fault;
    allocator.validate();
    const stats = allocator.memoryStats();
    assert.equal(stats.reservedBytes.all.current, source.mock.reservedBytes);
    assert.equal(stats.allocation.all.current, live.length);
  }
  for (const entry of live) {
    const bytes = entry.memory.bytes!.subarray(entry.start, entry.end);
    assert.ok(bytes.every((x) => x === entry.pattern), "block corrupted");
    entry.free();
  }
  for (const s of streams) {
    s.throwing = 0;
    s.done = s.submitted;
  }
  await allocator.synchronize();
  allocator.emptyCache();
  assert.equal(allocator.pendingFreeCount, 0);
  assert.equal(source.mock.reservedBytes, 0, "everything returned");
  allocator.validate();
}

describe("CachingAllocator under faults", () => {
  const start = faultsInjected();
  after(() => {
    console.log(
      `caching faults: ${faultsInjected() - start} faults injected`,
    );
  });
  it("CachingAllocator keeps blocks disjoint, intact and fence-ordered with throwing fences and lying sources (model)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 30 }), run),
      { numRuns: modelRuns() },
    );
  });
});
