import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { TransactionHash, transactionLinks } from "./transaction-hash";

/**
 * The transaction row of a completed request, for both configurations of EXPLORER_URL (the e2e stack runs with one
 * set: e2e/request.spec.ts follows that link and the copy button in Chromium).
 */

const hash = "0x" + "ab".repeat(32);
const render = (explorerUrl: string | null) =>
  renderToStaticMarkup(createElement("dl", null, createElement(TransactionHash, { hash, explorerUrl, terminal: true })));

describe("the transaction hash of a request", () => {
  it("links to the block explorer's page of the hash when EXPLORER_URL is set", () => {
    expect(transactionLinks(hash, "https://sepolia.etherscan.io")).toEqual({
      explorer: `https://sepolia.etherscan.io/tx/${hash}`,
      record: `/sponsorship/tx/${hash}`,
    });
    const html = render("https://sepolia.etherscan.io");
    expect(html).toContain(`href="https://sepolia.etherscan.io/tx/${hash}"`);
    expect(html).toContain("Copy hash");
  });

  it("without EXPLORER_URL is not a dead end: a copy button and a link to the service's public record of it", () => {
    expect(transactionLinks(hash, null).explorer).toBeNull();
    const html = render(null);
    expect(html).toContain(`href="/sponsorship/tx/${hash}"`);
    expect(html).toContain("Copy hash");
    expect(html).toContain(hash);
  });

  it("offers nothing to click before a hash exists", () => {
    const html = renderToStaticMarkup(createElement("dl", null, createElement(TransactionHash, { hash: null, explorerUrl: null, terminal: false })));
    expect(html).toContain("not sent yet");
    expect(html).not.toContain("<a");
    expect(html).not.toContain("<button");
  });
});
