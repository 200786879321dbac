// PyTorch's junk pattern (memset_junk): 0x7fedbeef, a NaN as f32.
const JUNK = 0x7fedbeef;
const JUNK_BYTES = [0xef, 0xbe, 0xed, 0x7f];

export function junkFill(
  buffer: ArrayBuffer | SharedArrayBuffer,
  byteOffset: number,
  byteLength: number,
): void {
  if (byteLength === 0) return;
  const head = (4 - (byteOffset & 3)) & 3;
  const bytes = new Uint8Array(buffer, byteOffset, byteLength);
  let i = 0;
  for (; i < head && i < byteLength; i++) {
    bytes[i] = JUNK_BYTES[(byteOffset + i) & 3];
  }
  const words = (byteLength - i) >>> 2;
  if (words > 0) new Uint32Array(buffer, byteOffset + i, words).fill(JUNK);
  for (i += words * 4; i < byteLength; i++) {
    bytes[i] = JUNK_BYTES[(byteOffset + i) & 3];
  }
}

export function zeroFill(
  buffer: ArrayBuffer | SharedArrayBuffer,
  byteOffset: number,
  byteLength: number,
): void {
  if (byteLength !== 0) new Uint8Array(buffer, byteOffset, byteLength).fill(0);
}
