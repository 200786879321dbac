/**
 * The stats vocabulary of pooling allocators (PyTorch's `memory_stats()`
 * figures and `memory_summary()` table), re-exported from `@allot/core`
 * where it is defined once for every allocator.
 *
 * @module
 */

export {
  flattenMemoryStats,
  formatMemorySummary,
  formatSize,
  type MemoryStats,
  type MemorySummaryOptions,
  STAT_ARRAY_NAMES,
  type StatArray,
  type StatType,
} from "@allot/core";
