/**
 * Fourth outside-in review of `@allot/caching`: the default pool's held-peak
 * give-back and cross-pool segment moves (ninth part) against frees pending
 * on other streams' fences, checked from the public API with a segment
 * source that records what it handed out and got back.
 *
 * Invariants after every step: a segment under a live block or a block
 * still pending on a fence is never given back; live blocks keep their byte
 * patterns (no other block was carved over them); the allocator's figures
 * add up with the source's.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ManualStream,
  type MockMemory,
  MockSegmentSource,
  type Segment,
  type SegmentRequestOptions,
  type SegmentSource,
} from "@allot/core";
import { type CachedBlock, CachingAllocator } from "./mod.ts";

/** A backed mock that remembers which segments are out. */
class RecordingSource implements SegmentSource<MockMemory> {
  readonly inner: MockSegmentSource;
  readonly live = new Set<number>();
  readonly given: number[] = [];
  constructor(capacityBytes: number) {
    this.inner = new MockSegmentSource({ capacityBytes, backed: true });
  }
  get device() {
    return this.inner.device;
  }
  get alignment() {
    return this.inner.alignment;
  }
  get maxSegmentByteLength() {
    return this.inner.maxSegmentByteLength;
  }
  get capacityBytes() {
    return this.inner.capacityBytes;
  }
  tryAllocateSegment(
    byteLength: number,
    options?: SegmentRequestOptions,
  ): Segment<MockMemory> | undefined {
    const s = this.inner.tryAllocateSegment(byteLength, options);
    if (s !== undefined) this.live.add(s.memory.id);
    return s;
  }
  freeSegment(segment: Segment<MockMemory>): void {
    this.inner.freeSegment(segment);
    this.live.delete(segment.memory.id);
    this.given.push(segment.memory.id);
  }
}

const KiB = 1024, MiB = 1024 * KiB;

