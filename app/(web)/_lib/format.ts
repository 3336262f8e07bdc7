import { formatEther, formatGwei as viemFormatGwei } from "viem";

/**
 * Formatting for the dashboard, rendered on the server: times in UTC (the server's and the operator's browser's
 * clocks may disagree; UTC is unambiguous), amounts in the native token.
 */

export function formatDateTime(value: Date | string | null | undefined): string {
  if (!value) return "—";
  const d = typeof value === "string" ? new Date(value) : value;
  return `${d.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

export function formatAge(ms: number): string {
  return `${formatDuration(ms)} ago`;
}

export function formatEth(wei: bigint | null | undefined, symbol = "ETH"): string {
  if (wei === null || wei === undefined) return "—";
  const [whole, fraction = ""] = formatEther(wei).split(".");
  const trimmed = fraction.slice(0, 6).replace(/0+$/, "");
  return `${Number(whole).toLocaleString("en-US")}${trimmed ? `.${trimmed}` : ""} ${symbol}`;
}

export function formatCount(n: number | bigint): string {
  return n.toLocaleString("en-US");
}

/** 0x1234…abcd: for tables on narrow screens; the full value goes in `title` and links. */
export function shortHex(hex: string | null | undefined, head = 10, tail = 6): string {
  if (!hex) return "—";
  return hex.length <= head + tail + 1 ? hex : `${hex.slice(0, head)}…${hex.slice(-tail)}`;
}

export function formatGwei(wei: bigint | null | undefined): string {
  if (wei === null || wei === undefined) return "—";
  const [whole, fraction = ""] = viemFormatGwei(wei).split(".");
  const trimmed = fraction.slice(0, 3).replace(/0+$/, "");
  return `${whole}${trimmed ? `.${trimmed}` : ""} gwei`;
}
