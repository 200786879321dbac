import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { COMPLETED_FENCE, ManualStream, PromiseFence } from "./fence.ts";

describe("fences", () => {
  it("ManualStream completes fences in submission order", async () => {
    const s = new ManualStream();
    const fences = [s.fence(), s.fence(), s.fence()];
    let resolved = 0;
    const waits = fences.map((f) => f.wait().then(() => resolved++));
    s.complete(2);
    await Promise.all(waits.slice(0, 2));
    assert.deepEqual(fences.map((f) => f.completed), [true, true, false]);
    assert.equal(resolved, 2);
    s.complete(10);
    await waits[2];
    assert.equal(s.completedCount, 3);
  });

  it("ManualStream ids are unique", () => {
    assert.notEqual(new ManualStream().id, new ManualStream().id);
  });

  it("PromiseFence completes on rejection and reports it to waiters", async () => {
    const f = new PromiseFence(Promise.reject(new Error("lost")));
    await assert.rejects(f.wait(), /lost/);
    assert.ok(f.completed);
  });

  it("COMPLETED_FENCE is complete", async () => {
    assert.ok(COMPLETED_FENCE.completed);
    await COMPLETED_FENCE.wait();
  });
});
