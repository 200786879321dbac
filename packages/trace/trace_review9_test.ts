/**
 * Ninth outside-in review of `@allot/trace`: the recorder's stack capture
 * options and malformed traces. `new TraceRecorder({ capture: { depth: -1 }
 * })` (or `{ maxFrames: 8 }`, a misspelt key, or a `classify` that is not a
 * function) was accepted and kept by reference: the error came later, from
 * inside the recorded runtime's `createBuffer`, on the first captured stack.
 * Malformed traces (corrupted lines, events out of order, frees of ids never
 * allocated, NaN, negative and huge sizes, truncated text and gzip) are
 * refused with a `TraceFormatError`; what parses replays and draws.
 * `recordDevice()` / `recordBufferPool()` let a raw error escape for a
 * device, queue or pool that traps when read, read each method twice (a
 * getter could answer a function to the check and junk to the call), and
 * left a device half-patched for good when its queue was frozen.
 * `fromAllocatorSnapshot()` let a raw error escape for a history entry that
 * traps when read, and read each entry twice (checked one value, converted
 * another).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { gzipSync } from "node:zlib";
import { AllotError, InvalidArgumentError } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import { trapObject } from "../core/_test_hostile.ts";
import {
  captureStack,
  fromAllocatorSnapshot,
  memoryReport,
  memoryTimeline,
  parseTrace,
  recordBufferPool,
  recordDevice,
  replayTrace,
  reportHtml,
  timelineSvg,
  TraceFormatError,
  TraceRecorder,
  validateTrace,
} from "./mod.ts";
import { readTraceFile } from "./cli.ts";

const BAD_CAPTURE: [string, unknown][] = [
  ["depth -1", { depth: -1 }],
  ["depth 1.5", { depth: 1.5 }],
  ["depth NaN", { depth: NaN }],
  ["depth 1e9", { depth: 1e9 }],
  ["depth as a string", { depth: "8" }],
  ["a misspelt key (maxFrames)", { maxFrames: 8 }],
  ["classify that is not a function", { classify: "user" }],
];

describe("trace ninth review: TraceRecorder's capture options", () => {
  for (const [name, capture] of BAD_CAPTURE) {
    it(`new TraceRecorder() and recordDevice() refuse capture with ${name} at once`, () => {
      assert.throws(
        () => new TraceRecorder({ capture: capture as never }),
        InvalidArgumentError,
      );
      let created = 0;
      const device = {
        createBuffer: () => {
          created++;
          return { destroy() {}, size: 4, usage: 0 };
        },
        queue: { submit() {}, writeBuffer() {} },
      };
      assert.throws(
        () => recordDevice(device as never, { capture: capture as never }),
        InvalidArgumentError,
      );
      assert.equal(created, 0);
    });
  }

  it("TraceRecorder keeps the capture options it checked: a later change to the caller's object does not reach it", () => {
    const capture = { depth: 4 } as { depth: number };
    const recorder = new TraceRecorder({ capture });
    capture.depth = -1; // would throw inside push() if read there
    recorder.push({ op: "alloc", id: 0, size: 4 }, true);
    const trace = parseTrace(recorder.toJsonLines());
    const stack = trace.events.find((e) => e.op === "stack");
    assert.ok(stack !== undefined && stack.op === "stack");
    assert.ok(stack.frames.length <= 4);
  });

  it("TraceRecorder with valid capture options records stacks of at most depth frames, classified", () => {
    const kinds: string[] = [];
    const recorder = new TraceRecorder({
      capture: {
        depth: 3,
        classify: (at) => {
          kinds.push(at);
          return "user";
        },
      },
    });
    recorder.push({ op: "alloc", id: 0, size: 4 }, true);
    const trace = parseTrace(recorder.toJsonLines());
    const stack = trace.events.find((e) => e.op === "stack");
    assert.ok(stack !== undefined && stack.op === "stack");
    assert.ok(stack.frames.length <= 3 && stack.frames.length > 0);
    assert.ok(stack.frames.every((f) => f.kind === "user"));
    assert.ok(kinds.length > 0);
  });
});

const HEADER = JSON.stringify({ format: "allot-trace", version: 1 });

/** A well-formed trace of `n` allocs and frees over buffers. */
function goodLines(n: number): string[] {
  const lines = [HEADER];
  let t = 0;
  lines.push(
    JSON.stringify({ t, op: "create", id: 0, size: 1 << 20, usage: 132 }),
  );
  for (let i = 0; i < n; i++) {
    t += 1;
    lines.push(JSON.stringify({ t, op: "alloc", id: i, size: 64 * (i + 1) }));
    if (i % 3 === 2) {
      lines.push(JSON.stringify({ t, op: "step", name: `${i}` }));
    }
    if (i % 2 === 1) {
      t += 1;
      lines.push(JSON.stringify({ t, op: "free", id: i - 1 }));
    }
  }
  lines.push(JSON.stringify({ t: t + 1, op: "destroy", id: 0 }));
  return lines;
}

