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
export * from "./registry.ts";
