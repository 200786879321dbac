// replayTrace from the outside (review 8): a public entry point throws a
// typed error that names the value, never a plain TypeError, and never
// skips or drops what it cannot replay. A trace or target that is not an
// object, ops that are not an array, an op that is not an object or of no
// known kind, and an id allocated while it is live (the first handle was
// dropped, never freed: a leak the replay hid) are refused with
// InvalidArgumentError; what the target saw before the bad op stays (a
// replay cannot be undone), nothing after it runs.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import {
  type AllocationTrace,
  churnTrace,
  replayTrace,
  summarizeTrace,
  type TraceOp,
  trainingStepTrace,
  transformerInferenceTrace,
} from "./traces.ts";

/** A target that records what it was asked. */
function recorder() {
  const calls: string[] = [];
  let next = 0;
  return {
    calls,
    target: {
      allocate: (n: number) => {
        calls.push(`a${n}`);
        return next++;
      },
      free: (h: number) => {
        calls.push(`f${h}`);
      },
    },
  };
}

function trace(ops: unknown): AllocationTrace {
  return {
    name: "t",
    description: "",
    ops: ops as TraceOp[],
    warmupOps: 0,
  };
}

function refused(f: () => void, name: RegExp): InvalidArgumentError {
  let caught: unknown;
  try {
    f();
  } catch (e) {
    caught = e;
  }
  assert.ok(
    caught instanceof InvalidArgumentError,
    `expected InvalidArgumentError, got ${String(caught)}`,
  );
  assert.match(String(caught.argument), name);
  return caught;
}

describe("replayTrace (review 8)", () => {
  it("refuses a trace or target that is not an object, and ops that are not an array, replaying nothing", () => {
    const { calls, target } = recorder();
    for (const bad of [null, undefined, 1, "ops"]) {
      refused(
        () => replayTrace(bad as unknown as AllocationTrace, target),
        /^trace/,
      );
    }
    for (const ops of [undefined, null, "ab", { length: 1 }]) {
      refused(() => replayTrace(trace(ops), target), /^trace\.ops$/);
    }
    const ok = trace([{ kind: "alloc", id: 1, byteLength: 4, tag: "" }]);
    for (
      const bad of [
        null,
        undefined,
        {},
        { allocate: () => 0 },
        { allocate: 1, free: () => {} },
        { allocate: () => 0, free: () => {}, onOp: 1 },
      ]
    ) {
      refused(
        () =>
          replayTrace(
            ok,
            bad as unknown as Parameters<typeof replayTrace>[1],
          ),
        /^target/,
      );
    }
    assert.deepEqual(calls, []);
  });

  it("refuses an op that is not an object or of no known kind, at that op", () => {
    for (const bad of [null, 7, "alloc", { kind: "allocate", id: 2 }, {}]) {
      const { calls, target } = recorder();
      const e = refused(
        () =>
          replayTrace(
            trace([
              { kind: "alloc", id: 1, byteLength: 4, tag: "" },
              bad,
              { kind: "free", id: 1 },
            ]),
            target,
          ),
        /^trace\.ops\[1\]/,
      );
      assert.equal(e.value, bad);
      assert.deepEqual(calls, ["a4"], "the op before it, nothing after");
    }
    // a mark is replayed as nothing
    const { calls, target } = recorder();
    replayTrace(trace([{ kind: "mark", label: "step 1" }]), target);
    assert.deepEqual(calls, []);
  });

  it("refuses an id allocated while it is live (the first handle would be dropped unfreed)", () => {
    const { calls, target } = recorder();
    const e = refused(
      () =>
        replayTrace(
          trace([
            { kind: "alloc", id: 1, byteLength: 4, tag: "" },
            { kind: "alloc", id: 1, byteLength: 8, tag: "" },
            { kind: "free", id: 1 },
          ]),
          target,
        ),
      /^trace\.ops\[1\]\.id$/,
    );
    assert.equal(e.value, 1);
    assert.deepEqual(calls, ["a4"], "the second allocation is not asked");
    // an id freed may be allocated again
    const r = recorder();
    replayTrace(
      trace([
        { kind: "alloc", id: 1, byteLength: 4, tag: "" },
        { kind: "free", id: 1 },
        { kind: "alloc", id: 1, byteLength: 8, tag: "" },
        { kind: "free", id: 1 },
      ]),
      r.target,
    );
    assert.deepEqual(r.calls, ["a4", "f0", "a8", "f1"]);
    // a target whose handles are undefined is freed as well
    let freed = 0;
    replayTrace(
      trace([
        { kind: "alloc", id: 3, byteLength: 4, tag: "" },
        { kind: "free", id: 3 },
      ]),
      { allocate: () => undefined, free: () => void freed++ },
    );
    assert.equal(freed, 1);
  });
});

describe("traces.ts's other entry points (review 8)", () => {
  it("summarizeTrace refuses a trace that is not one, and ops that are not an array, with InvalidArgumentError", () => {
    for (const bad of [null, undefined, 1]) {
      refused(
        () => summarizeTrace(bad as unknown as AllocationTrace),
        /^trace$/,
      );
    }
    for (const ops of [undefined, null, "ab", { length: 1 }]) {
      refused(() => summarizeTrace(trace(ops)), /^trace\.ops$/);
    }
    for (const bad of [null, 7, { kind: "allocate" }]) {
      refused(
        () => summarizeTrace(trace([bad])),
        /^trace\.ops\[0\]$/,
      );
    }
    refused(
      () => summarizeTrace(trace([{ kind: "free", id: 4 }])),
      /^trace\.ops\[0\]\.id$/,
    );
    assert.equal(summarizeTrace(trace([])).allocations, 0);
  });

  it("the generators refuse options that are not an object (null included) with InvalidArgumentError", () => {
    const generators = [
      transformerInferenceTrace,
      trainingStepTrace,
      churnTrace,
    ] as ((options: unknown) => AllocationTrace)[];
    for (const g of generators) {
      for (const bad of [null, 1, "x", true]) {
        refused(() => g(bad), /^options$/);
      }
    }
  });
});
