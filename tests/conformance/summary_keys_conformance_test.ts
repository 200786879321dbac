/**
 * Found in the fourth outside-in review: `memorySummary({ abrev: true })`
 * (a misspelt `abbreviated`) printed the full table on every allocator, and
 * `synchronize({ signl })` waited with no way to stop it, silently. Core's
 * `formatMemorySummary`, `validateMemorySummaryOptions` and
 * `validateSynchronizeOptions` refuse unknown keys now, so every
 * allocator's `memorySummary()` and `synchronize()` do, naming the key and
 * the accepted ones.
 *
 * @module
 */

import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import {
  buddyAllocator,
  cpuAllocator,
  cpuHeap,
  sharedHeap,
  sharedHeapAllocator,
  systemAllocator,
} from "./_cpu_subjects.ts";
import {
  bufferPool,
  cachingAllocator,
  managedBufferPool,
  ownershipRegistry,
  stepPlannedPool,
  watermarkAllocator,
} from "./_pool_subjects.ts";

const subjects = {
  cpuHeap,
  cpuAllocator,
  systemAllocator,
  buddyAllocator,
  sharedHeap,
  sharedHeapAllocator,
  cachingAllocator,
  stepPlannedPool,
  watermarkAllocator,
  bufferPool,
  ownershipRegistry,
  managedBufferPool,
};

for (const [name, make] of Object.entries(subjects)) {
  Deno.test(`${name}.memorySummary() refuses an unknown option key such as abrev`, () => {
    const subject = make();
    try {
      const target = subject.target as {
        memorySummary(options?: object): string;
      };
      assert.throws(
        () => target.memorySummary({ abrev: true }),
        (e: unknown) =>
          e instanceof InvalidArgumentError && e.message.includes('"abrev"') &&
          Array.isArray(e.limit),
      );
      assert.equal(
        typeof target.memorySummary({ abbreviated: true }),
        "string",
      );
    } finally {
      subject.close();
    }
  });
  Deno.test(`${name}.synchronize() refuses an unknown option key such as signl`, async () => {
    const subject = make();
    try {
      const target = subject.target as {
        synchronize?(options?: object): Promise<void>;
      };
      if (target.synchronize === undefined) return;
      await assert.rejects(
        target.synchronize({ signl: new AbortController().signal }),
        (e: unknown) =>
          e instanceof InvalidArgumentError && e.message.includes('"signl"'),
      );
      await target.synchronize({ signal: undefined });
    } finally {
      subject.close();
    }
  });
}
