// The few Deno APIs that examples/demo.ts and examples/webgpu.ts call (an
// environment variable, a file write, an early exit), declared so that the
// examples compile under Node's TypeScript. Nothing of allot's is declared
// here: the check compiles allot's packed types as they are.
declare namespace Deno {
  const env: { get(name: string): string | undefined };
  function exit(code?: number): never;
  function mkdir(
    path: string | URL,
    options?: { recursive?: boolean },
  ): Promise<void>;
  function writeTextFile(path: string | URL, data: string): Promise<void>;
}
