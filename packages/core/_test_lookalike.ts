/**
 * Test-only: look-alike pointers for outside-in tests.
 * `Object.create(DataPtr.prototype)` passes `instanceof DataPtr`, but it was
 * never constructed, so its getters throw a `TypeError`: every allot entry
 * point must refuse it with a typed error instead (a brand check), and a
 * collaborator that hands one out must be refused as one that broke its
 * contract.
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 * Import by relative path (`../core/_test_lookalike.ts`).
 *
 * @module
 */

import { AllocatorBase } from "./allocator.ts";
import { DataPtr } from "./data_ptr.ts";
import { Device } from "./device.ts";

/**
 * A look-alike `DataPtr`: `instanceof` accepts it, its getters throw.
 *
 * @returns A fresh look-alike, typed as whatever pointer the test hands it
 * for.
 */
export function lookAlikePtr<M = ArrayBuffer, C = null>(): DataPtr<M, C> {
  return Object.create(DataPtr.prototype);
}

/** A CPU allocator whose `allocate()` returns a look-alike `DataPtr`. */
export class LookAlikeAllocator extends AllocatorBase<ArrayBuffer, null> {
  /** The CPU. */
  readonly device: Device = Device.cpu();
  /**
   * Returns a look-alike.
   *
   * @returns A fresh look-alike.
   */
  allocate(): DataPtr<ArrayBuffer, null> {
    return lookAlikePtr();
  }
}
