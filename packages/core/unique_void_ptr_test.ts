import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { UniqueVoidPtr } from "./unique_void_ptr.ts";
import { modelRuns } from "./_test_faults.ts";

describe("UniqueVoidPtr", () => {
  it("UniqueVoidPtr.clear() runs the deleter once with the context", () => {
    const calls: string[] = [];
    const ptr = new UniqueVoidPtr(1, "ctx", (c) => calls.push(c));
    ptr.clear();
    ptr.clear();
    ptr[Symbol.dispose]();
    assert.deepEqual(calls, ["ctx"]);
    assert.equal(ptr.get(), null);
  });

  it("UniqueVoidPtr does not run the deleter for a null context", () => {
    let calls = 0;
    new UniqueVoidPtr("data", null, () => calls++).clear();
    assert.equal(calls, 0);
  });

  it("UniqueVoidPtr.clear() stays cleared when the deleter throws", () => {
    let calls = 0;
    const ptr = new UniqueVoidPtr(1, 1, () => {
      calls++;
      throw new Error("boom");
    });
    assert.throws(() => ptr.clear(), /boom/);
    ptr.clear();
    assert.equal(calls, 1);
  });

  it("UniqueVoidPtr runs each deleter exactly once under any sequence", () => {
    // Model: the context is owned until the first clear/dispose/releaseContext;
    // the deleter that runs is the one installed at that moment.
    type Op =
      | { kind: "clear" }
      | { kind: "dispose" }
      | { kind: "releaseContext" }
      | { kind: "cas"; expectCurrent: boolean; next: number };
    const op = fc.oneof(
      fc.constant<Op>({ kind: "clear" }),
      fc.constant<Op>({ kind: "dispose" }),
      fc.constant<Op>({ kind: "releaseContext" }),
      fc.record({
        kind: fc.constant("cas" as const),
        expectCurrent: fc.boolean(),
        next: fc.integer({ min: 0, max: 3 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 30 }), (ops) => {
        const runs: number[] = [];
        const deleters = [0, 1, 2, 3].map((i) => () => runs.push(i));
        const ptr = new UniqueVoidPtr<string, string>("d", "c", deleters[0]);
        let owned = true;
        let current = 0;
        const expected: number[] = [];
        for (const o of ops) {
          if (o.kind === "clear" || o.kind === "dispose") {
            if (o.kind === "clear") ptr.clear();
            else ptr[Symbol.dispose]();
            if (owned) expected.push(current);
            owned = false;
          } else if (o.kind === "releaseContext") {
            assert.equal(ptr.releaseContext(), owned ? "c" : null);
            owned = false;
          } else {
            const guess = o.expectCurrent ? current : (current + 1) % 4;
            const swapped = ptr.compareExchangeDeleter(
              deleters[guess],
              deleters[o.next],
            );
            assert.equal(swapped, guess === current);
            if (swapped) current = o.next;
          }
          assert.equal(ptr.owns, owned);
        }
        assert.deepEqual(runs, expected);
        assert.ok(runs.length <= 1);
      }),
      { numRuns: modelRuns() },
    );
  });
});
