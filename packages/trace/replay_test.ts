import { InvalidArgumentError } from "@allot/core";
import assert from "node:assert/strict";
import fc from "fast-check";
// TF.js's own pool, unmodified, to check the exact-size baseline against.
import { BufferManager } from "npm:@tensorflow/tfjs-backend-webgpu@4.22.0/dist/buffer_manager.js";
import {
  DEFAULT_POLICIES,
  formatTrace,
  ortBucketSize,
  parseTrace,
  type PolicyFactory,
  replayTrace,
  type TraceEvent,
} from "./mod.ts";
import { modelRuns } from "../core/_test_faults.ts";

/** Random request streams: allocs of mixed sizes/usages, frees, steps, fences. */
const streams = fc.array(
  fc.tuple(
    fc.nat(99),
    fc.integer({ min: 1, max: 1 << 22 }),
    fc.constantFrom(0x8c, 0x48, 0x09),
  ),
  { minLength: 1, maxLength: 200 },
).map((ops) => {
  const events: TraceEvent[] = [];
  const live: number[] = [];
  let id = 0;
  for (const [r, size, usage] of ops) {
    if (r < 50 || live.length === 0) {
      const s = r % 3 === 0 ? 4 << (size % 10) : size; // repeated sizes too
      events.push({ t: 0, op: "alloc", id, size: s, usage });
      live.push(id++);
    } else if (r < 90) {
      events.push({ t: 0, op: "free", id: live.splice(r % live.length, 1)[0] });
    } else if (r < 95) events.push({ t: 0, op: "step" });
    else events.push({ t: 0, op: "map", id: 0, mode: 1 });
  }
  return parseTrace(
    formatTrace({ header: { format: "allot-trace", version: 1 }, events }),
  );
});

Deno.test("replay: every policy holds at least the live peak and reports figures (fast-check)", () => {
  fc.assert(
    fc.property(streams, (trace) => {
      const r = replayTrace(trace, { repeat: 1 });
      assert.equal(r.policies.length, DEFAULT_POLICIES.length);
      for (const p of r.policies) {
        assert.equal(p.error, undefined, `${p.name}: ${p.error}`);
        assert.ok(
          p.peakReservedBytes >= r.peakRequestedBytes,
          `${p.name} holds ${p.peakReservedBytes} < live ${r.peakRequestedBytes}`,
        );
        assert.ok(p.buffersCreated >= 0 && p.nsPerOp >= 0);
      }
    }),
    { numRuns: modelRuns() },
  );
});

Deno.test("replay: tfjs-exact matches TF.js's own BufferManager, buffer for buffer (fast-check)", () => {
  fc.assert(
    fc.property(streams, (trace) => {
      let created = 0;
      const device = {
        createBuffer: (
          d: { size: number; usage: number },
        ) => (created++, { size: d.size, usage: d.usage }),
      };
      const bm = new BufferManager(device as unknown as GPUDevice);
      const live = new Map<number, unknown>();
      let peak = 0;
      for (const e of trace.events) {
        if (e.op === "alloc") {
          live.set(e.id, bm.acquireBuffer(e.size, e.usage!));
          peak = Math.max(peak, bm.numBytesAllocated);
        } else if (e.op === "free") {
          bm.releaseBuffer(live.get(e.id) as GPUBuffer);
          live.delete(e.id);
        }
      }
      const tfjs = replayTrace(trace, {
        repeat: 1,
        policies: DEFAULT_POLICIES.filter((p) => p.name === "tfjs-exact"),
      }).policies[0];
      assert.equal(tfjs.buffersCreated, created);
      assert.equal(tfjs.peakReservedBytes, peak);
    }),
    { numRuns: modelRuns() },
  );
});

Deno.test("ortBucketSize: 16-byte aligned, first bucket that fits, own size above the last", () => {
  assert.equal(ortBucketSize(1), 64);
  assert.equal(ortBucketSize(64), 64);
  assert.equal(ortBucketSize(65), 128);
  assert.equal(ortBucketSize(1025), 2048);
  assert.equal(ortBucketSize(9_000_000), 12582912);
  assert.equal(ortBucketSize(167772160), 167772160);
  assert.equal(ortBucketSize(167772161), 167772176);
});

Deno.test("replay: ort-buckets trims one over-limit storage buffer per step and drops staging buffers", () => {
  const lines = [`{"format":"allot-trace","version":1}`];
  let id = 0;
  const huge = 200 << 20; // above every bucket: never kept
  for (let i = 0; i < 3; i++) {
    lines.push(`{"t":0,"op":"alloc","id":${id++},"size":${huge},"usage":140}`);
  }
  for (let i = 0; i < 3; i++) lines.push(`{"t":0,"op":"free","id":${i}}`);
  lines.push(
    `{"t":0,"op":"alloc","id":${id++},"size":100,"usage":9}`,
    `{"t":0,"op":"free","id":${id - 1}}`,
  );
  lines.push(
    `{"t":0,"op":"step"}`,
    `{"t":0,"op":"alloc","id":${id++},"size":100,"usage":9}`,
  );
  const ort: PolicyFactory = DEFAULT_POLICIES.find((p) =>
    p.name === "ort-buckets"
  )!;
  const r = replayTrace(parseTrace(lines.join("\n")), {
    repeat: 1,
    policies: [ort],
  });
  assert.equal(r.policies[0].buffersCreated, 3 + 2); // the staging buffer was destroyed at the step
});

Deno.test("replay refuses bad options, and keeps policy errors in their row", () => {
  const t = parseTrace(
    `{"format":"allot-trace","version":1}\n{"t":0,"op":"alloc","id":0,"size":8,"usage":128}`,
  );
  assert.throws(() => replayTrace(t, { repeat: 0 }), InvalidArgumentError);
  assert.throws(
    () => replayTrace(t, { usage: "x" as "all" }),
    InvalidArgumentError,
  );
  const bad: PolicyFactory = {
    name: "bad",
    description: "",
    create: () => {
      throw new Error("boom");
    },
  };
  assert.equal(
    replayTrace(t, { policies: [bad], repeat: 1 }).policies[0].error,
    "boom",
  );
});
