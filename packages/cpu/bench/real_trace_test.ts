import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { modelRuns } from "../../core/_test_faults.ts";
import { CpuHeap } from "../mod.ts";
import { passesFor, type RealTrace, slotTraceFromText } from "./real_trace.ts";
import { cpuTraceNames, readCpuTraceText } from "./cpu_traces.ts";

// Replays a slot trace on a model of slots: an alloc must find its slot
// empty, a free must find it full; returns the highest sum of live bytes.
function replayModel(trace: RealTrace): number {
  const live = new Map<number, number>();
  let bytes = 0, peak = 0;
  for (let i = 0; i < trace.kind.length; i++) {
    const s = trace.slot[i];
    assert.ok(s >= 0 && s < trace.slots, `slot ${s} out of range`);
    if (trace.kind[i] === 1) {
      assert.ok(!live.has(s), `op ${i}: alloc into live slot ${s}`);
      assert.ok(trace.byteLength[i] > 0, `op ${i}: a 0-byte alloc`);
      live.set(s, trace.byteLength[i]);
      bytes += trace.byteLength[i];
      if (bytes > peak) peak = bytes;
    } else {
      assert.ok(live.has(s), `op ${i}: double free of slot ${s}`);
      bytes -= live.get(s)!;
      live.delete(s);
    }
  }
  assert.equal(live.size, 0, "slots left live");
  return peak;
}

const header = JSON.stringify({ format: "allot-trace", version: 1 });

interface Recorded {
  text: string;
  /** Peak live bytes over the recorded events (0-byte ones included). */
  peak: number;
  allocs: number;
  zero: number;
  leaked: number;
}

// Builds a recorded trace from a script of steps: allocate `size` with a
// fresh id, or free the `pick`-th live id; some live ids are never freed.
function record(
  steps: { alloc: boolean; size: number; pick: number }[],
): Recorded {
  const lines = [header];
  const live: { id: number; size: number }[] = [];
  let next = 5, bytes = 0, peak = 0, allocs = 0, zero = 0, t = 0;
  for (const step of steps) {
    if (step.alloc || live.length === 0) {
      const id = next;
      next += 3;
      live.push({ id, size: step.size });
      lines.push(JSON.stringify({ t: t++, op: "alloc", id, size: step.size }));
      bytes += step.size;
      if (bytes > peak) peak = bytes;
      if (step.size === 0) zero++;
      else allocs++;
    } else {
      const [block] = live.splice(step.pick % live.length, 1);
      lines.push(JSON.stringify({ t: t++, op: "free", id: block.id }));
      bytes -= block.size;
    }
    if (step.pick % 7 === 0) lines.push(JSON.stringify({ t, op: "step" }));
  }
  return {
    text: lines.join("\n") + "\n",
    peak,
    allocs,
    zero,
    leaked: live.filter((b) => b.size > 0).length,
  };
}

const steps = fc.array(
  fc.record({
    alloc: fc.boolean(),
    size: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1 << 20 })),
    pick: fc.nat(),
  }),
  { maxLength: 200 },
);

test("slotTraceFromText: replays with no double free and the recorded peak live", () => {
  fc.assert(
    fc.property(steps, fc.integer({ min: 1, max: 3 }), (script, repeat) => {
      const r = record(script);
      const trace = slotTraceFromText(r.text, "model", repeat);
      assert.equal(replayModel(trace), r.peak);
      assert.equal(trace.peakLiveBytes, r.peak);
      assert.equal(trace.allocations, r.allocs * repeat);
      assert.equal(trace.zeroSized, r.zero);
      assert.equal(trace.leaked, r.leaked);
      assert.equal(trace.kind.length, 2 * r.allocs * repeat);
    }),
    { numRuns: modelRuns(300) },
  );
});

