/**
 * The allocator contract run against the CPU-side allocators.
 *
 * @module
 */

import { conformance } from "./_contract.ts";
import {
  buddyAllocator,
  cpuAllocator,
  cpuHeap,
  sharedHeap,
  sharedHeapAllocator,
  systemAllocator,
} from "./_cpu_subjects.ts";

conformance("CpuHeap", cpuHeap);
conformance("CpuAllocator", cpuAllocator);
conformance("SystemAllocator", systemAllocator);
conformance("BuddyAllocator", buddyAllocator);
conformance("SharedHeap", sharedHeap);
conformance("SharedHeapAllocator", sharedHeapAllocator);
