/**
 * Test-only: deterministic byte patterns for the copy-kernel tests (a copy
 * of random bytes shows any element moved to the wrong place).
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 *
 * @module
 */

/**
 * `n` pseudo-random bytes (xorshift32), the same for the same seed.
 *
 * @param n How many.
 * @param seed Any integer (0 reads as 1).
 * @returns The bytes.
 */
export function randomBytes(n: number, seed: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