const HOSTILE_VALUES: unknown[] = [
  -1,
  1.5,
  2 ** 53,
  1e300,
  -0,
  "12",
  null,
  true,
  [],
  {},
  99999,
];

/** Parses, then replays and draws what parsed: no raw error anywhere. */
function digest(text: string): "refused" | "parsed" {
  let trace;
  try {
    trace = parseTrace(text);
  } catch (e) {
    assert.ok(
      e instanceof TraceFormatError,
      `parseTrace threw ${(e as Error)?.constructor?.name}: ${
        (e as Error)?.message
      }`,
    );
    return "refused";
  }
  const report = replayTrace(trace, { repeat: 1 });
  assert.ok(report.peakRequestedBytes >= 0);
  const tl = memoryTimeline(trace);
  assert.ok(timelineSvg(tl).startsWith("<svg"));
  return "parsed";
}

describe("trace ninth review: malformed traces", () => {
  it("parseTrace() refuses corrupted traces with a TraceFormatError; what parses replays and draws", () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(
          fc.oneof(
            fc.record({ k: fc.constant("drop" as const), i: fc.nat() }),
            fc.record({
              k: fc.constant("swap" as const),
              i: fc.nat(),
              j: fc.nat(),
            }),
            fc.record({
              k: fc.constant("field" as const),
              i: fc.nat(),
              f: fc.constantFrom("t", "id", "size", "op", "usage", "name"),
              v: fc.constantFrom(...HOSTILE_VALUES),
            }),
            fc.record({ k: fc.constant("cut" as const), at: fc.nat() }),
            fc.record({ k: fc.constant("dup" as const), i: fc.nat() }),
          ),
          { maxLength: 4 },
        ),
        (n, edits) => {
          let lines = goodLines(n);
          for (const e of edits) {
            const i = 1 + ((e as { i?: number }).i ?? 0) % (lines.length - 1);
            if (lines.length < 2) break;
            if (e.k === "drop") lines.splice(i, 1);
            else if (e.k === "dup") lines.splice(i, 0, lines[i]);
            else if (e.k === "swap") {
              const j = 1 + e.j % (lines.length - 1);
              [lines[i], lines[j]] = [lines[j], lines[i]];
            } else if (e.k === "field") {
              let o;
              try {
                o = JSON.parse(lines[i]);
              } catch {
                continue; // a line an earlier cut left half-written
              }
              o[e.f] = e.v;
              lines[i] = JSON.stringify(o);
            } else {
              const text = lines.join("\n");
              lines = text.slice(0, e.at % (text.length + 1)).split("\n");
            }
          }
          seen.add(digest(lines.join("\n")));
        },
      ),
      { numRuns: modelRuns(300) },
    );
    // both outcomes happen, or the test checks nothing
    assert.deepEqual([...seen].sort(), ["parsed", "refused"]);
  });

  it("validateTrace() refuses forged event objects with a TraceFormatError, never a raw error", () => {
    const frees = [
      { t: 0, op: "free", id: 7 },
      { t: 0, op: "destroy", id: 7 },
      { t: 0, op: "alloc", id: 1, size: NaN },
      { t: 0, op: "alloc", id: 1, size: -4 },
      { t: 0, op: "alloc", id: 1, size: Infinity },
      { t: 0, op: "alloc", id: NaN, size: 4 },
      { t: NaN, op: "alloc", id: 1, size: 4 },
      { t: 0, op: "alloc", id: 1, size: 4, s: 3 },
      Object.create(null),
      { t: 0, op: "__proto__", id: 1 },
      { t: 0, op: "toString", id: 1 },
    ];
    for (const e of frees) {
      assert.throws(
        () =>
          validateTrace({ header: JSON.parse(HEADER), events: [e] } as never),
        TraceFormatError,
        JSON.stringify(e),
      );
      assert.throws(
        () =>
          replayTrace({ header: JSON.parse(HEADER), events: [e] } as never, {
            repeat: 1,
          }),
        TraceFormatError,
      );
    }
    // events out of order
    assert.throws(
      () =>
        validateTrace({
          header: JSON.parse(HEADER),
          events: [
            { t: 5, op: "alloc", id: 1, size: 4 },
            { t: 1, op: "free", id: 1 },
          ],
        } as never),
      TraceFormatError,
    );
  });

  it("readTraceFile() refuses a truncated gzip file with a TraceFormatError", async () => {
    const text = goodLines(50).join("\n");
    const gz = gzipSync(new TextEncoder().encode(text));
    const path = await Deno.makeTempFile({ suffix: ".jsonl.gz" });
    try {
      await Deno.writeFile(path, gz);
      const whole = await readTraceFile(path);
      assert.ok(whole.events.length > 50);
      for (const cut of [3, 10, gz.length >> 1, gz.length - 4, gz.length - 1]) {
        await Deno.writeFile(path, gz.subarray(0, cut));
        await assert.rejects(
          () => readTraceFile(path),
          (e) => e instanceof AllotError && e instanceof TraceFormatError,
          `cut at ${cut}`,
        );
      }
    } finally {
      await Deno.remove(path);
    }
  });
});

