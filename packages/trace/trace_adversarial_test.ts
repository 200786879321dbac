/**
 * Adversarial tests of `@allot/trace` from the public API outward: parsing
 * hostile text and objects, recording lying devices, replaying through
 * throwing and lying policies, drawing forged timelines and report options.
 * Every refused call throws a typed allot error and changes nothing: the
 * trace, recorder or device it was given reads the same afterwards.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  captureStack,
  classifyFrame,
  formatReplay,
  formatTrace,
  memoryReport,
  memoryTimeline,
  ortBucketSize,
  parseStack,
  parseTrace,
  type PolicyFactory,
  recordBufferPool,
  recordDevice,
  recordedHeld,
  type ReplayOps,
  replayOps,
  replayTrace,
  reportHtml,
  tagGroups,
  timelineSvg,
  type Trace,
  TraceFormatError,
  traceOps,
  TraceRecorder,
  validateTrace,
} from "./mod.ts";
import {
  type Hostile,
  hostileNumbers,
  hostileObjects,
  hostileObjectsBut,
  HostileTally,
  HostileTrapError,
  throwingGetter,
  trapObject,
} from "../core/_test_hostile.ts";

const tally = new HostileTally();
const numbers = hostileNumbers();
const objectsBut = hostileObjectsBut;

const { refuse } = tally;

const HEADER = `{"format":"allot-trace","version":1,"source":"adv"}`;
const GOOD = [
  HEADER,
  `{"t":0,"op":"create","id":0,"size":4096,"usage":128,"tag":"w"}`,
  `{"t":1,"op":"alloc","id":1,"size":100,"buffer":0,"offset":0}`,
  `{"t":2,"op":"step","name":"s"}`,
  `{"t":3,"op":"free","id":1}`,
  `{"t":4,"op":"destroy","id":0}`,
].join("\n");

/** A valid trace, and its JSON form to compare after refused calls. */
function goodTrace(): { trace: Trace; state: () => string } {
  const trace = parseTrace(GOOD);
  return { trace, state: () => JSON.stringify(trace) };
}

/** Hostile versions of one event field (numbers where ids and sizes go). */
function fieldVariants(
  event: Record<string, unknown>,
  key: string,
): Hostile[] {
  return [
    ...numbers.filter((h) =>
      !(key === "t" &&
        ["0.5", "1.5", "2^53", "2^53+2", "1e308"].includes(h.name))
    ).filter((h) =>
      !(h.name === "undefined" && key === "usage" && event.op === "alloc")
    ),
    { name: "-0 string", value: "-0" },
  ].map((h) => ({
    name: `${event.op}.${key} ${h.name}`,
    value: { ...event, [key]: h.value },
  }));
}

/** A device whose buffers can lie (its methods on the prototype, as a GPUDevice's). */
class FakeDevice {
  queue = new FakeQueue();
  #lie: () => string;
  constructor(lie: () => string) {
    this.#lie = lie;
  }
  createBuffer(d: { size: number; usage: number }): unknown {
    const lie = this.#lie();
    if (lie === "throw") throw new TypeError("device says no");
    if (lie === "null") return null;
    const b = new FakeBuffer(lie === "size" ? NaN : d.size, d.usage);
    return lie === "frozen" ? Object.freeze(b) : b;
  }
}
class FakeQueue {
  submit(): void {}
  writeBuffer(): void {}
}
class FakeBuffer {
  constructor(readonly size: number, readonly usage: number) {}
  destroy(): void {}
  mapAsync(): Promise<void> {
    return Promise.resolve();
  }
  unmap(): void {}
}

/** Builds a trace object whose only event is `e`. */
function oneEvent(e: unknown): Trace {
  return {
    header: { format: "allot-trace", version: 1 },
    events: [e],
  } as unknown as Trace;
}

