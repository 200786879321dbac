import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  alignUp,
  ManualStream,
  type MockMemory,
  MockSegmentSource,
} from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import {
  type BufferEvent,
  WatermarkAllocator,
  type WatermarkBuffer,
} from "./mod.ts";
import { SMALL, SMALL_ADAPTIVE } from "./_test_options.ts";

const KiB = 1024;

type Op =
  | { t: "alloc"; byteLength: number; shared: boolean }
  | { t: "free"; i: number }
  | { t: "record"; i: number }
  | { t: "complete"; n: number }
  | { t: "freeInactive" }
  | { t: "emptyCache" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant("alloc" as const),
      // log-uniform from 1 byte to ~400 KiB
      byteLength: fc.integer({ min: 0, max: 1800 }).map((x) =>
        Math.max(1, Math.round(Math.exp(x / 140)))
      ),
      shared: fc.boolean(),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ t: fc.constant("free" as const), i: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant("record" as const), i: fc.nat() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("complete" as const),
      n: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ t: "freeInactive" as const }) },
  { weight: 1, arbitrary: fc.constant({ t: "emptyCache" as const }) },
);

const configArb = fc.record({
  adaptive: fc.boolean(),
  capacity: fc.constantFrom(512 * KiB, MiB(1), MiB(2)),
  high: fc.constantFrom(0, 0.6, 1, 1.5),
  lowFraction: fc.constantFrom(0, 0.3, 0.6, 1),
  maxSlack: fc.constantFrom(2 * KiB, 32 * KiB),
  unified: fc.boolean(),
});

function MiB(n: number): number {
  return n * 1024 * 1024;
}

type ModelState = "active" | "pending" | "cached" | "gone";

