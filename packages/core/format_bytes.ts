/**
 * {@linkcode formatBytes}: the one byte formatter of allot's messages and
 * reports.
 *
 * @module
 */

import { describeValue } from "./validate.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const TiB = 1024 * GiB;

/**
 * Formats a byte count with binary units and two decimals.
 *
 * @param byteLength Bytes.
 * @returns Text such as `512 bytes`, `1.50 MiB`, `unlimited` for `Infinity`;
 * a value that is not a number is described (`an object`, `"12"`), never
 * converted, so it cannot throw (it builds other errors' messages).
 *
 * @example
 * ```ts
 * import { formatBytes } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.equal(formatBytes(512), "512 bytes");
 * assert.equal(formatBytes(3 * 2 ** 19), "1.50 MiB");
 * assert.equal(formatBytes(Infinity), "unlimited");
 * ```
 */
export function formatBytes(byteLength: number): string {
  if (byteLength === Infinity) return "unlimited";
  if (typeof byteLength !== "number") return describeValue(byteLength);
  if (!Number.isFinite(byteLength)) return String(byteLength);
  const sign = byteLength < 0 ? "-" : "";
  const n = Math.abs(byteLength);
  if (n < KiB) return `${byteLength + 0} bytes`;
  // the unit is picked after rounding: 1048575 bytes is "1.00 MiB", never
  // "1024.00 KiB"
  if (n < MiB - 5 * (KiB / 1000)) return `${sign}${(n / KiB).toFixed(2)} KiB`;
  if (n < GiB - 5 * (MiB / 1000)) return `${sign}${(n / MiB).toFixed(2)} MiB`;
  if (n < TiB - 5 * (GiB / 1000)) return `${sign}${(n / GiB).toFixed(2)} GiB`;
  return `${sign}${(n / TiB).toFixed(2)} TiB`;
}
