/**
 * Third outside-in review of `@allot/trace`: traces whose fields answer one
 * value to the check and another to the reader (getters, proxies), fields
 * whose getters throw, and a `TraceRecorder` over a device whose calls
 * throw.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  formatTrace,
  memoryTimeline,
  parseTrace,
  recordedHeld,
  replayTrace,
  type Trace,
  TraceFormatError,
  traceOps,
  validateTrace,
} from "./mod.ts";

const header = { format: "allot-trace", version: 1 } as const;

/** An alloc event whose `size` reads 64 once, then `later`. */
function shifty(later: unknown) {
  let reads = 0;
  return {
    t: 1,
    op: "alloc",
    id: 1,
    get size() {
      return reads++ === 0 ? 64 : later;
    },
  };
}

function traceWith(event: object): Trace {
  return {
    header,
    events: [event, { t: 2, op: "free", id: 1 }],
  } as unknown as Trace;
}

describe("trace third review", () => {
  it("traceOps(), recordedHeld(), memoryTimeline(), replayTrace() and formatTrace() read only what they validated", () => {
    for (const later of [-5e300, NaN, "64", 2 ** 60]) {
      assert.deepEqual([...traceOps(traceWith(shifty(later))).size], [64, 0]);
      assert.equal(memoryTimeline(traceWith(shifty(later))).peakLive, 64);
      assert.equal(
        replayTrace(traceWith(shifty(later)), { repeat: 1 })
          .peakRequestedBytes,
        64,
      );
      const text = formatTrace(traceWith(shifty(later)));
      assert.deepEqual(parseTrace(text).events[0], {
        t: 1,
        op: "alloc",
        id: 1,
        size: 64,
      });
    }
    // an `events` getter that answers [] to the check and a bad list after
    let n = 0;
    const sly = {
      header,
      get events() {
        return n++ === 0 ? [] : [{ t: 0, op: "free", id: 9 }];
      },
    } as unknown as Trace;
    assert.equal(traceOps(sly).length, 0);
    n = 0;
    assert.equal(recordedHeld(sly), undefined);
  });

  it("validateTrace() turns an event or frame whose getter throws into a TraceFormatError naming its line", () => {
    const throwing = {
      t: 0,
      op: "alloc",
      id: 1,
      get size(): number {
        throw new Error("boom");
      },
    };
    assert.throws(
      () => validateTrace(traceWith(throwing)),
      (e: unknown) =>
        e instanceof TraceFormatError && /line 2.*boom/.test(e.message),
    );
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    assert.throws(
      () => validateTrace({ header, events: [revoked.proxy] } as never),
      TraceFormatError,
    );
    const events = new Proxy([], {
      get(target, key) {
        if (key === "length") throw new Error("no length");
        return Reflect.get(target, key);
      },
    });
    assert.throws(
      () => validateTrace({ header, events } as never),
      TraceFormatError,
    );
  });

  it("validateTrace() still reads events whose fields are inherited", () => {
    class Alloc {
      get t() {
        return 0;
      }
      get op() {
        return "alloc";
      }
      get id() {
        return 1;
      }
      get size() {
        return 8;
      }
    }
    const trace = { header, events: [new Alloc()] } as unknown as Trace;
    assert.equal(validateTrace(trace), trace);
    assert.deepEqual([...traceOps(trace).size], [8]);
  });
});
