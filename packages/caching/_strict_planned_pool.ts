/**
 * Internal: strict mode of {@linkcode StepPlannedPool}, kept out of the
 * pool's hot paths: the calls that change a strict pool are wrapped on the
 * instance so that each validates the pool before and after it runs, and a
 * freed block's bytes are junk-filled where the host can write them.
 *
 * @module
 */

import { junkFill } from "@allot/core";
import type { PlannedBlock, StepPlannedPool } from "./step_planned_pool.ts";

/** Wraps `pool`'s changing calls with validation and junk fill. */
export function _makeStrictPlannedPool<M>(pool: StepPlannedPool<M>): void {
  const proto = Object.getPrototypeOf(pool) as StepPlannedPool<M>;
  const checked = <A extends unknown[], R>(
    f: (this: StepPlannedPool<M>, ...args: A) => R,
  ) =>
  (...args: A): R => {
    pool.validate();
    const result = f.apply(pool, args);
    pool.validate();
    return result;
  };
  const free = checked(proto.free);
  Object.defineProperties(pool, {
    tryAllocate: { value: checked(proto.tryAllocate) },
    endStep: { value: checked(proto.endStep) },
    trim: { value: checked(proto.trim) },
    free: {
      value: (block: PlannedBlock<M>): void => {
        free(block);
        // (free() refused anything but a live block of this pool)
        junkFill(block.memory, block.byteOffset, block.byteLength);
      },
    },
  });
}