describe("trace ninth review: option bags whose keys cannot be read", () => {
  it("TraceRecorder, replayTrace(), memoryReport(), timelineSvg(), reportHtml() and captureStack() refuse a trap proxy as options with an InvalidArgumentError", () => {
    const trace = parseTrace(goodLines(3).join("\n"));
    const tl = memoryTimeline(trace);
    for (
      const call of [
        () => new TraceRecorder(trapObject() as never),
        () => new TraceRecorder({ capture: trapObject() as never }),
        () => replayTrace(trace, trapObject() as never),
        () => memoryReport(trace, trapObject() as never),
        () => timelineSvg(tl, trapObject() as never),
        () => reportHtml(tl, trapObject() as never),
        () => captureStack(trapObject() as never),
      ]
    ) {
      assert.throws(call, InvalidArgumentError);
    }
  });
});

/** A device whose methods are its prototype's, as a GPUDevice's are. */
class FakeDevice {
  created = 0;
  queue = new (class {
    submit(): void {}
    writeBuffer(): void {}
  })();
  createBuffer(d: { size: number; usage: number }) {
    this.created++;
    return new (class {
      size = d.size;
      usage = d.usage;
      destroy(): void {}
    })();
  }
}

describe("trace ninth review: recorders given collaborators that trap or change when read", () => {
  it("recordDevice() and recordBufferPool() refuse a device, queue or pool that traps when read with an InvalidArgumentError", () => {
    const recording = recordDevice(new FakeDevice() as never, {
      stacks: "none",
    });
    const trapQueue = Object.assign(Object.create(FakeDevice.prototype), {
      queue: trapObject(),
    });
    for (
      const call of [
        () => recordDevice(trapObject() as never),
        () => recordDevice(trapQueue as never),
        () => recordBufferPool(trapObject() as never, recording),
      ]
    ) {
      assert.throws(call, InvalidArgumentError);
    }
  });

  it("recordDevice() and recordBufferPool() read each method once: a getter that answers a function, then junk, cannot slip past the check", () => {
    let reads = 0;
    const device = new FakeDevice();
    const proto = Object.create(FakeDevice.prototype, {
      createBuffer: {
        get() {
          return ++reads === 1 ? FakeDevice.prototype.createBuffer : 5;
        },
        set(this: object, v: unknown) {
          Object.defineProperty(this, "createBuffer", {
            value: v,
            writable: true,
            configurable: true,
          });
        },
      },
    });
    const lying = Object.assign(Object.create(proto), {
      created: 0,
      queue: device.queue,
    });
    const { device: recorded, recorder } = recordDevice(
      lying as unknown as GPUDevice,
      { stacks: "none" },
    );
    recorded.createBuffer({ size: 16, usage: 4 });
    assert.equal(reads, 1);
    assert.deepEqual(
      parseTrace(recorder.toJsonLines()).events.map((e) => e.op),
      ["create"],
    );

    let poolReads = 0;
    const acquire = (size: number, usage: number) => ({ size, usage });
    const pool = Object.create({
      get acquireBuffer() {
        return ++poolReads === 1 ? acquire : "junk";
      },
      set acquireBuffer(v: unknown) {
        Object.defineProperty(this, "acquireBuffer", {
          value: v,
          writable: true,
          configurable: true,
        });
      },
      releaseBuffer(): void {},
    });
    const recording = recordDevice(new FakeDevice() as never, {
      stacks: "none",
    });
    recordBufferPool(pool, recording);
    pool.acquireBuffer(16, 4);
    assert.equal(poolReads, 1);
  });

  it("recordDevice() of a device whose queue is frozen refuses with a typed error and leaves the device unpatched (it was half-recorded, for good)", () => {
    const device = new FakeDevice();
    Object.freeze(device.queue);
    assert.throws(
      () => recordDevice(device as never, { stacks: "none" }),
      InvalidArgumentError,
    );
    assert.equal(Object.hasOwn(device, "createBuffer"), false);
    // nothing was recorded or patched: a plain call works as before
    device.createBuffer({ size: 4, usage: 0 });
    assert.equal(device.created, 1);
    // a frozen pool: refused, not marked recorded
    const recording = recordDevice(new FakeDevice() as never, {
      stacks: "none",
    });
    const frozen = Object.freeze({
      acquireBuffer: (size: number) => ({ size }),
      releaseBuffer: () => {},
    });
    assert.throws(
      () => recordBufferPool(frozen, recording),
      InvalidArgumentError,
    );
    const thawed = { ...frozen };
    recordBufferPool(thawed, recording)();
  });
});

