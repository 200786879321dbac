/**
 * `@allot/registry`: how allot packages compose, and who owns which memory.
 *
 * @module
 */

export * from "./dtype.ts";
export * from "./ownership_registry.ts";
export * from "./record_store.ts";
export * from "./registry_guard.ts";
export * from "./workspace_pool.ts";
// Core types that appear in this package's signatures, re-exported so the
// documentation is complete.
export type { Allocator, StatValues } from "@allot/core";
