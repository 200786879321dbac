// The exported allot replay policies are shared by every importer: they are
// frozen, with the function they hold, so no caller can change another's.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  allotCachingAfterFencePolicy,
  allotCachingGroupAfterFencePolicy,
  allotCachingGroupPolicy,
  allotCachingQueueOrderPolicy,
  allotWatermarkPolicy,
} from "./allot_policies.ts";
import type { PolicyFactory } from "./replay_policy.ts";

const policies: [string, PolicyFactory][] = [
  ["allotCachingQueueOrderPolicy", allotCachingQueueOrderPolicy],
  ["allotCachingAfterFencePolicy", allotCachingAfterFencePolicy],
  ["allotCachingGroupPolicy", allotCachingGroupPolicy],
  ["allotCachingGroupAfterFencePolicy", allotCachingGroupAfterFencePolicy],
  ["allotWatermarkPolicy", allotWatermarkPolicy],
];

describe("allot replay policies are frozen", () => {
  for (const [name, p] of policies) {
    it(`${name}: frozen, assignments throw and change nothing, it still works`, () => {
      assert.ok(Object.isFrozen(p), "policy");
      assert.ok(Object.isFrozen(p.create), "create");
      const before = { name: p.name, create: p.create };
      const m = p as { -readonly [K in keyof PolicyFactory]: PolicyFactory[K] };
      assert.throws(() => {
        m.name = "hijacked";
      }, TypeError);
      assert.throws(() => {
        m.create = () => {
          throw new Error("hijacked");
        };
      }, TypeError);
      assert.throws(() => {
        (p.create as unknown as { extra: number }).extra = 1;
      }, TypeError);
      assert.throws(() => {
        delete (p as { description?: string }).description;
      }, TypeError);
      assert.equal(p.name, before.name);
      assert.equal(p.create, before.create);
      assert.equal(typeof p.description, "string");
      // Each create() is a fresh instance: one's state is not another's.
      const a = p.create(), b = p.create();
      assert.notEqual(a, b);
      a.alloc(1, 1000, 0x80);
      assert.ok(a.heldBytes() > 0);
      assert.equal(b.heldBytes(), 0);
      a.free(1);
      a.sync("step");
    });
  }
});