describe("trace ninth review: fromAllocatorSnapshot() with entries that trap or change", () => {
  const entry = (action: string, extra = {}) => ({
    action,
    address: 0,
    byteLength: 64,
    requestedByteLength: 64,
    stream: 0,
    timeMs: 1,
    ...extra,
  });

  it("an entry that traps when read is refused with an InvalidArgumentError naming it", () => {
    assert.throws(
      () => fromAllocatorSnapshot(trapObject() as never),
      InvalidArgumentError,
    );
    for (const h of [trapObject(), [entry("alloc"), trapObject()]]) {
      const history = Array.isArray(h) ? h : [h];
      assert.throws(
        () => fromAllocatorSnapshot({ history, segments: [] } as never),
        (e) => e instanceof InvalidArgumentError && /history\[/.test(e.message),
      );
    }
  });

  it("each entry is read once: a getter that answers a size to the check and NaN to the conversion cannot reach the trace", () => {
    let reads = 0;
    const lying = {
      action: "alloc",
      address: 0,
      get byteLength() {
        return ++reads === 1 ? 64 : NaN;
      },
      timeMs: 1,
    };
    const trace = fromAllocatorSnapshot(
      { history: [lying, entry("free_requested")], segments: [] } as never,
    );
    assert.equal(reads, 1);
    validateTrace(trace);
    assert.deepEqual(
      trace.events.map((e) => e.op === "alloc" ? e.size : e.op),
      [64, "free"],
    );
  });
});

describe("trace ninth review: hostile text in a trace (held)", () => {
  it("memoryReport() and timelineSvg() escape tags, labels, stack frames, step names and titles that hold markup", () => {
    const evil =
      `</script><script>alert(1)</script><img src=x onerror=alert(2)>`;
    const text = (source: string) =>
      [
        JSON.stringify({ format: "allot-trace", version: 1, source }),
        JSON.stringify({
          t: 0,
          op: "stack",
          sid: 0,
          frames: [{ at: source, kind: "user" }],
        }),
        JSON.stringify({ t: 0, op: "create", id: 0, size: 4096, usage: 132 }),
        JSON.stringify({
          t: 1,
          op: "alloc",
          id: 0,
          size: 1024,
          tag: source,
          s: 0,
        }),
        JSON.stringify({ t: 2, op: "step", name: source }),
        JSON.stringify({ t: 3, op: "free", id: 0 }),
      ].join("\n");
    const scripts = (html: string) => html.split("</script>").length;
    const benign = memoryReport(text("plain"), { repeat: 1, title: "plain" });
    const hostile = memoryReport(text(evil), { repeat: 1, title: evil });
    assert.equal(scripts(hostile), scripts(benign));
    assert.ok(!hostile.includes("<img src=x"));
    const svg = timelineSvg(memoryTimeline(parseTrace(text(evil))));
    assert.ok(!svg.includes("<img") && !svg.includes("<script"));
  });
});
