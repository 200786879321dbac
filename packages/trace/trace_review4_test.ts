/**
 * Fourth outside-in review of `@allot/trace`: option bags. A misspelt key
 * did nothing, silently: `replayTrace(t, { usge: "storage" })` replayed
 * every buffer, `memoryReport(t, { replya: false })` replayed anyway,
 * `timelineSvg(tl, { widht })` kept the default width. They are refused
 * now with an `InvalidArgumentError` naming the key and the accepted ones.
 * (Malformed trace files, huge sizes, duplicate ids, unknown frees,
 * truncated gzip: attacked here too, see the report; they held.)
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import {
  captureStack,
  memoryReport,
  memoryTimeline,
  parseTrace,
  recordDevice,
  replayOps,
  replayTrace,
  reportHtml,
  timelineSvg,
  traceOps,
  TraceRecorder,
} from "./mod.ts";

function isKeyError(key: string): (e: unknown) => boolean {
  return (e: unknown) =>
    e instanceof InvalidArgumentError && e.message.includes(`"${key}"`) &&
    Array.isArray(e.limit);
}

const TEXT = [
  JSON.stringify({ format: "allot-trace", version: 1 }),
  JSON.stringify({ t: 0, op: "create", id: 1, size: 1024, usage: 132 }),
  JSON.stringify({ t: 1, op: "alloc", id: 1, size: 256, buffer: 1 }),
  JSON.stringify({ t: 2, op: "free", id: 1 }),
  JSON.stringify({ t: 3, op: "destroy", id: 1 }),
].join("\n");

describe("trace fourth review", () => {
  it("replayTrace(), replayOps(), memoryReport(), reportHtml() and timelineSvg() refuse unknown option keys", () => {
    const trace = parseTrace(TEXT);
    assert.throws(
      () => replayTrace(trace, { usge: "storage" } as never),
      isKeyError("usge"),
    );
    assert.throws(
      () => replayOps(traceOps(trace), { repeats: 2 } as never),
      isKeyError("repeats"),
    );
    assert.throws(
      () => memoryReport(TEXT, { replya: false } as never),
      isKeyError("replya"),
    );
    const tl = memoryTimeline(trace);
    assert.throws(
      () => reportHtml(tl, { titel: "x" } as never),
      isKeyError("titel"),
    );
    assert.throws(
      () => timelineSvg(tl, { widht: 10 } as never),
      isKeyError("widht"),
    );
    // the accepted keys still work
    assert.ok(replayTrace(trace, { usage: "storage", repeat: 1 }));
    assert.ok(memoryReport(TEXT, { replay: false, title: "t" }).length > 0);
    assert.ok(memoryReport(TEXT, { title: "t", usage: "storage" }).length > 0);
    assert.ok(timelineSvg(tl, { width: 400, height: 100 }).length > 0);
  });

  it("TraceRecorder, recordDevice() and captureStack() refuse unknown option keys", () => {
    assert.throws(
      () => new TraceRecorder({ stack: "none" } as never),
      isKeyError("stack"),
    );
    assert.throws(
      () => captureStack({ dept: 0 } as never),
      isKeyError("dept"),
    );
    const device = {
      createBuffer: () => ({}),
      queue: { submit() {}, writeBuffer() {} },
    };
    assert.throws(
      () => recordDevice(device as never, { recoder: undefined } as never),
      isKeyError("recoder"),
    );
    assert.ok(new TraceRecorder({ stacks: "none" }));
  });
});
