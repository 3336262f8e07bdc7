import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { CompileError, GENERATED_DIR, generateContractModules } from "./compile";

/** `npm run contracts:build`: compiles contracts/src and writes the typed ABI + bytecode modules. */

try {
  const modules = generateContractModules();
  mkdirSync(GENERATED_DIR, { recursive: true });
  for (const [file, content] of modules) {
    writeFileSync(path.join(GENERATED_DIR, file), content);
    console.log(`wrote ${path.relative(process.cwd(), path.join(GENERATED_DIR, file))}`);
  }
} catch (error) {
  console.error(error instanceof CompileError ? error.message : error);
  process.exit(1);
}
