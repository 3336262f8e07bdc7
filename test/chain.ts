import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startAnvil, type Anvil } from "@/contracts/anvil";
import { freePort } from "./ports";

/** A private anvil for one test file (free port, temporary directory): call in `beforeAll`, stop in `afterAll`. */
export async function startTestChain(options: { blockTime?: number } = {}): Promise<Anvil> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-anvil-"));
  const anvil = await startAnvil({ port: await freePort(), blockTime: options.blockTime ?? 0, dataDir });
  return {
    ...anvil,
    stop: async () => {
      await anvil.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
