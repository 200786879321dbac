/**
 * Fault-injection model test of Storage: storages allocated, resized and
 * released over an allocator that throws, lies (short, misaligned,
 * released blocks) or whose deleter throws. Every live storage keeps the
 * byte pattern written into it (a resize keeps its prefix), blocks never
 * overlap, and nothing leaks. (A "duplicate" block is not injected: Storage
 * keeps no table of blocks; the pools and the ownership registry do.)
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { AllotError, Device, type IntrusivePtr } from "@allot/core";
import {
  ALLOCATOR_FAULTS,
  checkPattern,
  faultArbitrary,
  faultsInjected,
  FaultyAllocator,
  FirstFitAllocator,
  InjectedFault,
  modelRuns,
  writePattern,
} from "../core/_test_faults.ts";
import { Storage } from "./mod.ts";

describe("Storage under injected faults", () => {
  const start = faultsInjected();
  after(() => {
    console.log(`storage faults: ${faultsInjected() - start} faults injected`);
  });
  it("Storage.allocate/resize/release keep every live storage's bytes intact whatever the allocator does (model-based)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.constantFrom("allocate", "resize", "release"),
            fc.integer({ min: 0, max: 256 }),
            fc.nat(),
            faultArbitrary(ALLOCATOR_FAULTS.filter((f) => f !== "duplicate")),
          ),
          { maxLength: 40 },
        ),
        (ops) => {
          const base = new FirstFitAllocator(Device.cpu(), 1 << 16);
          const allocator = new FaultyAllocator(base);
          let nextId = 1;
          const live: {
            s: IntrusivePtr<Storage>;
            id: number;
            valid: number;
          }[] = [];
          for (const [kind, n, pick, fault] of ops) {
            allocator.arm(fault);
            try {
              if (kind === "allocate" || live.length === 0) {
                const s = Storage.allocate(n, { allocator, resizable: true });
                const id = nextId++;
                writePattern(s.target.bytes(), id);
                live.push({ s, id, valid: n });
              } else {
                const e = live[pick % live.length];
                checkPattern(e.s.target.bytes().subarray(0, e.valid), e.id);
                if (kind === "resize") {
                  e.s.target.resize(n);
                  e.valid = Math.min(e.valid, n);
                  checkPattern(
                    e.s.target.bytes().subarray(0, e.valid),
                    e.id,
                  );
                  // Refill so the whole storage carries the pattern.
                  writePattern(e.s.target.bytes(), e.id);
                  e.valid = n;
                } else {
                  live.splice(live.indexOf(e), 1);
                  e.s.release();
                }
              }
            } catch (error) {
              assert.ok(
                error instanceof InjectedFault || error instanceof AllotError,
                `untyped error: ${error}`,
              );
              // A resize whose old block's deleter threw did resize: the
              // prefix both sizes share must still hold the pattern.
              for (const e of live) {
                e.valid = Math.min(e.valid, e.s.target.data.byteLength);
                checkPattern(e.s.target.bytes().subarray(0, e.valid), e.id);
              }
            }
            allocator.arm(undefined);
            for (const e of live) {
              assert.ok(e.s.target.data.byteLength >= e.valid);
            }
            assert.equal(
              allocator.liveCount,
              live.length,
              "a block leaked or was lost",
            );
          }
          for (const e of live) {
            checkPattern(e.s.target.bytes().subarray(0, e.valid), e.id);
            e.s.release();
          }
          assert.equal(base.live.size, 0, "blocks leaked");
        },
      ),
      { numRuns: modelRuns() },
    );
  });
});
