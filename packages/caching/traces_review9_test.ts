/**
 * Ninth outside-in review (review17, the tensor side) of the trace
 * generators of `@allot/caching/traces`: their option values were not
 * checked. `bytesPerElement: -4` made allocations of -512 bytes,
 * `vocab: "x"` and `promptLengths: []` allocations of NaN bytes,
 * `layers: -1` a raw `RangeError`, `churnTrace({ liveByteLength: -1 })` a
 * raw `TypeError`, `minByteLength: 0` NaN sizes, and a misspelt key
 * (`layrs`) was ignored. Each is now an `InvalidArgumentError` naming the
 * option and its limit, and every trace a generator returns has only
 * positive safe-integer sizes and frees every id.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import { modelRuns } from "../core/_test_faults.ts";
import {
  type AllocationTrace,
  churnTrace,
  summarizeTrace,
  trainingStepTrace,
  transformerInferenceTrace,
} from "./traces.ts";

const TINY_T = {
  layers: 1,
  hidden: 8,
  heads: 2,
  vocab: 16,
  promptLengths: [2],
  decodeSteps: 1,
  rounds: 1,
};
const TINY_S = {
  layers: 1,
  hidden: 8,
  heads: 2,
  vocab: 16,
  sequence: 2,
  batch: 1,
  steps: 2,
  warmupSteps: 1,
};

function refusedNaming(name: string): (e: unknown) => boolean {
  return (e) =>
    e instanceof InvalidArgumentError && e.message.includes(name) &&
    e.limit !== undefined;
}

/** Every size a positive safe integer, every id allocated once and freed once. */
function checkWellFormed(trace: AllocationTrace): void {
  const live = new Set<number>();
  const seen = new Set<number>();
  for (const op of trace.ops) {
    if (op.kind === "alloc") {
      assert.ok(
        Number.isSafeInteger(op.byteLength) && op.byteLength > 0,
        `${op.tag}: ${op.byteLength}`,
      );
      assert.ok(!seen.has(op.id));
      seen.add(op.id);
      live.add(op.id);
    } else if (op.kind === "free") {
      assert.ok(live.delete(op.id));
    }
  }
  assert.equal(live.size, 0);
  assert.ok(trace.warmupOps >= 0 && trace.warmupOps <= trace.ops.length);
  summarizeTrace(trace);
}

const BAD_NUMBERS: unknown[] = [-1, 0, 1.5, NaN, Infinity, "4", null, 2 ** 53];

