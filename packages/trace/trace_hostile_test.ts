/**
 * Hostile tests of `@allot/trace` beyond the adversarial table: events pushed
 * with their own clock, devices whose buffers and queues carry their methods
 * as own properties, the CLI fed unknown commands, unknown options, unreadable
 * gzip and unwritable outputs, traces with prototype keys, and labels, tags
 * and stack frames written to break out of the HTML report.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InvalidArgumentError } from "@allot/core";
import {
  captureStack,
  formatReplay,
  formatTrace,
  fromAllocatorSnapshot,
  memoryReport,
  memoryTimeline,
  parseTrace,
  recordBufferPool,
  recordDevice,
  replayTrace,
  reportHtml,
  tagGroups,
  timelineSvg,
  TraceFormatError,
  TraceRecorder,
} from "./mod.ts";
import { main, readTraceFile } from "./cli.ts";
import {
  assertRefused,
  hostileFlags,
  hostileNumbersBut,
  hostileObjectsBut,
  HostileTally,
} from "../core/_test_hostile.ts";

const tally = new HostileTally();
const { refuse } = tally;

const HEADER = `{"format":"allot-trace","version":1,"source":"hostile"}`;

/** Runs `main` with console output swallowed; returns the exit code. */
async function quietMain(args: unknown): Promise<number> {
  const { log, error } = console;
  console.log = () => {};
  console.error = () => {};
  try {
    return await main(args as string[]);
  } finally {
    console.log = log;
    console.error = error;
  }
}

