/**
 * Which blocks of a buddy allocator a live `DataPtr` owns. A pool block's
 * mark lives in its order byte (a used block's start holds `-(order + 1)`,
 * an owned one `-(order + 1) - OWNED`), so `free()` reads one byte for both
 * "is it live" and "is it owned"; large blocks (negative addresses) are kept
 * in a set. Only the pointer's deleter frees a marked block.
 *
 * @module
 */

/**
 * Added to (subtracted from) a used block's order byte while a DataPtr owns
 * it: used blocks hold -1 to -31, owned ones -33 to -63.
 */
export const OWNED = 32;

/** Owned-block marks of one buddy allocator. */
export class OwnedMarks {
  /** Owned large blocks (negative addresses). */
  readonly large: Set<number> = new Set();
  readonly #min: number;
  readonly #order: () => Int8Array;

  /**
   * @param min The minimum block size (address / min = unit).
   * @param order The allocator's order bytes (replaced as they grow).
   */
  constructor(min: number, order: () => Int8Array) {
    this.#min = min;
    this.#order = order;
  }

  // The unit of a pool address (addresses reach past 2^32: no `>>>`), or -1.
  #unit(address: unknown): number {
    if (
      typeof address !== "number" || !Number.isSafeInteger(address) ||
      address < 0
    ) return -1;
    const g = address / this.#min;
    return Number.isInteger(g) && g < this.#order().length ? g : -1;
  }

  /** Marks the live block at `address` (a live block's, unmarked). */
  mark(address: number): void {
    if (address < 0) {
      this.large.add(address);
      return;
    }
    this.#order()[address / this.#min] -= OWNED;
  }

  /** Clears the mark of `address`; returns whether it was set. */
  unmark(address: number): boolean {
    if (address < 0) return this.large.delete(address);
    if (!this.has(address)) return false;
    this.#order()[address / this.#min] += OWNED;
    return true;
  }

  /** Whether `address` (any value) is a marked block. */
  has(address: unknown): boolean {
    if (typeof address === "number" && address < 0) {
      return this.large.has(address);
    }
    const g = this.#unit(address);
    return g >= 0 && this.#order()[g] < -OWNED;
  }
}