describe("caching traces (review17): generator options are checked", () => {
  for (
    const key of [
      "layers",
      "hidden",
      "heads",
      "vocab",
      "bytesPerElement",
      "rounds",
    ]
  ) {
    it(`transformerInferenceTrace() refuses bad ${key}`, () => {
      for (const v of BAD_NUMBERS) {
        assert.throws(
          () => transformerInferenceTrace({ ...TINY_T, [key]: v }),
          refusedNaming(key),
          `${key}: ${String(v)}`,
        );
      }
    });
  }

  it("transformerInferenceTrace() refuses bad decodeSteps and promptLengths, and unknown keys", () => {
    for (const v of [-1, 1.5, NaN, "2", null]) {
      assert.throws(
        () => transformerInferenceTrace({ ...TINY_T, decodeSteps: v as never }),
        refusedNaming("decodeSteps"),
      );
    }
    for (const v of [[], [0], [-1], [1.5], [NaN], "12", null, [2, "3"]]) {
      assert.throws(
        () =>
          transformerInferenceTrace({ ...TINY_T, promptLengths: v as never }),
        refusedNaming("promptLengths"),
        JSON.stringify(v),
      );
    }
    assert.throws(
      () => transformerInferenceTrace({ ...TINY_T, layrs: 2 } as never),
      refusedNaming("layrs"),
    );
    for (const v of [0, 1, "no", null]) {
      assert.throws(
        () => transformerInferenceTrace({ ...TINY_T, weights: v as never }),
        refusedNaming("weights"),
      );
    }
    checkWellFormed(transformerInferenceTrace({ ...TINY_T, decodeSteps: 0 }));
    checkWellFormed(transformerInferenceTrace({ ...TINY_T, weights: false }));
  });

  for (
    const key of [
      "layers",
      "hidden",
      "heads",
      "vocab",
      "sequence",
      "batch",
      "bytesPerElement",
      "steps",
    ]
  ) {
    it(`trainingStepTrace() refuses bad ${key}`, () => {
      for (const v of BAD_NUMBERS) {
        assert.throws(
          () => trainingStepTrace({ ...TINY_S, [key]: v }),
          refusedNaming(key),
          `${key}: ${String(v)}`,
        );
      }
    });
  }

  it("trainingStepTrace() refuses warmupSteps outside [0, steps] and unknown keys", () => {
    for (const v of [-1, 3, 1.5, NaN, "1"]) {
      assert.throws(
        () => trainingStepTrace({ ...TINY_S, warmupSteps: v as never }),
        refusedNaming("warmupSteps"),
        String(v),
      );
    }
    assert.throws(
      () => trainingStepTrace({ ...TINY_S, step: 2 } as never),
      refusedNaming("step"),
    );
    checkWellFormed(trainingStepTrace({ ...TINY_S, warmupSteps: 0 }));
    // one step and the default warm-up of 2: no warm-up, as before
    const { warmupSteps: _w, ...noWarmup } = TINY_S;
    assert.equal(trainingStepTrace({ ...noWarmup, steps: 1 }).warmupOps, 0);
  });

  it("churnTrace() refuses bad counts, sizes, limits and seeds, and unknown keys", () => {
    const cases: [string, unknown[]][] = [
      ["allocations", [-1, 1.5, NaN, "10", null]],
      ["minByteLength", [0, -5, 1.5, NaN]],
      ["maxByteLength", [0, 1.5, NaN, 100]], // 100 < minByteLength 256
      ["liveByteLength", [-1, 1.5, NaN]],
      ["seed", [1.5, NaN, "x", 2 ** 53]],
    ];
    for (const [key, values] of cases) {
      for (const v of values) {
        assert.throws(
          () => churnTrace({ allocations: 10, [key]: v }),
          refusedNaming(key),
          `${key}: ${String(v)}`,
        );
      }
    }
    assert.throws(
      () => churnTrace({ allocation: 10 } as never),
      refusedNaming("allocation"),
    );
    checkWellFormed(churnTrace({ allocations: 50, liveByteLength: 0 }));
  });

  it("a shape whose tensors pass 2^53 bytes is refused with the tensor's size, not traced", () => {
    assert.throws(
      () =>
        transformerInferenceTrace({
          ...TINY_T,
          vocab: 2 ** 30,
          hidden: 2 ** 30,
          bytesPerElement: 2 ** 10,
        }),
      (e) =>
        e instanceof InvalidArgumentError &&
        /2\^53|9007199254740991/.test(e.message),
    );
  });

  it("generators answer well-formed traces for every accepted option set", () => {
    fc.assert(
      fc.property(
        fc.record({
          layers: fc.integer({ min: 1, max: 3 }),
          hidden: fc.integer({ min: 1, max: 64 }),
          heads: fc.integer({ min: 1, max: 4 }),
          vocab: fc.integer({ min: 1, max: 300 }),
          bytesPerElement: fc.constantFrom(1, 2, 4, 8),
          promptLengths: fc.array(fc.integer({ min: 1, max: 40 }), {
            minLength: 1,
            maxLength: 3,
          }),
          decodeSteps: fc.integer({ min: 0, max: 3 }),
          rounds: fc.integer({ min: 1, max: 2 }),
        }),
        fc.record({
          sequence: fc.integer({ min: 1, max: 16 }),
          batch: fc.integer({ min: 1, max: 3 }),
          steps: fc.integer({ min: 1, max: 3 }),
        }),
        fc.record({
          allocations: fc.integer({ min: 0, max: 200 }),
          minByteLength: fc.integer({ min: 1, max: 1024 }),
          span: fc.integer({ min: 0, max: 1 << 20 }),
          liveByteLength: fc.nat(1 << 22),
          seed: fc.integer(),
        }),
        (t, s, c) => {
          checkWellFormed(transformerInferenceTrace(t));
          const { promptLengths: _p, decodeSteps: _d, rounds: _r, ...shape } =
            t;
          checkWellFormed(
            trainingStepTrace({ ...shape, ...s, warmupSteps: s.steps - 1 }),
          );
          const { span, ...churn } = c;
          const trace = churnTrace({
            ...churn,
            maxByteLength: c.minByteLength + span,
          });
          checkWellFormed(trace);
          assert.equal(summarizeTrace(trace).allocations, c.allocations);
        },
      ),
      { numRuns: modelRuns(60) },
    );
  });
});
