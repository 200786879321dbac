/**
 * Test-only: byte patterns in live `StepPlannedPool` blocks, written when a
 * block is handed out and checked before it is freed, so a model test sees
 * any block that two requests share or that a pool move overwrote.
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { MockMemory } from "@allot/core";
import type { PlannedBlock } from "./step_planned_pool.ts";

/** A live block, the bytes asked for, and the seed of its pattern. */
export interface LiveBlock {
  /** The block. */
  block: PlannedBlock<MockMemory>;
  /** Bytes requested (the pattern covers these). */
  size: number;
  /** Seed of the pattern. */
  seed: number;
}

/** Writes and checks a block's pattern. */
export interface LivePattern {
  /** Writes the pattern of `l` into its block. */
  fill(l: LiveBlock): void;
  /** Fails when a byte of the pattern of `l` changed. */
  check(l: LiveBlock): void;
}

/**
 * The pattern over the first and last `edge` bytes of a block (where a
 * neighbour would overlap first) and every 61st byte between.
 *
 * @param edge Bytes at each end that are all written and checked.
 * @returns Fill and check functions.
 */
export function livePattern(edge: number): LivePattern {
  const next = (i: number, size: number): number =>
    i < edge || i >= size - edge - 1 ? i + 1 : Math.min(i + 61, size - edge);
  return {
    fill(l: LiveBlock): void {
      const bytes = l.block.memory.bytes!;
      for (let i = 0; i < l.size; i = next(i, l.size)) {
        bytes[l.block.byteOffset + i] = (l.seed + i * 31) & 255;
      }
    },
    check(l: LiveBlock): void {
      const bytes = l.block.memory.bytes!;
      for (let i = 0; i < l.size; i = next(i, l.size)) {
        if (bytes[l.block.byteOffset + i] !== ((l.seed + i * 31) & 255)) {
          assert.fail(
            `block of ${l.size} bytes at ${l.block.byteOffset} overwritten at +${i}`,
          );
        }
      }
    },
  };
}