describe("caching fourth review", () => {
  it("CachingAllocator never gives back a segment under a live or fence-pending block, and its figures add up (model, fast-check)", () => {
    const size = fc.oneof(
      fc.integer({ min: 0, max: 4 * KiB }),
      fc.integer({ min: 0, max: 1 * MiB }),
      fc.integer({ min: 1 * MiB, max: 6 * MiB }),
      fc.constantFrom(512, 1 * MiB, 1 * MiB + 1, 2 * MiB, 10 * MiB),
    );
    const op = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          kind: fc.constant("alloc" as const),
          n: size,
          stream: fc.nat(2),
        }),
      },
      {
        weight: 5,
        arbitrary: fc.record({
          kind: fc.constant("free" as const),
          pick: fc.nat(),
          use: fc.nat(3), // 0..2: record a use on that stream first
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("complete" as const),
          stream: fc.nat(2),
          count: fc.integer({ min: 1, max: 3 }),
        }),
      },
      { weight: 1, arbitrary: fc.constant({ kind: "empty" as const }) },
      { weight: 1, arbitrary: fc.constant({ kind: "resetPeak" as const }) },
    );
    let givenBack = 0, givenWhilePending = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 40, maxLength: 200 }), (ops) => {
        const source = new RecordingSource(16 * MiB);
        const allocator = new CachingAllocator(source);
        const streams = [
          new ManualStream(),
          new ManualStream(),
          new ManualStream(),
        ];
        const live: { block: CachedBlock; seed: number; on: number }[] = [];
        // blocks freed with a use recorded on a stream: segment id, fence
        const pending: { memory: number; stream: number; seq: number }[] = [];
        let seed = 1;
        let given = source.given.length;
        const pattern = (b: CachedBlock, s: number) => {
          const bytes = (b.memory as MockMemory).bytes!;
          const n = Math.min(b.byteLength, 64);
          for (let i = 0; i < n; i++) bytes[b.byteOffset + i] = (s + i) & 0xff;
          if (b.byteLength > 64) {
            bytes[b.byteOffset + b.byteLength - 1] = s & 0xff;
          }
        };
        const check = (b: CachedBlock, s: number) => {
          const bytes = (b.memory as MockMemory).bytes!;
          const n = Math.min(b.byteLength, 64);
          for (let i = 0; i < n; i++) {
            assert.equal(bytes[b.byteOffset + i], (s + i) & 0xff, "pattern");
          }
          if (b.byteLength > 64) {
            assert.equal(bytes[b.byteOffset + b.byteLength - 1], s & 0xff);
          }
        };
        for (const o of ops) {
          if (o.kind === "alloc") {
            const stream = o.stream === 0 ? undefined : streams[o.stream];
            const b = allocator.tryAllocate(
              o.n,
              stream === undefined ? {} : { stream },
            );
            if (b === undefined) continue;
            pattern(b, ++seed);
            live.push({ block: b, seed, on: o.stream === 0 ? -1 : o.stream });
          } else if (o.kind === "free") {
            if (live.length === 0) continue;
            const [{ block, seed: s, on }] = live.splice(
              o.pick % live.length,
              1,
            );
            check(block, s);
            if (o.use < 3) {
              const stream = streams[o.use];
              block.recordStream(stream);
              // a use on the block's own stream is ordered already
              if (o.use !== on) {
                pending.push({
                  memory: (block.memory as MockMemory).id,
                  stream: o.use,
                  seq: stream.submitted + 1,
                });
              }
            }
            block.release();
          } else if (o.kind === "complete") {
            streams[o.stream].complete(
              Math.min(
                o.count,
                streams[o.stream].submitted - streams[o.stream].completedCount,
              ),
            );
          } else if (o.kind === "empty") {
            allocator.emptyCache();
          } else {
            allocator.resetPeakStats();
          }
          // the fence a pending free waits for: taken at release (seq)
          for (let i = pending.length - 1; i >= 0; i--) {
            const p = pending[i];
            if (streams[p.stream].completedCount >= p.seq) pending.splice(i, 1);
          }
          if (source.given.length > given) {
            givenBack++;
            if (pending.length > 0) givenWhilePending++;
            given = source.given.length;
          }
          for (const { block, seed: s } of live) {
            assert.ok(
              source.live.has((block.memory as MockMemory).id),
              "a live block's segment was given back",
            );
            check(block, s);
          }
          for (const p of pending) {
            assert.ok(
              source.live.has(p.memory),
              `segment ${p.memory} given back while a free on stream ${p.stream} waits for fence ${p.seq}`,
            );
          }
          const st = allocator.stats();
          const all = (x: { all: { current: number; peak: number } }) => x.all;
          assert.equal(
            all(st.reservedBytes).current,
            source.inner.reservedBytes,
          );
          assert.equal(all(st.allocation).current, live.length);
          let bytes = 0;
          for (const { block } of live) bytes += block.blockByteLength;
          assert.equal(all(st.allocatedBytes).current, bytes);
          assert.ok(all(st.activeBytes).current >= bytes);
          assert.ok(allocator.pendingFreeCount >= pending.length);
          for (
            const k of [
              "allocatedBytes",
              "reservedBytes",
              "activeBytes",
            ] as const
          ) {
            const v = st[k];
            assert.ok(v.all.peak >= v.all.current, `${k} peak`);
            assert.equal(
              v.all.current,
              v.smallPool.current + v.largePool.current,
              `${k} pools add up`,
            );
          }
          allocator.validate();
        }
        for (const { block } of live) block.release();
        for (const s of streams) s.complete(s.submitted - s.completedCount);
        allocator.emptyCache();
      }),
      { numRuns: 300 },
    );
    // the steps that gave segments back, some while frees were pending
    assert.ok(givenBack > 300, `${givenBack} steps gave segments back`);
    assert.ok(
      givenWhilePending > 100,
      `${givenWhilePending} with frees pending`,
    );
  });
});

// Found by the fourth review. `allocate(n, { strem })` (a misspelt
// `stream`) allocated on the default stream, where the block is reused at
// once after its free while the other stream may still use it; `{ tg }`
// dropped the tag, `allocateAsync(n, { signl })` could not be stopped. The
// fix: `allocate()` refuses keys other than `stream` and `tag` (a for-in with
// plain comparisons, so the hot path builds no array); `allocateAsync()` also
// takes `signal`; `recordStream`/`free` take no options. GpuCachingAllocator's allocate()
// takes none and is unaffected.
Deno.test({
  name:
    "CachingAllocator.allocate() and allocateAsync() refuse unknown option keys, allocating nothing",
  fn: async () => {
    const source = new MockSegmentSource({ capacityBytes: 1 << 24 });
    const allocator = new CachingAllocator(source);
    const isKeyError = (key: string) => (e: unknown) =>
      e instanceof Error && e.name === "InvalidArgumentError" &&
      e.message.includes(`"${key}"`);
    assert.throws(
      () => allocator.allocate(64, { strem: new ManualStream() } as never),
      isKeyError("strem"),
    );
    assert.throws(
      () => allocator.allocate(64, { tg: "x" } as never),
      isKeyError("tg"),
    );
    await assert.rejects(
      allocator.allocateAsync(64, { signl: undefined } as never),
      isKeyError("signl"),
    );
    assert.equal(allocator.stats().allocation.all.allocated, 0);
    assert.equal(source.allocationCount, 0);
  },
});
