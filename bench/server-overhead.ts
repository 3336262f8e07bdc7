import { IncomingMessage, ServerResponse } from "node:http";
import { Socket } from "node:net";
import { randomBytes } from "node:crypto";
import { applySecurityHeaders } from "@/lib/http/security-headers";
import { resolveClientIp, resolveClientProto } from "@/lib/http/client-ip";
import { requestIdFor } from "@/lib/http/request-id";
import { median } from "./util";

/**
 * `npx tsx bench/server-overhead.ts`: microseconds of CPU per request of server.ts's own steps before Next runs
 * (client address, scheme, security headers with a fresh nonce, request id), on real node:http request/response
 * objects, against the per-request nonce and header object of the first version (issue 11), interleaved in rounds.
 * A floor for what server.ts adds to every request; docs/performance.md, "Trees side by side".
 */

function firstVersion(req: IncomingMessage, res: ServerResponse, https: boolean): void {
  const nonce = randomBytes(16).toString("base64");
  const csp = [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
  const security: Record<string, string> = {
    "Content-Security-Policy": csp,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    ...(https ? { "Strict-Transport-Security": "max-age=31536000" } : {}),
  };
  req.headers["content-security-policy"] = security["Content-Security-Policy"];
  for (const [name, value] of Object.entries(security)) res.setHeader(name, value);
}

function common(req: IncomingMessage): boolean {
  req.headers["x-client-ip"] = resolveClientIp({ peerAddress: "::ffff:127.0.0.1", forwardedFor: req.headers["x-forwarded-for"], trustProxy: 1 });
  const proto = resolveClientProto({ encrypted: false, forwardedProto: req.headers["x-forwarded-proto"], trustProxy: 1 });
  req.headers["x-forwarded-proto"] = proto;
  req.headers["x-request-id"] = requestIdFor(undefined);
  return proto === "https";
}

function measure(step: (req: IncomingMessage, res: ServerResponse, https: boolean) => void, n: number): number {
  const socket = new Socket();
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const req = new IncomingMessage(socket);
    req.headers = { host: "127.0.0.1", "x-forwarded-for": `10.0.${(i >> 8) & 255}.${i & 255}` };
    const res = new ServerResponse(req);
    step(req, res, common(req));
  }
  const used = process.cpuUsage(t0);
  return (used.user + used.system) / n;
}

const n = 50_000;
const rounds: { first: number[]; now: number[]; bare: number[] } = { first: [], now: [], bare: [] };
for (let r = 0; r < 6; r++) {
  rounds.bare.push(measure(() => {}, n));
  rounds.first.push(measure(firstVersion, n));
  rounds.now.push(measure(applySecurityHeaders, n));
}
const f = (xs: number[]) => `${median(xs).toFixed(2)} µs (rounds ${xs.map((x) => x.toFixed(2)).join(", ")})`;
process.stdout.write(
  `per request, request/response objects + address, scheme and request id only: ${f(rounds.bare)}\n` +
    `  + security headers as first written (randomBytes per request, header object): ${f(rounds.first)}\n` +
    `  + security headers now (pooled nonce, precomputed text): ${f(rounds.now)}\n`,
);
