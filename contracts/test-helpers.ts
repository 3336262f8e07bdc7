import { readFileSync } from "node:fs";
import path from "node:path";
import type { Abi, Hex } from "viem";
import { compileSolidity } from "./compile";

/** Compiles a test-only contract of contracts/test-src (never shipped, never in contracts/generated). */
export function compileTestContract(file: string, contract: string): { abi: Abi; bytecode: Hex } {
  const sources = { [file]: readFileSync(path.join(import.meta.dirname, "test-src", file), "utf8") };
  const compiled = compileSolidity(sources).get(contract);
  if (!compiled) throw new Error(`${contract} not found in contracts/test-src/${file}`);
  return { abi: compiled.abi as Abi, bytecode: compiled.bytecode };
}