describe("@allot/trace adversarial", () => {
  after(() => {
    console.log(
      `trace adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("parseTrace() refuses hostile text with TraceFormatError or InvalidArgumentError", () => {
    const lines: Hostile[] = [
      { name: "empty", value: "" },
      { name: "blank lines", value: "\n\n  \n" },
      { name: "not JSON", value: "{format" },
      { name: "header array", value: "[1]" },
      { name: "header null", value: "null" },
      { name: "wrong format", value: `{"format":"x","version":1}` },
      { name: "version 2", value: `{"format":"allot-trace","version":2}` },
      {
        name: "version as string",
        value: `{"format":"allot-trace","version":"1"}`,
      },
      { name: "event array", value: `${HEADER}\n[]` },
      { name: "event number", value: `${HEADER}\n5` },
      { name: "no op", value: `${HEADER}\n{"t":0}` },
      { name: "unknown op", value: `${HEADER}\n{"t":0,"op":"boom"}` },
      {
        name: "op __proto__",
        value: `${HEADER}\n{"t":0,"op":"__proto__"}`,
      },
      { name: "time back", value: `${GOOD}\n{"t":1,"op":"step"}` },
      {
        name: "free unknown",
        value: `${HEADER}\n{"t":0,"op":"free","id":9}`,
      },
      {
        name: "destroy twice",
        value: `${GOOD}\n{"t":5,"op":"destroy","id":0}`,
      },
      {
        name: "created twice",
        value:
          `${HEADER}\n{"t":0,"op":"create","id":0,"size":1,"usage":0}\n{"t":0,"op":"create","id":0,"size":1,"usage":0}`,
      },
      {
        name: "stack before definition",
        value: `${HEADER}\n{"t":0,"op":"step","s":3}`,
      },
      {
        name: "bad frame",
        value: `${HEADER}\n{"t":0,"op":"stack","sid":0,"frames":[{"at":1}]}`,
      },
      {
        name: "frames not array",
        value: `${HEADER}\n{"t":0,"op":"stack","sid":0,"frames":{}}`,
      },
      {
        name: "huge size",
        value: `${HEADER}\n{"t":0,"op":"create","id":0,"size":1e300,"usage":0}`,
      },
      {
        name: "mapped string",
        value:
          `${HEADER}\n{"t":0,"op":"create","id":0,"size":1,"usage":0,"mapped":"yes"}`,
      },
      {
        name: "truncated last line",
        value: `${GOOD}\n{"t":5,"op":"st`,
      },
      {
        name: "error without message",
        value: `${HEADER}\n{"t":0,"op":"error","call":"x"}`,
      },
      ...numbers.map((h) => ({ name: `text ${h.name}`, value: h.value }))
        .filter((h) => typeof h.value !== "string"),
      ...objectsBut().map((h) => ({ name: `text ${h.name}`, value: h.value })),
    ];
    refuse("parseTrace(text)", lines, (v) => parseTrace(v as string));
  });

  it("validateTrace(), formatTrace(), traceOps(), recordedHeld(), memoryTimeline() and replayTrace() refuse hostile trace objects", () => {
    const create = { t: 0, op: "create", id: 0, size: 8, usage: 128 };
    const alloc = { t: 0, op: "alloc", id: 1, size: 8 };
    const objects: Hostile[] = [
      ...hostileObjects(),
      {
        name: "no events",
        value: { header: { format: "allot-trace", version: 1 } },
      },
      {
        name: "events not array",
        value: { header: { format: "allot-trace", version: 1 }, events: {} },
      },
      { name: "header null", value: { header: null, events: [] } },
      { name: "header trap", value: { header: trapObject(), events: [] } },
      { name: "events getter throws", value: throwingGetter("events") },
      { name: "event null", value: oneEvent(null) },
      { name: "event trap", value: oneEvent(trapObject()) },
      { name: "event BigInt t", value: oneEvent({ t: 0n, op: "step" }) },
      { name: "event Symbol op", value: oneEvent({ t: 0, op: Symbol("x") }) },
      { name: "step name 5", value: oneEvent({ t: 0, op: "step", name: 5 }) },
      { name: "tag object", value: oneEvent({ t: 0, op: "step", tag: {} }) },
      ...fieldVariants(create, "size").map((h) => ({
        ...h,
        value: oneEvent(h.value),
      })),
      ...fieldVariants(create, "id").map((h) => ({
        ...h,
        value: oneEvent(h.value),
      })),
      ...fieldVariants(create, "usage").map((h) => ({
        ...h,
        value: oneEvent(h.value),
      })),
      ...fieldVariants(create, "t").map((h) => ({
        ...h,
        value: oneEvent(h.value),
      })),
      ...fieldVariants(alloc, "size").map((h) => ({
        ...h,
        value: oneEvent(h.value),
      })),
      ...fieldVariants(alloc, "offset").filter((h) => !/undefined/.test(h.name))
        .map((h) => ({
          ...h,
          value: oneEvent(h.value),
        })),
    ];
    const calls: [string, (v: unknown) => unknown][] = [
      ["validateTrace(trace)", (v) => validateTrace(v as Trace)],
      ["formatTrace(trace)", (v) => formatTrace(v as Trace)],
      ["traceOps(trace)", (v) => traceOps(v as Trace)],
      ["recordedHeld(trace)", (v) => recordedHeld(v as Trace)],
      ["memoryTimeline(trace)", (v) => memoryTimeline(v as Trace)],
      [
        "replayTrace(trace)",
        (v) => replayTrace(v as Trace, { repeat: 1, policies: [] }),
      ],
      [
        "memoryReport(trace)",
        (v) => memoryReport(v as Trace, { replay: false }),
      ],
    ];
    for (const [label, call] of calls) refuse(label, objects, call);
    // the error names the event's line in formatTrace's output
    assert.throws(
      () => validateTrace(oneEvent({ t: 0, op: "free", id: 4 })),
      (e) => e instanceof TraceFormatError && e.line === 2,
    );
  });

  it("replayTrace(), replayOps() and traceOps() refuse hostile options, ops and policy factories, changing nothing", () => {
    const { trace, state } = goodTrace();
    const opts = { snapshot: state };
    refuse(
      "replayTrace(trace, options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => replayTrace(trace, v as object),
      opts,
    );
    refuse(
      "replayTrace(trace, { repeat })",
      numbers.filter((h) => !["undefined", "null"].includes(h.name)).concat(
        [{ name: "0", value: 0 }, { name: "1001", value: 1001 }],
      ),
      (v) => replayTrace(trace, { repeat: v as number, policies: [] }),
      opts,
    );
    refuse(
      "replayTrace(trace, { usage })",
      [
        // (null, like undefined, means the default)
        ...objectsBut("undefined", "null"),
        { name: '"All"', value: "All" },
        { name: '"storage "', value: "storage " },
      ],
      (v) => replayTrace(trace, { usage: v as "all" }),
      opts,
    );
    refuse(
      "traceOps(trace, usage)",
      [...objectsBut("undefined"), { name: '"gpu"', value: "gpu" }],
      (v) => traceOps(trace, v as "all"),
      opts,
    );
    const factory = (patch: Record<string, unknown>) => ({
      name: "p",
      description: "d",
      create: () => ({}),
      ...patch,
    });
    refuse(
      "replayTrace(trace, { policies })",
      [
        // (null, like undefined, means the default policies)
        ...objectsBut("undefined", "null", "[]"),
        ...hostileObjects().map((h) => ({
          name: `[${h.name}]`,
          value: [h.value],
        })),
        ...hostileObjects().filter((h) => h.name !== "() => {}").map((
          h,
        ) => ({
          name: `create ${h.name}`,
          value: [factory({ create: h.value })],
        })),
        ...objectsBut('"abc"').map((h) => ({
          name: `name ${h.name}`,
          value: [factory({ name: h.value })],
        })),
        { name: "throwing name getter", value: [throwingGetter("name")] },
      ],
      (v) =>
        replayTrace(trace, {
          policies: v as PolicyFactory[],
          repeat: 1,
        }),
      opts,
    );
    const ops = traceOps(trace);
    const forged = (patch: Record<string, unknown>) => ({ ...ops, ...patch });
    refuse(
      "replayOps(ops)",
      [
        ...hostileObjects(),
        ...numbers.map((h) => ({
          name: `length ${h.name}`,
          value: forged({ length: h.value }),
        })),
        {
          name: "length past arrays",
          value: forged({ length: ops.length + 1 }),
        },
        { name: "code plain array", value: forged({ code: [0] }) },
        { name: "size array", value: forged({ size: [1] }) },
        { name: "from 'gpu'", value: forged({ from: "gpu" }) },
        {
          name: "op code 9",
          value: forged({ code: Uint8Array.from(ops.code, () => 9) }),
        },
        {
          name: "size NaN",
          value: forged({ size: Float64Array.from(ops.size, () => NaN) }),
        },
      ],
      (v) => replayOps(v as ReplayOps, { policies: [], repeat: 1 }),
      opts,
    );
  });

  it("replayTrace() turns throwing, lying and re-entering policies into error rows and disposes them; the other rows are unchanged", () => {
    const { trace, state } = goodTrace();
    const before = state();
    let disposed = 0;
    const policy = (
      name: string,
      misbehave: Partial<Record<string, () => unknown>>,
    ): PolicyFactory => ({
      name,
      description: name,
      create() {
        let held = 0;
        return {
          alloc: (_id: number, size: number) => {
            misbehave.alloc?.();
            held += size;
          },
          free: () => void misbehave.free?.(),
          sync: () => void misbehave.sync?.(),
          heldBytes: () =>
            misbehave.heldBytes ? misbehave.heldBytes() as number : held,
          buffersCreated: () =>
            misbehave.buffersCreated ? misbehave.buffersCreated() as number : 1,
          dispose: () => void disposed++,
        };
      },
    });
    const boom = () => {
      throw new Error("boom");
    };
    const policies = [
      policy("alloc throws", { alloc: boom }),
      policy("free throws", { free: boom }),
      policy("sync throws", { sync: boom }),
      policy("throws null", {
        free: () => {
          throw null;
        },
      }),
      policy("throws a trap", {
        free: () => {
          throw trapObject();
        },
      }),
      policy("throws a throwing message", {
        free: () => {
          throw throwingGetter("message");
        },
      }),
      policy("held NaN", { heldBytes: () => NaN }),
      policy("held -1", { heldBytes: () => -1 }),
      policy("held 8n", { heldBytes: () => 8n }),
      policy("created Infinity", { buffersCreated: () => Infinity }),
      policy("re-enters replay", {
        free: () => void replayTrace(trace, { repeat: 1, policies: [] }),
      }),
      {
        name: "create throws",
        description: "",
        create: () => {
          throw new HostileTrapError("create");
        },
      },
      policy("fine", {}),
    ];
    const report = replayTrace(trace, { policies, repeat: 2 });
    assert.equal(state(), before, "the trace was not changed");
    const byName = new Map(report.policies.map((r) => [r.name, r]));
    for (const p of policies) {
      const row = byName.get(p.name)!;
      const ok = p.name === "fine" || p.name === "re-enters replay";
      assert.equal(row.error === undefined, ok, `${p.name}: ${row.error}`);
      if (!ok) {
        assert.equal(typeof row.error, "string");
        assert.ok(Number.isNaN(row.peakReservedBytes));
      } else assert.equal(row.peakReservedBytes, 100);
    }
    // every instance made was disposed, the throwing ones included
    // (12 policies make one instance, and the 2 that succeed 2 more each)
    assert.equal(disposed, 12 + 2 * 2);
    tally.add("replayTrace(trace, { policies }) misbehaving policies", {
      calls: policies.length,
    });
  });

  it("recordDevice() refuses hostile devices and options, leaving the device unpatched", () => {
    const device = () => new FakeDevice(() => "none");
    refuse(
      "recordDevice(device)",
      [
        ...hostileObjects(),
        { name: "no queue", value: { createBuffer() {} } },
        {
          name: "queue without submit",
          value: { createBuffer() {}, queue: { writeBuffer() {} } },
        },
        { name: "queue null", value: { createBuffer() {}, queue: null } },
        { name: "createBuffer 5", value: { createBuffer: 5, queue: {} } },
        {
          name: "already recorded",
          value: recordDevice(device() as never).device,
        },
      ],
      (v) => recordDevice(v as never),
    );
    const d = device();
    const keys = () => Object.keys(d).join() + Object.keys(d.queue).join();
    const before = keys();
    refuse(
      "recordDevice(device, options)",
      [
        ...objectsBut("undefined", "{}", "[]", "() => {}"),
        ...objectsBut("undefined").map((h) => ({
          name: `recorder ${h.name}`,
          value: { recorder: h.value },
        })),
        ...objectsBut("undefined", "null").map((h) => ({
          name: `stacks ${h.name}`,
          value: { stacks: h.value },
        })),
        ...objectsBut("undefined", "null", "() => {}").map((h) => ({
          name: `now ${h.name}`,
          value: { now: h.value },
        })),
      ],
      (v) => recordDevice(d as never, v as object),
      { snapshot: keys },
    );
    assert.equal(keys(), before);
  });

  it("recordDevice() keeps a valid trace when the device lies, and passes the device's errors on", () => {
    let lie: "none" | "null" | "size" | "frozen" | "throw" = "none";
    let t = 0;
    const device = new FakeDevice(() => lie);
    const clocks = [NaN, -5, Infinity, 3, 2, 1e308];
    const rec = recordDevice(device as never, {
      now: () => {
        const v = clocks[t++ % clocks.length];
        if (t % 7 === 0) throw new Error("clock broke");
        return v;
      },
    });
    const dev = rec.device as unknown as {
      createBuffer(d: object): { destroy(): void } | null;
      queue: {
        submit(x: unknown): void;
        writeBuffer(...a: unknown[]): void;
      };
    };
    const made: unknown[] = [];
    for (const l of ["none", "null", "size", "frozen", "none"] as const) {
      lie = l;
      made.push(dev.createBuffer({ size: 64, usage: 128 }));
    }
    lie = "throw";
    assert.throws(() => dev.createBuffer({ size: 64, usage: 128 }), TypeError);
    const good = made[0] as { destroy(): void };
    dev.queue.writeBuffer(good, 0, new Uint8Array(8));
    dev.queue.writeBuffer(good, "x", null);
    dev.queue.writeBuffer(good, -5, new Uint8Array(8), 0, NaN);
    dev.queue.writeBuffer(null, 0, new Uint8Array(8));
    dev.queue.submit(5);
    dev.queue.submit([1, 2]);
    (good as unknown as { mapAsync(m: unknown): unknown }).mapAsync(
      Symbol("mode"),
    );
    good.destroy();
    good.destroy();
    rec.stop();
    const text = rec.recorder.toJsonLines();
    const trace = parseTrace(text); // a lying device still gives a valid trace
    const ops = trace.events.map((e) => e.op);
    assert.equal(ops.filter((o) => o === "create").length, 2);
    assert.ok(ops.filter((o) => o === "error").length >= 4);
    assert.equal(ops.filter((o) => o === "destroy").length, 1);
    tally.add("recordDevice(lying device)", { calls: 12 });
  });

  it("recordBufferPool() refuses hostile pools and recordings, and records a lying pool's requests as errors", () => {
    const pool = {
      acquireBuffer: (size: number) => ({ size }),
      releaseBuffer: () => {},
    };
    const rec = recordDevice(new FakeDevice(() => "none") as never);
    refuse(
      "recordBufferPool(pool, recording)",
      [
        ...hostileObjects(),
        { name: "no releaseBuffer", value: { acquireBuffer() {} } },
      ],
      (v) => recordBufferPool(v as never, rec),
    );
    refuse(
      "recordBufferPool(pool, recording) recording",
      [
        ...hostileObjects(),
        { name: "recorder {}", value: { recorder: {}, bufferId: () => 0 } },
      ],
      (v) => recordBufferPool(pool, v as never),
    );
    const stop = recordBufferPool(pool, rec);
    const p = pool as unknown as {
      acquireBuffer(size: unknown, usage: unknown): unknown;
      releaseBuffer(b: unknown): unknown;
    };
    for (const size of [NaN, -1, 0.5, 8n, "8", 64]) {
      p.releaseBuffer(p.acquireBuffer(size, 128));
    }
    stop();
    rec.stop();
    const trace = parseTrace(rec.recorder.toJsonLines());
    assert.deepEqual(
      trace.events.map((e) => e.op).filter((op) => op !== "stack"),
      ["error", "error", "error", "error", "error", "alloc", "free"],
    );
  });

  it("classifyFrame(), parseStack(), captureStack(), ortBucketSize() and formatReplay() refuse hostile values", () => {
    const notStrings = objectsBut('"abc"').concat([
      { name: "8", value: 8 },
      { name: "8n", value: 8n },
    ]);
    refuse("classifyFrame(at)", notStrings, (v) => classifyFrame(v as string));
    refuse("parseStack(text)", notStrings, (v) => parseStack(v as string));
    const classifiers: Hostile[] = [
      ...objectsBut("undefined", "() => {}"),
      { name: "returns 5", value: () => 5 },
      { name: 'returns "system"', value: () => "system" },
      {
        name: "throws",
        value: () => {
          throw new HostileTrapError("classify");
        },
      },
    ];
    refuse(
      "parseStack(text, classify)",
      classifiers,
      (v) => parseStack("at f (a.ts:1:1)", v as () => "user"),
    );
    refuse(
      "captureStack(options)",
      [
        ...objectsBut("undefined", "{}", "[]", "() => {}"),
        ...numbers.filter((h) => !["undefined", "null"].includes(h.name)).map((
          h,
        ) => ({ name: `depth ${h.name}`, value: { depth: h.value } })),
        ...classifiers.filter((h) => h.name !== "null").map((h) => ({
          name: `classify ${h.name}`,
          value: { classify: h.value },
        })),
      ],
      (v) => captureStack(v as object),
    );
    refuse(
      "captureStack({}, skip)",
      numbers.filter((h) => h.name !== "undefined"),
      (v) => captureStack({}, v as number),
    );
    refuse(
      "ortBucketSize(size)",
      numbers,
      (v) => ortBucketSize(v as number),
    );
    const { trace } = goodTrace();
    const report = replayTrace(trace, { repeat: 1 });
    const forged = (patch: Record<string, unknown>) => ({
      ...report,
      ...patch,
    });
    const row = report.policies[0];
    refuse(
      "formatReplay(report)",
      [
        ...hostileObjects(),
        { name: "policies null", value: forged({ policies: null }) },
        { name: "policies [null]", value: forged({ policies: [null] }) },
        {
          name: "peakRequestedBytes '1'",
          value: forged({ peakRequestedBytes: "1" }),
        },
        {
          name: "row nsPerOp BigInt",
          value: forged({ policies: [{ ...row, nsPerOp: 1n }] }),
        },
        {
          name: "row name Symbol",
          value: forged({ policies: [{ ...row, name: Symbol("n") }] }),
        },
        {
          name: "row error 5",
          value: forged({ policies: [{ ...row, error: 5 }] }),
        },
      ],
      (v) => formatReplay(v as never),
    );
    assert.match(formatReplay(report), /peak live/);
  });

  it("TraceRecorder refuses hostile options, tags and step names", () => {
    const recorder = new TraceRecorder({ now: () => 0 });
    recorder.step("a");
    const state = () => JSON.stringify(recorder.toTrace().events);
    refuse(
      "new TraceRecorder(options)",
      [
        ...objectsBut("undefined", "{}", "[]", "() => {}"),
        ...objectsBut("undefined", "null").map((h) => ({
          name: `stacks ${h.name}`,
          value: { stacks: h.value },
        })),
        ...objectsBut("undefined").map((h) => ({
          name: `source ${h.name}`,
          value: { source: h.value },
        })).filter((h) => h.name !== 'source "abc"'),
        // (a proxy is an object: it is kept as it is)
        ...objectsBut("undefined", "{}", "[]", "() => {}", "trap proxy").map((
          h,
        ) => ({
          name: `meta ${h.name}`,
          value: { meta: h.value },
        })),
      ],
      (v) => new TraceRecorder(v as object),
    );
    refuse(
      "recorder.setTag(tag)",
      objectsBut("undefined", '"abc"'),
      (v) => recorder.setTag(v as string),
      { snapshot: () => [state(), recorder.tag] },
    );
    refuse(
      "recorder.step(name)",
      objectsBut("undefined", '"abc"'),
      (v) => recorder.step(v as string),
      { snapshot: state },
    );
    refuse(
      "recorder.withTag(tag, fn)",
      objectsBut("undefined", '"abc"'),
      (v) => recorder.withTag(v as string, () => 1),
      { snapshot: () => [state(), recorder.tag] },
    );
    refuse(
      'recorder.withTag("t", fn)',
      objectsBut("() => {}"),
      (v) => recorder.withTag("t", v as () => void),
      { snapshot: () => [state(), recorder.tag] },
    );
  });

  it("timelineSvg(), tagGroups(), reportHtml() and memoryReport() refuse forged timelines and hostile options", () => {
    const { trace } = goodTrace();
    const tl = memoryTimeline(trace);
    const forged = (patch: Record<string, unknown>) => ({ ...tl, ...patch });
    const timelines: Hostile[] = [
      ...hostileObjects(),
      { name: "time plain array", value: forged({ time: [0] }) },
      { name: "live shorter", value: forged({ live: new Float64Array(0) }) },
      { name: "allocations null", value: forged({ allocations: null }) },
      {
        name: "allocation tag past tags",
        value: forged({
          allocations: tl.allocations.map((a) => ({ ...a, tag: 99 })),
        }),
      },
      {
        name: "allocation size BigInt",
        value: forged({
          allocations: tl.allocations.map((a) => ({ ...a, size: 8n })),
        }),
      },
      {
        name: "allocation end before start",
        value: forged({
          allocations: tl.allocations.map((a) => ({ ...a, end: -1 })),
        }),
      },
      { name: "tags [5]", value: forged({ tags: [5] }) },
      { name: "stacks [[trap]]", value: forged({ stacks: [[trapObject()]] }) },
      { name: "peakLiveAt 1e9", value: forged({ peakLiveAt: 1e9 }) },
      {
        name: "steps [{at: -1}]",
        value: forged({ steps: [{ at: -1, name: "" }] }),
      },
      { name: "source Symbol", value: forged({ source: Symbol("s") }) },
      {
        name: "subject past allocations",
        value: forged({ subject: Int32Array.from(tl.subject, () => 50) }),
      },
    ];
    refuse("timelineSvg(timeline)", timelines, (v) => timelineSvg(v as never));
    refuse("tagGroups(timeline)", timelines, (v) => tagGroups(v as never));
    refuse("reportHtml(timeline)", timelines, (v) => reportHtml(v as never));
    const sizes = numbers.filter((h) => !["undefined", "null"].includes(h.name))
      .concat([{ name: "10001", value: 10001 }]);
    refuse(
      "timelineSvg(timeline, { width })",
      sizes.concat([{ name: "99", value: 99 }]),
      (v) => timelineSvg(tl, { width: v as number }),
    );
    refuse(
      "timelineSvg(timeline, { height })",
      sizes.concat([{ name: "59", value: 59 }]),
      (v) => timelineSvg(tl, { height: v as number }),
    );
    refuse(
      "timelineSvg(timeline, options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => timelineSvg(tl, v as object),
    );
    refuse(
      "tagGroups(timeline, most)",
      numbers.filter((h) => h.name !== "undefined"),
      (v) => tagGroups(tl, v as number),
    );
    refuse(
      "reportHtml(timeline, options)",
      [
        ...objectsBut("undefined", "{}", "[]", "() => {}"),
        ...objectsBut("undefined", '"abc"').map((h) => ({
          name: `title ${h.name}`,
          value: { title: h.value },
        })),
        ...objectsBut("undefined").map((h) => ({
          name: `whatIf ${h.name}`,
          value: { whatIf: h.value },
        })),
        {
          name: "whatIf with BigInt",
          value: { whatIf: { policies: [{ name: "x", peakHeldBytes: 1n }] } },
        },
      ],
      (v) => reportHtml(tl, v as object),
    );
    refuse(
      "memoryReport(trace, options)",
      [
        ...objectsBut("undefined", "{}", "[]", "() => {}"),
        ...objectsBut("undefined", '"abc"').map((h) => ({
          name: `title ${h.name}`,
          value: { title: h.value, replay: false },
        })),
        { name: "repeat 0", value: { repeat: 0 } },
        { name: "policies 5", value: { policies: 5 } },
      ],
      (v) => memoryReport(trace, v as object),
    );
    refuse(
      "memoryReport(text)",
      [
        { name: "bad text", value: "{" },
        { name: "empty", value: "" },
      ],
      (v) => memoryReport(v as string),
    );
  });
});
