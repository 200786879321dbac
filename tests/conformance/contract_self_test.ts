/**
 * The contract's checks can fail: a toy allocator that breaks one promise at
 * a time (overlapping blocks, stats that do not add up, a hostile value
 * taken, a refused call that changes state) must be caught.
 *
 * @module
 */

import assert from "node:assert/strict";
import { InvalidArgumentError, OutOfMemoryError } from "@allot/core";
import { assertInvalidArgument, Model, type Subject } from "./_contract.ts";

type Flaw = "overlap" | "stats" | "takes NaN" | "counts on refusal";

/** A bump allocator over 4 KiB with one flaw. */
function toy(flaw: Flaw): Subject<{ off: number; n: number }> {
  const memory = new Uint8Array(4096);
  let top = 0, current = 0, allocated = 0, freed = 0, refusals = 0;
  const allocate = (n: number) => {
    if (flaw !== "takes NaN" && !(Number.isSafeInteger(n) && n >= 0)) {
      if (flaw === "counts on refusal") refusals++;
      throw new InvalidArgumentError(`Invalid byteLength: received ${n}`, {
        name: "byteLength",
        value: n,
        limit: 4096,
      });
    }
    if (top + n > 4096) {
      throw new OutOfMemoryError("full", { requestedBytes: n });
    }
    const off = flaw === "overlap" ? Math.max(0, top - 8) : top;
    top += n;
    current += n;
    allocated += n + (flaw === "stats" ? 1 : 0);
    return { off, n };
  };
  return {
    target: {},
    knownGaps: [],
    allocate,
    tryAllocate: allocate,
    free: (h) => {
      current -= h.n;
      freed += h.n;
    },
    countedBytes: (_h, n) => n,
    bytes: (h) => memory.subarray(h.off, h.off + h.n),
    bytesInUse: () => ({ current, peak: current, allocated, freed }),
    validate: () => {},
    state: () => ({ top, current, allocated, freed, refusals }),
    capacityBytes: 4096,
    maxRequestBytes: 512,
    close: () => {},
  };
}

Deno.test("the contract catches overlapping blocks", () => {
  const s = toy("overlap");
  const m = new Model(s);
  m.add(s.allocate(64), 64);
  m.add(s.allocate(64), 64);
  assert.throws(() => m.check("overlap"), /overlap or corruption/);
});

Deno.test("the contract catches stats that do not add up", () => {
  const s = toy("stats");
  const m = new Model(s);
  m.add(s.allocate(64), 64);
  assert.throws(() => m.check("stats"), /allocated - freed == current/);
});

Deno.test("the contract catches a hostile value taken", () => {
  const s = toy("takes NaN");
  let error: unknown;
  try {
    s.allocate(NaN);
  } catch (e) {
    error = e;
  }
  assert.throws(
    () => assertInvalidArgument(error, NaN, "allocate(NaN)"),
    /expected an InvalidArgumentError/,
  );
});

Deno.test("the contract catches a refused call that changes state", () => {
  const s = toy("counts on refusal");
  const before = s.state();
  assert.throws(() => s.allocate(-1), InvalidArgumentError);
  assert.notDeepEqual(s.state(), before);
});
