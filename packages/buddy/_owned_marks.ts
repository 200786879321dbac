/**
 * Which blocks of a buddy allocator a live `DataPtr` owns: one bit per
 * minimum-size unit for pool blocks (addresses >= 0), a set for large blocks
 * (negative addresses). Only the pointer's deleter frees a marked block.
 *
 * @module
 */

/** Owned-block marks of one buddy allocator. */
export class OwnedMarks {
  /** Bit `g` set: the pool block at unit `g` is owned. Grown on demand. */
  bits: Uint32Array = new Uint32Array(8);
  /** Owned large blocks (negative addresses). */
  readonly large: Set<number> = new Set();
  readonly #shift: number;

  /**
   * @param shift log2 of the minimum block size (address >>> shift = unit).
   */
  constructor(shift: number) {
    this.#shift = shift;
  }

  /**
   * Grows the bits to cover `units` units.
   *
   * @param units Units the allocator's pools span.
   * @returns The bits.
   */
  cover(units: number): Uint32Array {
    const words = (units + 31) >>> 5;
    if (words > this.bits.length) {
      const grown = new Uint32Array(words);
      grown.set(this.bits);
      this.bits = grown;
    }
    return this.bits;
  }

  /** Marks the live block at `address`. */
  mark(address: number): void {
    if (address < 0) {
      this.large.add(address);
      return;
    }
    const g = address >>> this.#shift;
    let bits = this.bits;
    if ((g >>> 5) >= bits.length) {
      const grown = new Uint32Array(Math.max((g >>> 5) + 1, bits.length * 2));
      grown.set(bits);
      this.bits = bits = grown;
    }
    bits[g >>> 5] |= 1 << (g & 31);
  }

  /** Clears the mark of `address`; returns whether it was set. */
  unmark(address: number): boolean {
    if (address < 0) return this.large.delete(address);
    const g = address >>> this.#shift;
    const bits = this.bits;
    const word = bits[g >>> 5] ?? 0;
    const bit = 1 << (g & 31);
    if ((word & bit) === 0) return false;
    bits[g >>> 5] = word & ~bit;
    return true;
  }

  /** Whether `address` (any value) is a marked block. */
  has(address: unknown): boolean {
    if (typeof address !== "number" || !Number.isInteger(address)) return false;
    if (address < 0) return this.large.has(address);
    if (
      address > 0xffffffff ||
      (address >>> this.#shift) << this.#shift !== address
    ) return false;
    const g = address >>> this.#shift;
    return ((this.bits[g >>> 5] ?? 0) & (1 << (g & 31))) !== 0;
  }
}
