import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { JUNK_BYTE, MockSegmentSource } from "@allot/core";
import { StepPlannedPool } from "./mod.ts";

describe("StepPlannedPool strict mode", () => {
  it("StepPlannedPool in strict mode junk-fills a freed block and validates around every changing call; off by default", () => {
    for (const strict of [true, false]) {
      const pool = new StepPlannedPool(
        new MockSegmentSource({ capacityBytes: 1 << 20, backed: true }),
        { strict },
      );
      let calls = 0;
      const validate = pool.validate.bind(pool);
      Object.defineProperty(pool, "validate", {
        value: () => {
          calls++;
          validate();
        },
      });
      const block = pool.allocate(64); // 2
      const memory = block.memory as unknown as { bytes: Uint8Array };
      const stale = memory.bytes.subarray(
        block.byteOffset,
        block.byteOffset + 64,
      );
      stale.fill(1);
      pool.free(block); // 2
      assert.equal(stale.every((x) => x === JUNK_BYTE), strict, `${strict}`);
      pool.endStep(); // 2
      pool.trim(0); // 2
      assert.equal(calls, strict ? 8 : 0);
    }
  });

  it("StepPlannedPool in strict mode refuses to go on from a corrupted pool", () => {
    for (const strict of [true, false]) {
      const pool = new StepPlannedPool(new MockSegmentSource(), { strict });
      const a = pool.allocate(64);
      // a careless user writes the pool's bookkeeping through the block
      (a as unknown as { requestedByteLength: number }).requestedByteLength = 5;
      if (strict) assert.throws(() => pool.allocate(64), /live/);
      else pool.allocate(64);
    }
  });
});
