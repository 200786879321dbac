// Two GPUDevices from the outside (review 7): allocators of both join the
// devices' own groups and a caller's group that empties and is taken by the
// other device, plain CachingAllocators over either device's
// GpuSegmentSource try to join any of them. A fast-check model: a refused
// join changes nothing; a group never holds two devices' members; a miss on
// one device never destroys the other device's buffers; the counts agree on
// both devices, and everything goes back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { CachingAllocator, CachingGroup } from "@allot/caching";
import { InvalidArgumentError } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { GpuSegmentSource } from "./gpu_segment_source.ts";
import { type MockGpu, mockGpu } from "./_test_mock_device.ts";

const KiB = 1024, MiB = 2 ** 20;

type Op =
  | { op: "make"; d: number; g: number; plain: boolean }
  | { op: "alloc"; a: number; size: number }
  | { op: "free"; i: number }
  | { op: "delete"; a: number }
  | { op: "empty"; a: number }
  | { op: "step"; g: number };

interface Member {
  d: number;
  pool: CachingAllocator<GPUBuffer>;
  owner: GpuCachingAllocator | CachingAllocator<GPUBuffer>;
  group: CachingGroup;
}

describe("GpuCachingAllocator groups across two GPUDevices (review 7)", () => {
  it("model: no group ever holds two devices' pools; a miss never destroys the other device's buffers; counts agree; everything goes back", () => {
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant("make" as const),
          d: fc.nat(1),
          g: fc.nat(2), // 0: the device's own, 1: caller's A, 2: caller's B
          plain: fc.boolean(),
        }),
      },
      {
        weight: 6,
        arbitrary: fc.record({
          op: fc.constant("alloc" as const),
          a: fc.nat(),
          size: fc.oneof(
            fc.integer({ min: 1, max: 64 * KiB }),
            fc.integer({ min: 1, max: 3 * MiB }),
          ),
        }),
      },
      {
        weight: 5,
        arbitrary: fc.record({ op: fc.constant("free" as const), i: fc.nat() }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("delete" as const),
          a: fc.nat(),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("empty" as const),
          a: fc.nat(),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constant("step" as const),
          g: fc.nat(2),
        }),
      },
    );
    let refused = 0, crossed = 0;
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80, size: "max" }), (ops) => {
        const gpus: MockGpu[] = [mockGpu(), mockGpu()];
        const callers = [new CachingGroup(), new CachingGroup()];
        const members: Member[] = [];
        const live: { m: Member; h: { release(): void } }[] = [];
        const groupOf = (d: number, g: number) =>
          g === 0
            ? GpuCachingAllocator.deviceGroup(gpus[d].device)
            : callers[g - 1];
        const check = () => {
          for (const m of members) m.pool.validate();
          const groups = new Set(members.map((m) => m.group));
          for (const group of groups) {
            const inside = members.filter((m) => group.has(m.pool));
            // never two devices' pools in one group
            assert.ok(
              new Set(inside.map((m) => m.d)).size <= 1,
              "a group holds two devices' pools",
            );
            assert.equal(
              group.heldBytes,
              inside.reduce((n, m) => n + m.pool.reservedBytes, 0),
            );
          }
          for (const [d, gpu] of gpus.entries()) {
            let buffers = 0;
            for (const b of gpu.live) buffers += b.size;
            const pools = members.filter((m) => m.d === d)
              .reduce((n, m) => n + m.pool.reservedBytes, 0);
            assert.equal(buffers, pools, `device ${d}: buffers and pools`);
          }
        };
        for (const o of ops) {
          switch (o.op) {
            case "make": {
              const group = groupOf(o.d, o.g);
              const size = group.size;
              const device = gpus[o.d].device;
              const other = members.filter((m) => group.has(m.pool))
                .some((m) => m.d !== o.d);
              try {
                if (o.plain) {
                  const pool = new CachingAllocator(
                    new GpuSegmentSource(device),
                    { group },
                  );
                  members.push({ d: o.d, pool, owner: pool, group });
                } else {
                  const a = new GpuCachingAllocator(device, { group });
                  members.push({ d: o.d, pool: a.caching, owner: a, group });
                }
                assert.ok(!other, "joined a group holding another device's");
              } catch (error) {
                assert.ok(error instanceof InvalidArgumentError, String(error));
                assert.equal(group.size, size);
                refused++;
              }
              break;
            }
            case "alloc": {
              if (members.length === 0) break;
              const m = members[o.a % members.length];
              const otherBuffers = new Set(gpus[1 - m.d].live);
              const h = m.owner instanceof GpuCachingAllocator
                ? m.owner.allocate(o.size)
                : m.owner.allocate(o.size);
              live.push({ m, h });
              for (const b of otherBuffers) {
                assert.ok(
                  gpus[1 - m.d].live.has(b),
                  "a miss destroyed the other device's buffer",
                );
              }
              break;
            }
            case "free":
              if (live.length > 0) {
                live.splice(o.i % live.length, 1)[0].h.release();
              }
              break;
            case "delete":
              if (members.length > 0) {
                const m = members[o.a % members.length];
                m.group.delete(m.owner);
              }
              break;
            case "empty":
              if (members.length > 0) {
                members[o.a % members.length].owner.emptyCache();
              }
              break;
            case "step":
              for (const d of [0, 1]) groupOf(d, o.g).endStep();
              break;
          }
          check();
        }
        if (callers.some((g) => g.size > 0)) crossed++;
        for (const { h } of live) h.release();
        for (const m of members) {
          m.owner.emptyCache();
          assert.equal(m.pool.allocatedBytes, 0);
        }
        for (const gpu of gpus) assert.equal(gpu.live.size, 0);
      }),
      { numRuns: modelRuns(200) },
    );
    assert.ok(refused > 0 && crossed > 0);
  });
});
