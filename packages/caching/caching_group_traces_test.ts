// The real runtime traces whose all-buffer figures a CachingGroup changes
// (the `allot-caching-group` replay policy: one CachingAllocator per WebGPU
// usage, all in one group, mock devices, exact): peak held / peak live at or
// below what the group reached when it was added, one pass and over warm
// passes, with at most as many device buffers made after the first pass; and
// on every recorded trace, one pass, the grouped pools hold no more than
// they would alone plus 2 % (the rows the group changes are below; the
// others are identical to the byte today).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  allotCachingGroupPolicy,
  allotCachingQueueOrderPolicy,
  type ReplayOps,
  replayTrace,
  traceOps,
} from "@allot/trace";
import { readRecordedTrace } from "../trace/_test_traces.ts";
import { recordedTraceNames } from "../../scripts/bench/recorded_traces.ts";

/** All buffers: [one pass, warm, made after the first pass] (2026-11-24). */
const GROUPED: Record<string, [number, number, number]> = {
  "tfjs-webgpu/efficientnet-multires.jsonl.gz": [1.0679, 1.0732, 1],
  // ResNet: 1.078, 1.2171, 38 until a miss kept segments just short of it
  // (back11); 1.0679, 1.2124, 34 until 256-byte granules and segments of
  // the request's own size while nothing held is free (storage13); 1.0818,
  // 1.2235, 36 until the peak rule (bytes14) and a small member no longer
  // taking an active member's segments (SIDE_SHARES, allbuf14), both eighth session.
  "tfjs-webgpu/resnet-varbatch.jsonl.gz": [1.0599, 1.2107, 36],
};

/**
 * `passes` passes of one grouped replay (what is live at a pass's end freed),
 * as `traces/figures.ts` measures: peak held / peak live after the first
 * pass and after all, and the buffers made after the first.
 */
function passes(ops: ReplayOps, n: number): [number, number, number] {
  const p = allotCachingGroupPolicy.create();
  const size = new Map<number, number>();
  let live = 0, peakLive = 0, peak = 0, one = 0, first = 0;
  for (let pass = 0; pass < n; pass++) {
    for (let i = 0; i < ops.length; i++) {
      const c = ops.code[i];
      if (c === 0) {
        const b = Math.max(1, ops.size[i]);
        p.alloc(ops.id[i], ops.size[i], ops.usage[i]);
        size.set(ops.id[i], b);
        live += b;
        if (live > peakLive) peakLive = live;
        peak = Math.max(peak, p.heldBytes());
      } else if (c === 1) {
        p.free(ops.id[i]);
        live -= size.get(ops.id[i])!;
        size.delete(ops.id[i]);
      } else p.sync(c === 2 ? "fence" : "step");
    }
    for (const [id, b] of size) {
      p.free(id);
      live -= b;
    }
    size.clear();
    p.sync("step");
    if (pass === 0) {
      one = peak;
      first = p.buffersCreated();
    }
  }
  return [one / peakLive, peak / peakLive, p.buffersCreated() - first];
}

/**
 * Traces where the group holds more than alone plus 2 % (all buffers, one
 * pass): the fourth hold-out set's super-resolution (traces/README.md), 1.0230
 * at main b5672b2 when it was recorded (7,686,144 against 7,513,088 bytes),
 * plus 0.005.
 */
const GROUP_OVER_ALONE: Record<string, number> = {
  "tfjs-webgpu/super-resolution.jsonl.gz": 1.028,
};

describe("CachingGroup on real runtime traces", () => {
  for (const [name, [one, warm, made]] of Object.entries(GROUPED)) {
    it(`${name}: all buffers, grouped, at most ${one} one pass, ${warm} warm, ${made} buffers made after the first pass`, async () => {
      const ops = traceOps(await readRecordedTrace(name), "all");
      const [r1, rw, m] = passes(ops, 8);
      assert.ok(r1 <= one, `${r1.toFixed(4)} > ${one}`);
      assert.ok(rw <= warm, `warm ${rw.toFixed(4)} > ${warm}`);
      assert.ok(m <= made, `${m} > ${made}`);
    });
  }
  it("every recorded trace, all buffers, one pass: grouped holds at most 2 % more than alone (super-resolution: 2.8 %)", async () => {
    for (const name of recordedTraceNames()) {
      const report = replayTrace(await readRecordedTrace(name), {
        usage: "all",
        repeat: 1,
        policies: [allotCachingQueueOrderPolicy, allotCachingGroupPolicy],
      });
      const [alone, grouped] = report.policies;
      const most = GROUP_OVER_ALONE[name] ?? 1.02;
      assert.ok(
        grouped.peakReservedBytes <= alone.peakReservedBytes * most,
        `${name}: ${grouped.peakReservedBytes} > ${alone.peakReservedBytes} x ${most}`,
      );
    }
  });
});
