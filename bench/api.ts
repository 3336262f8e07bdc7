import { Agent, request } from "node:http";
import { ipFor, type Address } from "./util";

/**
 * The service's HTTP API as the bench's clients use it: every request from its own client IP (the stack runs
 * with TRUST_PROXY=1, so X-Forwarded-For's last entry is the client), over keep-alive connections.
 */

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

let counter = 0;

export async function postJson(
  baseUrl: string,
  path: string,
  body: unknown,
  ip = ipFor(++counter),
): Promise<{ status: number; json: Record<string, unknown> }> {
  try {
    return await postOnce(baseUrl, path, body, ip);
  } catch (error) {
    // A kept-alive connection the server closed just as it was reused fails before the server read the request
    // (Node's documented case for `reusedSocket`): sent again once, on a new connection.
    if ((error as { reusedSocket?: boolean }).reusedSocket) return postOnce(baseUrl, path, body, ip);
    throw error;
  }
}

function postOnce(baseUrl: string, path: string, body: unknown, ip: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${baseUrl}${path}`,
      {
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
          "x-forwarded-for": ip,
          "user-agent": "sponsorship-bench",
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          let json: Record<string, unknown>;
          try {
            json = JSON.parse(text) as Record<string, unknown>;
          } catch {
            json = { raw: text };
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
      },
    );
    req.on("error", (error: NodeJS.ErrnoException) => reject(Object.assign(error, { reusedSocket: req.reusedSocket && error.code === "ECONNRESET" })));
    req.end(payload);
  });
}

export async function registerWallet(baseUrl: string, wallet: Address): Promise<void> {
  const res = await postJson(baseUrl, "/wallets/register", { walletAddress: wallet });
  if (res.status !== 201 && res.status !== 200) throw new Error(`POST /wallets/register answered ${res.status}: ${JSON.stringify(res.json)}`);
}

export async function requestSponsorship(baseUrl: string, wallet: Address): Promise<string> {
  const res = await postJson(baseUrl, "/sponsorship/request", { walletAddress: wallet });
  if (res.status !== 201 || typeof res.json.id !== "string") {
    throw new Error(`POST /sponsorship/request answered ${res.status}: ${JSON.stringify(res.json)}`);
  }
  return res.json.id;
}

export function closeApiConnections(): void {
  agent.destroy();
}