test("slotTraceFromText: a CpuHeap replays it and ends empty", () => {
  fc.assert(
    fc.property(steps, (script) => {
      const trace = slotTraceFromText(record(script).text, "heap", 2);
      const heap = new CpuHeap(64 << 20);
      const offsets = new Float64Array(trace.slots);
      for (let i = 0; i < trace.kind.length; i++) {
        if (trace.kind[i] === 1) {
          offsets[trace.slot[i]] = heap.alloc(trace.byteLength[i]);
        } else heap.free(offsets[trace.slot[i]]);
      }
      assert.equal(heap.allocationCount, 0);
    }),
    { numRuns: modelRuns(100) },
  );
});

test("slotTraceFromText: refuses a double alloc, a stray free, a bad header", () => {
  const a = (id: number, size = 8) =>
    JSON.stringify({ t: 0, op: "alloc", id, size });
  const f = (id: number) => JSON.stringify({ t: 0, op: "free", id });
  assert.throws(
    () => slotTraceFromText([header, a(1), a(1)].join("\n"), "x"),
    /id 1 allocated twice/,
  );
  assert.throws(
    () => slotTraceFromText([header, a(1), f(1), f(1)].join("\n"), "x"),
    /free of id 1, which is not live/,
  );
  assert.throws(
    () => slotTraceFromText([header, f(2)].join("\n"), "x"),
    /free of id 2/,
  );
  assert.throws(
    () => slotTraceFromText(JSON.stringify({ format: "x" }), "x"),
    /not an allot trace/,
  );
  assert.throws(() => slotTraceFromText(header, "x", 0), /repeat/);
  // A refused conversion is a throw: nothing half-made comes back.
});

test("slotTraceFromText: offsets give the runtime's own footprint", () => {
  const lines = [
    header,
    JSON.stringify({ t: 0, op: "alloc", id: 0, size: 100, offset: 1000 }),
    JSON.stringify({ t: 0, op: "alloc", id: 1, size: 50, offset: 1200 }),
    JSON.stringify({ t: 0, op: "free", id: 0 }),
    JSON.stringify({ t: 0, op: "free", id: 1 }),
  ];
  const trace = slotTraceFromText(lines.join("\n"), "offsets");
  assert.equal(trace.recordedFootprint, 250);
  assert.equal(trace.peakLiveBytes, 150);
  // One allocation without an offset: no footprint claimed.
  lines.splice(2, 0, JSON.stringify({ t: 0, op: "alloc", id: 2, size: 1 }));
  assert.equal(
    slotTraceFromText(lines.join("\n"), "x").recordedFootprint,
    undefined,
  );
});

test("passesFor: at least one pass, enough for the ops asked", () => {
  const trace = slotTraceFromText(
    [
      header,
      JSON.stringify({ t: 0, op: "alloc", id: 0, size: 8 }),
      JSON.stringify({ t: 0, op: "free", id: 0 }),
    ].join("\n"),
    "x",
  );
  assert.equal(passesFor(trace, 1), 1);
  assert.equal(passesFor(trace, 5), 3);
});

test("the recorded CPU traces replay with no double free and their peak live", async () => {
  let checked = 0;
  for (const path of cpuTraceNames()) {
    const text = await readCpuTraceText(path);
    // The peak live bytes straight from the events.
    const sizes = new Map<number, number>();
    let bytes = 0, peak = 0;
    for (const line of text.split("\n").slice(1)) {
      if (line === "") continue;
      const e = JSON.parse(line);
      if (e.op === "alloc") {
        sizes.set(e.id, e.size);
        bytes += e.size;
        if (bytes > peak) peak = bytes;
      } else if (e.op === "free") {
        bytes -= sizes.get(e.id)!;
        sizes.delete(e.id);
      }
    }
    const trace = slotTraceFromText(text, path, 2);
    assert.equal(replayModel(trace), peak, path);
    assert.equal(trace.peakLiveBytes, peak, path);
    checked++;
  }
  assert.ok(checked >= 9, `only ${checked} recorded CPU traces`);
});