describe("WatermarkAllocator model", () => {
  it("WatermarkAllocator keeps watermarks, callback order, GC and fence rules under random use", () => {
    fc.assert(
      fc.property(
        configArb,
        fc.array(opArb, { minLength: 5, maxLength: 80, size: "max" }),
        (config, ops) => {
          const device = new MockSegmentSource({
            capacityBytes: config.capacity,
          });
          const high = config.high;
          const low = high === 0
            ? config.lowFraction * 2
            : config.lowFraction * high;
          const allocator = new WatermarkAllocator(device, {
            // heaps of a fixed size per class, or growing with what is held
            ...(config.adaptive ? SMALL_ADAPTIVE : SMALL),
            maxSlackByteLength: config.maxSlack,
            highWatermarkRatio: high,
            lowWatermarkRatio: low,
            unifiedMemory: config.unified,
            // strict mode (validate on every call) in half the runs
            strict: ops.length % 2 === 0,
          });
          const stream = new ManualStream();
          const state = new Map<number, ModelState>();
          const lastFence = new Map<number, number>();
          const live: WatermarkBuffer<MockMemory>[] = [];
          let current: Op | undefined;
          let pressureAtStart = false;

          const idle = (id: number) =>
            stream.completedCount >= (lastFence.get(id) ?? 0);

          // The allocator reports callback errors to its logger and goes on,
          // so violations are collected and asserted after each operation.
          const violations: string[] = [];
          allocator.addCallback((e: BufferEvent) => {
            try {
              onEvent(e);
            } catch (error) {
              violations.push(`${e.type} #${e.bufferId}: ${error}`);
            }
          });
          const onEvent = (e: BufferEvent) => {
            const s = state.get(e.bufferId);
            switch (e.type) {
              case "allocated":
                assert.equal(s, undefined, "allocated twice");
                assert.equal(current?.t, "alloc");
                state.set(e.bufferId, "active");
                break;
              case "recycled":
                assert.equal(s, "cached", `recycled a ${s} buffer`);
                assert.equal(current?.t, "alloc");
                state.set(e.bufferId, "active");
                break;
              case "freed":
                assert.ok(s === "active" || s === "pending", `freed ${s}`);
                assert.ok(idle(e.bufferId), "freed while work pending");
                state.set(e.bufferId, "cached");
                break;
              case "released":
                assert.equal(s, "cached", `released a ${s} buffer`);
                if (e.reason === "garbage-collection") {
                  assert.equal(current?.t, "alloc");
                  assert.ok(pressureAtStart, "GC without memory pressure");
                }
                state.set(e.bufferId, "gone");
                break;
              case "allocation-failed":
                assert.equal(e.bufferId, 0);
                assert.equal(current?.t, "alloc");
                break;
            }
          };

          const check = () => {
            assert.deepEqual(violations, []);
            allocator.validate();
            const reserved = device.reservedBytes;
            assert.ok(reserved <= allocator.highWatermarkLimit, "over high");
            const stats = allocator.stats();
            assert.equal(stats.reservedBytes.current, reserved);
            let inUse = 0;
            for (const [id, s] of state) {
              if (s === "active" || s === "pending") {
                inUse += live.find((b) => b.id === id)?.byteLength ??
                  pendingLength.get(id)!;
              }
            }
            assert.equal(stats.allocatedBytes.current, inUse);
            // the shared MemoryStats agree with the snapshot
            const m = allocator.memoryStats();
            const snap = allocator.snapshot();
            let handed = 0, active = 0, splitCached = 0, splitCount = 0;
            for (const seg of snap.segments) {
              for (const b of seg.blocks) {
                if (b.state === "active_allocated") handed += b.byteLength;
                if (b.state !== "inactive") active += b.byteLength;
                if (b.cached && seg.split) {
                  splitCached += b.byteLength;
                  splitCount++;
                }
              }
            }
            assert.equal(m.allocatedBytes.all.current, handed);
            assert.equal(m.activeBytes.all.current, active);
            assert.equal(m.activeBytes.all.current, inUse);
            assert.equal(m.reservedBytes.all.current, reserved);
            assert.equal(m.segment.all.current, snap.segments.length);
            assert.equal(m.inactiveSplitBytes.all.current, splitCached);
            assert.equal(m.inactiveSplit.all.current, splitCount);
            for (const name of ["allocatedBytes", "reservedBytes"] as const) {
              assert.equal(
                m[name].all.current,
                m[name].smallPool.current + m[name].largePool.current,
              );
            }
            // heaps are tiled by their ranges; active ranges do not overlap
            for (const seg of snap.segments) {
              let at = 0;
              for (const b of seg.blocks) {
                assert.equal(b.offset, at);
                assert.equal(b.address, seg.address + at);
                at += b.byteLength;
                if (b.bufferId !== 0) {
                  const s = state.get(b.bufferId);
                  const expected = b.state === "active_allocated"
                    ? "active"
                    : b.state === "active_pending_free"
                    ? "pending"
                    : "cached";
                  assert.equal(s, expected);
                  assert.equal(b.cached, expected === "cached");
                }
              }
              assert.equal(at, seg.byteLength);
            }
          };

          const pendingLength = new Map<number, number>();
          for (const op of ops) {
            current = op;
            pressureAtStart = allocator.lowWatermarkRatio > 0 &&
              device.reservedBytes >= allocator.lowWatermarkLimit;
            switch (op.t) {
              case "alloc": {
                const buf = allocator.tryAllocateBuffer(op.byteLength, {
                  pool: op.shared ? "shared" : "private",
                });
                if (buf === undefined) {
                  const size = alignUp(op.byteLength, device.alignment);
                  assert.ok(
                    device.reservedBytes + size >
                      Math.min(allocator.highWatermarkLimit, config.capacity),
                    `failed although ${size} bytes fit`,
                  );
                } else {
                  assert.equal(state.get(buf.id), "active");
                  assert.equal(buf.requestedByteLength, op.byteLength);
                  live.push(buf);
                }
                break;
              }
              case "free": {
                if (live.length === 0) break;
                const [buf] = live.splice(op.i % live.length, 1);
                const id = buf.id;
                const wasIdle = idle(id);
                pendingLength.set(id, buf.byteLength);
                buf.release();
                if (wasIdle) assert.equal(state.get(id), "cached");
                else {
                  assert.equal(state.get(id), "active");
                  state.set(id, "pending");
                }
                break;
              }
              case "record": {
                if (live.length === 0) break;
                const buf = live[op.i % live.length];
                allocator.recordEvents([buf], stream);
                lastFence.set(buf.id, stream.submitted);
                break;
              }
              case "complete":
                stream.complete(op.n);
                break;
              case "freeInactive":
                allocator.freeInactiveBuffers();
                break;
              case "emptyCache":
                allocator.emptyCache();
                break;
            }
            current = undefined;
            check();
          }
          current = { t: "free", i: 0 };
          for (const buf of live.splice(0)) {
            pendingLength.set(buf.id, buf.byteLength);
            const wasIdle = idle(buf.id);
            buf.release();
            if (!wasIdle) state.set(buf.id, "pending");
          }
          stream.completeAll();
          allocator.emptyCache();
          assert.equal(device.reservedBytes, 0);
          assert.equal(device.liveSegmentCount, 0);
          assert.deepEqual(violations, []);
          for (const [id, s] of state) assert.equal(s, "gone", `#${id}`);
          const stats = allocator.stats();
          assert.equal(stats.allocatedBytes.current, 0);
          assert.equal(stats.requestedBytes.current, 0);
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
