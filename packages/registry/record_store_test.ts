import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { MapRecordStore } from "./record_store.ts";
import { modelRuns } from "../core/_test_faults.ts";

describe("MapRecordStore", () => {
  it("MapRecordStore behaves like one map keyed by (memory, byteOffset)", () => {
    const memories = [new ArrayBuffer(8), new ArrayBuffer(8), {}];
    const op = fc.record({
      kind: fc.constantFrom("set", "delete", "clear"),
      memory: fc.integer({ min: 0, max: 2 }),
      offset: fc.integer({ min: 0, max: 5 }),
      clear: fc.integer({ min: 0, max: 9 }),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const store = new MapRecordStore();
        const model = new Map<string, number>();
        let next = 0; // values are unique among live entries
        for (const o of ops) {
          const memory = memories[o.memory];
          const key = `${o.memory}:${o.offset}`;
          if (o.kind === "set") {
            store.set(memory, o.offset, next);
            model.set(key, next++);
          } else if (o.kind === "delete") {
            assert.equal(store.delete(memory, o.offset), model.delete(key));
          } else if (o.clear === 0) {
            store.clear();
            model.clear();
          }
          assert.equal(store.size, model.size);
          for (let m = 0; m < memories.length; m++) {
            for (let off = 0; off <= 5; off++) {
              assert.equal(
                store.get(memories[m], off),
                model.get(`${m}:${off}`) ?? -1,
              );
            }
          }
        }
      }),
      { numRuns: modelRuns() },
    );
  });

  it("MapRecordStore refuses a memory that is not an object at once (not at a later write-back) and changes nothing", () => {
    const store = new MapRecordStore();
    const memory = new ArrayBuffer(8);
    store.set(memory, 0, 1); // the cached memory, not yet written back
    for (const bad of ["memory", 7, null, undefined, true]) {
      assert.throws(
        () => store.set(bad as unknown as object, 0, 2),
        TypeError,
        String(bad),
      );
      assert.equal(store.size, 1);
      assert.equal(store.get(bad as unknown as object, 0), -1);
    }
    // The entry of the cached memory survived the refusals' write-back.
    assert.equal(store.get(memory, 0), 1);
    store.set(new ArrayBuffer(8), 0, 3);
    assert.equal(store.get(memory, 0), 1);
    assert.equal(store.size, 2);
  });
});
