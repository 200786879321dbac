/**
 * Workspace discovery shared by the root scripts: every member is a folder
 * `packages/<name>/` holding a `deno.json`. Nothing here lists members by
 * name, so new packages are picked up as they appear.
 *
 * @module
 */

/** The repository root, as a `file:` URL ending in `/`. */
export const root: URL = new URL("../", import.meta.url);

/** A member's `deno.json`, as far as the root scripts read it. */
export interface MemberConfig {
  /** Scoped name, such as `@allot/core`. */
  name: string;
  /** Version, such as `0.1.0`. */
  version: string;
  /** License identifier. */
  license?: string;
  /** `"./mod.ts"` or a map of subpaths to files. */
  exports: string | Record<string, string>;
  /** The member's import map. */
  imports?: Record<string, string>;
  /** A one-line description, where the member gives one. */
  description?: string;
}

/** One workspace member. */
export interface Member {
  /** Folder name under `packages/`, such as `core`. */
  pkg: string;
  /** Path relative to the root, such as `packages/core`. */
  dir: string;
  /** The parsed `deno.json`. */
  config: MemberConfig;
}

/**
 * Lists the workspace members, sorted by folder name.
 *
 * @returns Every `packages/<name>/` folder that has a `deno.json`.
 */
export async function members(): Promise<Member[]> {
  const out: Member[] = [];
  for await (const entry of Deno.readDir(new URL("packages/", root))) {
    if (!entry.isDirectory) continue;
    const dir = `packages/${entry.name}`;
    let text: string;
    try {
      text = await Deno.readTextFile(new URL(`${dir}/deno.json`, root));
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      throw error;
    }
    out.push({ pkg: entry.name, dir, config: JSON.parse(text) });
  }
  return out.sort((a, b) => a.pkg.localeCompare(b.pkg));
}

/**
 * Lists a member's exported entry files.
 *
 * @param member The member.
 * @returns Entry paths relative to the root, such as `packages/core/mod.ts`.
 */
export function entryFiles(member: Member): string[] {
  const { exports } = member.config;
  const files = typeof exports === "string"
    ? [exports]
    : Object.values(exports);
  return files.map((e) => `${member.dir}/${e.replace(/^\.\//, "")}`);
}

/** Options for {@linkcode exec}. */
export interface ExecOptions {
  /** Working directory, relative to the root or absolute. @default the root */
  cwd?: string;
  /** Extra environment variables. @default {} */
  env?: Record<string, string>;
  /**
   * `"stdout"`: return stdout (stderr still shows). `"all"`: return stdout
   * and stderr together and show neither; a failure's error message then
   * carries the output.
   *
   * @default undefined (both shown)
   */
  capture?: "stdout" | "all";
}

/**
 * Runs a command and throws when it fails.
 *
 * @param command The program followed by its arguments.
 * @param options Working directory, environment, capture.
 * @returns Captured output when `capture` is set, otherwise `""`.
 * @throws {Error} When the command exits non-zero.
 */
export async function exec(
  command: string[],
  options: ExecOptions = {},
): Promise<string> {
  const [cmd, ...args] = command;
  const cwd = options.cwd === undefined
    ? root
    : options.cwd.startsWith("/")
    ? options.cwd
    : new URL(options.cwd.replace(/\/?$/, "/"), root);
  const result = await new Deno.Command(cmd, {
    args,
    cwd,
    env: options.env,
    stdout: options.capture ? "piped" : "inherit",
    stderr: options.capture === "all" ? "piped" : "inherit",
  }).output();
  const decoder = new TextDecoder();
  const output = options.capture === "all"
    ? decoder.decode(result.stdout) + decoder.decode(result.stderr)
    : options.capture
    ? decoder.decode(result.stdout)
    : "";
  if (result.code !== 0) {
    const shown = options.capture === "all" ? `\n${output.trimEnd()}` : "";
    throw new Error(
      `Command failed with exit code ${result.code}: ${
        command.join(" ")
      }${shown}`,
    );
  }
  return output;
}

/**
 * Runs `task` over `items`, as many at once as the machine has cores;
 * results keep the order of `items`.
 *
 * @param items The inputs.
 * @param task What to do with one input.
 * @returns The results.
 */
export async function mapConcurrent<T, R>(
  items: readonly T[],
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  const limit = navigator.hardwareConcurrency;
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await task(items[i]);
    }
  };
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker),
  );
  return results;
}

/**
 * The absolute path of a root-relative path.
 *
 * @param path A path relative to the repository root.
 * @returns The absolute file system path.
 */
export function abs(path: string): string {
  return new URL(path, root).pathname;
}
