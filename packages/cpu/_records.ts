/**
 * The block records of `CpuHeap`: one `Int32Array`, eight slots per record
 * (README, "Memory layout").
 *
 * @module
 */

/** First unit (absolute: unit i is byte i * granule). */
export const R_START = 0;
/** Length in units. */
export const R_SIZE = 1;
/** Physical previous record, -1 at the region start. */
export const R_PPREV = 2;
/** Physical next record, -1 at the region end. */
export const R_PNEXT = 3;
/** Free-list previous record of a free block. */
export const R_FPREV = 4;
/**
 * A used block keeps its slack in `R_FPREV` instead: block bytes less
 * requested bytes, in [0, granule] (a granule only for a request of 0 bytes),
 * so the requested length needs no array of its own.
 */
export const R_SLACK = R_FPREV;
/** Free-list next record (also links unused records). */
export const R_FNEXT = 5;
/** 0 unused record, 1 free block, 2 used block. */
export const R_STATE = 6;
/** Alignment of a used block, in units. */
export const R_ALIGN = 7;
/**
 * A free block shorter than a chunk keeps the next record of its chunk's
 * list in `R_ALIGN` instead (compact placement, `_small_index.ts`).
 */
export const R_CNEXT = R_ALIGN;
/** Slots per record. */
export const STRIDE = 8;