describe("@allot/trace hostile", () => {
  it("TraceRecorder.push keeps its own clock and refuses events without a known op, changing nothing", () => {
    const r = new TraceRecorder({ stacks: "none", now: () => 5 });
    r.step("a");
    r.push({ op: "step", t: -5 } as never, false);
    r.push({ op: "step", t: 1e308 } as never, false);
    r.step("b");
    const trace = parseTrace(r.toJsonLines()); // stays valid
    assert.deepEqual(trace.events.map((e) => e.t), [0, 0, 0, 0]);
    const state = () => r.toJsonLines();
    for (
      const bad of [
        ...hostileObjectsBut(),
        { name: "op stack", value: { op: "stack", sid: 0, frames: [] } },
        { name: "op __proto__", value: { op: "__proto__" } },
        { name: "op missing", value: { id: 1 } },
      ]
    ) {
      assertRefused(
        `push(${bad.name})`,
        () => r.push(bad.value as never, false),
        { snapshot: state, error: InvalidArgumentError },
      );
    }
  });

  it("recordDevice keeps buffers whose methods are own properties working, and gives a queue its own methods back on stop()", async () => {
    const calls: string[] = [];
    const submit = () => calls.push("submit");
    const writeBuffer = () => calls.push("write");
    const queue = { submit, writeBuffer };
    class Device {
      queue = queue;
      createBuffer(d: { size: number; usage: number }) {
        return {
          size: d.size,
          usage: d.usage,
          destroy: () => calls.push("destroy"),
          mapAsync: () => (calls.push("map"), Promise.resolve()),
          unmap: () => calls.push("unmap"),
        };
      }
    }
    const device = new Device();
    const rec = recordDevice(device as never, { stacks: "none" });
    const b = device.createBuffer({ size: 64, usage: 1 });
    await b.mapAsync();
    b.unmap();
    b.destroy();
    b.destroy();
    device.queue.submit();
    rec.stop();
    assert.deepEqual(calls, [
      "map",
      "unmap",
      "destroy",
      "destroy",
      "submit",
    ]);
    assert.equal(queue.submit, submit, "stop() deleted the queue's own submit");
    assert.equal(queue.writeBuffer, writeBuffer);
    const ops = parseTrace(rec.recorder.toJsonLines()).events.map((e) => e.op);
    assert.deepEqual(ops, ["create", "map", "unmap", "destroy", "submit"]);
  });

  it("the CLI: unknown commands and options are usage errors (2), unwritable outputs and bad files are 1, never a throw", async () => {
    const dir = await mkdtemp(join(tmpdir(), "allot-trace-hostile-"));
    try {
      const good = join(dir, "t.jsonl");
      await writeFile(
        good,
        [
          HEADER,
          `{"t":0,"op":"create","id":0,"size":4096,"usage":128}`,
          `{"t":1,"op":"destroy","id":0}`,
        ].join("\n"),
      );
      const gz = join(dir, "bad.jsonl.gz");
      await writeFile(gz, new Uint8Array([0x1f, 0x8b, 1, 2, 3, 4]));
      assert.equal(await quietMain(["bogus", join(dir, "missing")]), 2);
      assert.equal(await quietMain(["validate", good, "--bogus"]), 2);
      assert.equal(await quietMain(["replay", good, "--svg", "x.svg"]), 2);
      assert.equal(await quietMain(["validate", good, "--json"]), 2);
      assert.equal(await quietMain([]), 2);
      assert.equal(await quietMain(["report", good]), 2);
      assert.equal(await quietMain(["replay", good, "--usage"]), 2);
      assert.equal(await quietMain(["replay", good, "--usage", "most"]), 2);
      assert.equal(await quietMain(["validate", good, good]), 2);
      assert.equal(await quietMain(["validate", join(dir, "missing")]), 1);
      assert.equal(await quietMain(["validate", gz]), 1);
      assert.equal(
        await quietMain([
          "report",
          good,
          "-o",
          join(dir, "no", "such", "x.html"),
        ]),
        1,
      );
      assert.equal(await quietMain(["validate", good]), 0);
      assert.equal(await quietMain(["replay", good, "--json"]), 0);
      assert.equal(await quietMain(["--help"]), 0);
      assert.equal(await quietMain("validate"), 2);
      assert.equal(await quietMain([0, good]), 2);
      await assert.rejects(readTraceFile(0 as never), InvalidArgumentError);
      await assert.rejects(readTraceFile(null as never), InvalidArgumentError);
      await assert.rejects(readTraceFile(gz), TraceFormatError);
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it("parseTrace refuses prototype keys, frees before allocs, duplicate ids and hostile numbers with TraceFormatError", () => {
    const bad = [
      `{"t":0,"op":"__proto__","id":1}`,
      `{"t":0,"op":"constructor"}`,
      `{"t":0,"op":"free","id":1}`,
      `{"t":0,"op":"destroy","id":1}`,
      `{"t":0,"op":"alloc","id":1,"size":8}\n{"t":0,"op":"alloc","id":1,"size":8}`,
      `{"t":0,"op":"create","id":1,"size":1e999,"usage":1}`,
      `{"t":0,"op":"create","id":1,"size":-8,"usage":1}`,
      `{"t":0,"op":"create","id":1,"size":9007199254740992,"usage":1}`,
      `{"t":0,"op":"alloc","id":1,"size":8,"s":0}`,
      `{"t":0,"op":"stack","sid":0,"frames":[{"at":"x","kind":"__proto__"}]}`,
      `{"t":2,"op":"step"}\n{"t":1,"op":"step"}`,
      `{"t":0,"op":"create","id":1,"size":8`,
    ];
    for (const body of bad) {
      assert.throws(
        () => parseTrace(`${HEADER}\n${body}`),
        TraceFormatError,
        body,
      );
    }
    const polluted = parseTrace(
      `${HEADER}\n{"t":0,"op":"step","__proto__":{"polluted":true},"name":"s"}`,
    );
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const tl = memoryTimeline(polluted);
    assert.equal(tl.steps.length, 1);
  });

  it("reportHtml and timelineSvg escape labels, tags, step names, stack frames and titles", () => {
    const evil = `</script><img src=x onerror=alert(1)>"'&`;
    const text = [
      `{"format":"allot-trace","version":1,"source":${JSON.stringify(evil)}}`,
      `{"t":0,"op":"stack","sid":0,"frames":[{"at":${
        JSON.stringify(evil)
      },"kind":"user"}]}`,
      `{"t":0,"op":"create","id":0,"size":4096,"usage":128,"label":${
        JSON.stringify(evil)
      },"tag":${JSON.stringify(evil)},"s":0}`,
      `{"t":1,"op":"alloc","id":1,"size":100,"buffer":0,"offset":0,"tag":${
        JSON.stringify(evil)
      },"s":0}`,
      `{"t":2,"op":"step","name":${JSON.stringify(evil)}}`,
      `{"t":3,"op":"free","id":1}`,
    ].join("\n");
    const trace = parseTrace(text);
    const tl = memoryTimeline(trace);
    const html = reportHtml(tl, { whatIf: replayTrace(trace), title: evil });
    const svg = timelineSvg(tl);
    for (const out of [html, svg]) {
      assert.ok(!out.includes("<img"), "an injected element");
      assert.ok(!out.includes("</script><"), "a closed script");
    }
    assert.equal(
      html.match(/<\/script>/g)?.length,
      2,
      "only the report's own scripts close",
    );
    assert.ok(html.includes("&lt;/script&gt;&lt;img"), "the title is escaped");
  });
  it("recordDevice notes a mapAsync that rejects later, and the caller still gets the rejection", async () => {
    class Buffer {
      constructor(readonly size: number, readonly usage: number) {}
      destroy(): void {}
      mapAsync(): Promise<void> {
        return Promise.reject(new Error("device lost"));
      }
      unmap(): void {}
    }
    class Device {
      queue = new (class {
        submit(): void {}
        writeBuffer(): void {}
      })();
      createBuffer(d: { size: number; usage: number }) {
        return new Buffer(d.size, d.usage);
      }
    }
    const device = new Device();
    const rec = recordDevice(device as never, { stacks: "none" });
    const b = device.createBuffer({ size: 64, usage: 1 });
    await assert.rejects(b.mapAsync(), /device lost/);
    rec.stop();
    const events = parseTrace(rec.recorder.toJsonLines()).events;
    assert.deepEqual(events.map((e) => e.op), ["create", "map", "error"]);
    assert.match(JSON.stringify(events[2]), /mapAsync.*device lost/);
  });

  it("recordBufferPool gives a pool its own methods back on stop, and refuses a pool already recorded", () => {
    const device = new (class {
      queue = new (class {
        submit(): void {}
        writeBuffer(): void {}
      })();
      createBuffer(d: { size: number; usage: number }) {
        return { size: d.size, usage: d.usage };
      }
    })();
    const rec = recordDevice(device as never, { stacks: "none" });
    const acquireBuffer = (size: number) => ({ size });
    const releaseBuffer = () => {};
    const pool = { acquireBuffer, releaseBuffer };
    const stop = recordBufferPool(pool, rec);
    assertRefused(
      "recordBufferPool(twice)",
      () => recordBufferPool(pool, rec),
      {
        snapshot: () => [
          pool.acquireBuffer === acquireBuffer,
          rec.recorder.events.length,
        ],
        error: InvalidArgumentError,
      },
    );
    const x = pool.acquireBuffer(16);
    pool.releaseBuffer();
    stop();
    stop();
    assert.equal(
      pool.acquireBuffer,
      acquireBuffer,
      "stop() deleted the pool's own method",
    );
    assert.equal(pool.releaseBuffer, releaseBuffer);
    assert.deepEqual(x, { size: 16 });
    const again = recordBufferPool(pool, rec); // recordable again once stopped
    again();
    rec.stop();
  });

  it("fromAllocatorSnapshot refuses entries the trace format cannot hold, instead of writing an invalid trace", () => {
    const entry = {
      action: "alloc",
      address: 0,
      byteLength: 512,
      requestedByteLength: 500,
      timeMs: 1,
    };
    const ok = fromAllocatorSnapshot({ history: [entry] });
    assert.equal(ok.events.length, 1);
    for (
      const field of [
        "address",
        "byteLength",
        "requestedByteLength",
        "timeMs",
      ] as const
    ) {
      refuse(
        `fromAllocatorSnapshot(${field})`,
        hostileNumbersBut(
          ...(field === "timeMs"
            ? ["0.5", "1.5", "2^53", "2^53+2", "1e308", "-1", "-2^53"]
            : []),
          ...(field === "requestedByteLength" ? ["undefined"] : []),
        ),
        (v) => fromAllocatorSnapshot({ history: [{ ...entry, [field]: v }] }),
        { error: InvalidArgumentError },
      );
    }
    refuse(
      "fromAllocatorSnapshot(tag)",
      hostileObjectsBut("undefined", '"abc"'),
      (v) =>
        fromAllocatorSnapshot({ history: [{ ...entry, tag: v as string }] }),
      { error: InvalidArgumentError },
    );
    refuse(
      "fromAllocatorSnapshot(droppedEntries)",
      hostileNumbersBut("undefined", "null"),
      (v) =>
        fromAllocatorSnapshot({
          history: [entry],
          droppedEntries: v as number,
        }),
      { error: InvalidArgumentError },
    );
    refuse(
      "fromAllocatorSnapshot(source)",
      hostileObjectsBut("undefined", '"abc"'),
      (v) => fromAllocatorSnapshot({ history: [entry] }, v as string),
      { error: InvalidArgumentError },
    );
    refuse(
      "fromAllocatorSnapshot(entry)",
      hostileObjectsBut("{}", "[]", "() => {}"),
      (v) => fromAllocatorSnapshot({ history: [v as never] }),
      { error: InvalidArgumentError },
    );
  });

  it("formatReplay prints no NaN for a trace with nothing live", () => {
    const trace = parseTrace(
      `${HEADER}\n{"t":0,"op":"create","id":0,"size":0,"usage":128}`,
    );
    const text = formatReplay(replayTrace(trace));
    assert.ok(!text.includes("NaN"), text);
    const empty = parseTrace(`${HEADER}\n{"t":0,"op":"step"}`);
    assert.ok(!formatReplay(replayTrace(empty)).includes("NaN"));
  });

  it("captureStack with depth 0 captures no frame", () => {
    assert.deepEqual(captureStack({ depth: 0 }), []);
    assert.equal(captureStack({ depth: 1 }).length, 1);
  });

  it("tagGroups puts a zero-byte allocation in its own tag's group, never another's", () => {
    const trace = parseTrace([
      HEADER,
      `{"t":0,"op":"alloc","id":0,"size":0,"tag":"z"}`,
      `{"t":1,"op":"alloc","id":1,"size":8,"tag":"y"}`,
      `{"t":2,"op":"alloc","id":2,"size":0}`,
    ].join("\n"));
    const tl = memoryTimeline(trace);
    const { group, names } = tagGroups(tl);
    const nameOf = (i: number) => names[group[i]];
    assert.deepEqual([nameOf(0), nameOf(1), nameOf(2)], ["z", "y", "(no tag)"]);
    assert.equal(names[0], "y", "the tag with bytes ranks first");
    const one = tagGroups(tl, 1);
    assert.deepEqual([...one.group].map((g) => one.names[g]), [
      "other",
      "y",
      "other",
    ]);
  });

  it("memoryReport refuses a non-boolean replay option", () => {
    const trace = parseTrace(
      `${HEADER}\n{"t":0,"op":"create","id":0,"size":8,"usage":128}`,
    );
    refuse(
      "memoryReport(replay)",
      hostileFlags(),
      (v) => memoryReport(trace, { replay: v as boolean }),
      {
        error: InvalidArgumentError,
      },
    );
    assert.ok(
      memoryReport(trace, { replay: false }).includes('"whatIf":null'),
    );
  });

  it("formatTrace refuses events it would not write as validated (toJSON, BigInt, cycles); parseTrace skips a byte order mark", () => {
    const header = { format: "allot-trace", version: 1 } as const;
    const ev = { t: 0, op: "step" };
    const cyclic: Record<string, unknown> = { ...ev };
    cyclic.self = cyclic;
    const bad = [
      {
        name: "toJSON event",
        value: { ...ev, toJSON: () => ({ t: -1, op: "bogus" }) },
      },
      { name: "BigInt field", value: { ...ev, extra: 1n } },
      { name: "cycle", value: cyclic },
      {
        name: "toJSON frame",
        value: {
          t: 0,
          op: "stack",
          sid: 0,
          frames: [{ at: "x", kind: "user", toJSON: () => 5 }],
        },
      },
    ];
    refuse(
      "formatTrace(event)",
      bad,
      (v) => formatTrace({ header, events: [v] } as never),
      {
        error: InvalidArgumentError,
      },
    );
    refuse(
      "formatTrace(header)",
      [{ name: "toJSON header", value: { ...header, toJSON: () => ({}) } }, {
        name: "BigInt meta",
        value: { ...header, meta: { n: 1n } },
      }],
      (v) => formatTrace({ header: v, events: [] } as never),
      { error: InvalidArgumentError },
    );
    const text = formatTrace({ header, events: [ev] } as never);
    assert.equal(parseTrace("\uFEFF" + text).events.length, 1);
  });

  it("TraceRecorder copies meta when made: later changes never reach the header, non-JSON meta is refused", () => {
    const meta: Record<string, unknown> = { model: "mlp" };
    const r = new TraceRecorder({ meta, stacks: "none" });
    meta.model = "changed";
    meta.n = 1n;
    assert.equal(parseTrace(r.toJsonLines()).header.meta?.model, "mlp");
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    refuse(
      "new TraceRecorder(meta)",
      [
        { name: "BigInt", value: { n: 1n } },
        { name: "cycle", value: cyclic },
        { name: "toJSON number", value: { toJSON: () => 5 } },
        ...hostileObjectsBut("undefined", "{}", "[]", "() => {}"),
      ],
      (v) => new TraceRecorder({ meta: v as never }),
      { error: InvalidArgumentError },
    );
  });

  it("reportHtml refuses a whatIf whose usage or from would be written into the page unescaped", () => {
    const trace = parseTrace(
      `${HEADER}\n{"t":0,"op":"create","id":0,"size":8,"usage":128}`,
    );
    const tl = memoryTimeline(trace);
    const whatIf = replayTrace(trace);
    const evil = "<img src=x onerror=alert(1)>";
    refuse(
      "reportHtml(whatIf.usage)",
      [
        { name: "html", value: evil },
        { name: "most", value: "most" },
        ...hostileObjectsBut(),
      ],
      (v) => reportHtml(tl, { whatIf: { ...whatIf, usage: v } as never }),
      { error: InvalidArgumentError },
    );
    refuse(
      "reportHtml(whatIf.from)",
      [{ name: "html", value: evil }, ...hostileObjectsBut()],
      (v) => reportHtml(tl, { whatIf: { ...whatIf, from: v } as never }),
      { error: InvalidArgumentError },
    );
    refuse(
      "formatReplay(usage)",
      [{ name: "html", value: evil }],
      (v) => formatReplay({ ...whatIf, usage: v } as never),
      {
        error: InvalidArgumentError,
      },
    );
  });

  it("tally", () => {
    assert.ok(tally.entryPoints >= 8, `${tally.entryPoints} entry points`);
  });
});
