import { readFileSync } from "node:fs";
import path from "node:path";
import { expect, test, type Locator, type Page } from "@playwright/test";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { readLocalDeployment } from "@/lib/chain/deployment";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { RequestPage } from "./pages/request-page";
import { E2E } from "./stack";
import { freshAddress, heightOf, openRequestShowingFaucet, saveScreenshot, signInApi, VIEWPORTS } from "./support";

/**
 * /request in Debian's Chromium against `npm start`'s real stack: the page talks to the public API, the worker
 * moves the request, anvil mines it.
 */

const API_PATHS = /\/(wallets\/register|sponsorship\/request)$/;

/**
 * The live region a screen reader would read out when the element's text changes: the nearest ancestor with
 * aria-live, or with role alert, status or log; null when there is none (or aria-live="off") or when the element
 * is hidden from assistive technology (aria-hidden on it or an ancestor).
 */
async function liveRegionAround(element: Locator): Promise<string | null> {
  return element.evaluate((el) => {
    for (let n: Element | null = el; n; n = n.parentElement) if (n.getAttribute("aria-hidden") === "true") return null;
    for (let n: Element | null = el; n; n = n.parentElement) {
      const live = n.getAttribute("aria-live");
      const role = n.getAttribute("role") ?? "";
      if (live !== null) return live === "off" ? null : n.outerHTML.slice(0, 160);
      if (["alert", "status", "log"].includes(role)) return n.outerHTML.slice(0, 160);
    }
    return null;
  });
}

/**
 * Starts recording what screen readers would announce from now on: every change inside a live region (the nearest
 * ancestor with aria-live, or role alert, status or log) that is not hidden from assistive technology, as
 * "<role or aria-live>: <the region's text>". Returns a function that reads the record.
 */
async function recordLiveAnnouncements(page: Page): Promise<() => Promise<string[]>> {
  await page.evaluate(() => {
    const w = window as unknown as { __announced: string[] };
    w.__announced = [];
    const liveRoot = (node: Node): Element | null => {
      const start = node instanceof Element ? node : node.parentElement;
      for (let n = start; n; n = n.parentElement) if (n.getAttribute("aria-hidden") === "true") return null;
      for (let n = start; n; n = n.parentElement) {
        const live = n.getAttribute("aria-live");
        if (live !== null) return live === "off" ? null : n;
        if (["alert", "status", "log"].includes(n.getAttribute("role") ?? "")) return n;
      }
      return null;
    };
    new MutationObserver((records) => {
      for (const record of records) {
        const root = liveRoot(record.target);
        if (root) w.__announced.push(`${root.getAttribute("role") ?? root.getAttribute("aria-live")}: ${root.textContent ?? ""}`);
      }
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  return () => page.evaluate(() => (window as unknown as { __announced: string[] }).__announced);
}

/** The height of a control as laid out: touch targets are at least 44 px high (docs/ui.md). */
/** Collects layout shifts not caused by user input (the Cumulative Layout Shift of the page). */
const RECORD_LAYOUT_SHIFTS = () => {
  const w = window as unknown as { __shifts: number[] };
  w.__shifts = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries() as unknown as { value: number; hadRecentInput: boolean }[]) {
      if (!entry.hadRecentInput) w.__shifts.push(entry.value);
    }
  }).observe({ type: "layout-shift", buffered: true });
};

test.describe.serial("requesting gas on /request", () => {
  // The wallet of the first test, sponsored once; later tests try it again.
  let sponsored: { address: string; id: string; hash: string } | undefined;

  test("a pasted fresh address is followed to completed, with the transaction hash linked to the explorer", async ({ page }) => {
    await page.setViewportSize(VIEWPORTS.desktop);
    await page.addInitScript(RECORD_LAYOUT_SHIFTS);
    const request = new RequestPage(page);
    await request.goto();
    const address = freshAddress();
    await request.requestFor(address);

    await expect(request.progress).toBeVisible();
    await expect.poll(() => request.requestIdFromUrl()).toMatch(/^[0-9a-f-]{36}$/);
    const id = request.requestIdFromUrl()!;
    await expect(request.progress).toContainText(id);

    // Let the page render its first poll, then measure shifts only from there on: polling must not move anything.
    await expect(request.progress.getByText(address.toLowerCase())).toBeVisible();
    const shiftsBefore = await page.evaluate(() => (window as unknown as { __shifts: number[] }).__shifts.length);
    await request.waitForStatus("Completed");
    const shiftsWhilePolling = await page.evaluate(
      (from) => (window as unknown as { __shifts: number[] }).__shifts.slice(from).reduce((a, b) => a + b, 0),
      shiftsBefore,
    );
    expect(shiftsWhilePolling).toBeLessThan(0.001);

    for (const label of ["Received", "Approved", "Sent on-chain", "Completed"]) {
      await expect(request.step(label)).toContainText("done");
    }
    const hashLink = request.transaction.getByRole("link");
    await expect(hashLink).toHaveText(/^0x[0-9a-f]{64}/);
    const hash = (await hashLink.innerText()).slice(0, 66);
    await expect(hashLink).toHaveAttribute("href", `${E2E.explorerUrl}/tx/${hash}`);
    await expect(request.progress.getByText("Finished")).toBeVisible();
    // The hash can be copied (the clipboard is the browser's own; reading it back needs the permission).
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: E2E.baseURL });
    expect(await heightOf(request.copyHash)).toBeGreaterThanOrEqual(44);
    await request.copyHash.click();
    await expect(request.copyHash).toHaveText("Copied");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(hash);
    sponsored = { address, id, hash };
    await saveScreenshot(page, "request-desktop");

    // A reload (the id is in the URL) resumes the same view.
    await page.reload();
    await request.waitForStatus("Completed", 15_000);
    await expect(request.transaction).toContainText(hash);
    await expect(request.address).toHaveValue(address.toLowerCase());
  });

  test("the page fits a phone's width and shows the same request", async ({ page }) => {
    test.skip(!sponsored, "needs the request of the first test");
    await page.setViewportSize(VIEWPORTS.phone);
    const request = new RequestPage(page);
    await request.goto(sponsored!.id);
    await request.waitForStatus("Completed", 15_000);
    await expect(request.transaction).toContainText(sponsored!.hash);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await saveScreenshot(page, "request-phone");
  });

  test("a second attempt for the same wallet is refused as already sponsored", async ({ page, request: api }) => {
    test.skip(!sponsored, "needs the request of the first test");
    // Within the replay window (5 s, same wallet and IP) the API answers with the existing request instead;
    // wait until the window has passed, measured from the request's own requestedAt.
    const { requestedAt } = (await (await api.get(`/sponsorship/${sponsored!.id}`)).json()) as { requestedAt: string };
    await expect.poll(() => Date.now() - Date.parse(requestedAt), { timeout: 10_000 }).toBeGreaterThan(E2E.replayWindowMs + 500);

    const request = new RequestPage(page);
    await request.goto();
    await request.requestFor(sponsored!.address);
    await expect(request.refusalTitled("This wallet has already been sponsored")).toBeVisible();
    await expect(request.refusal).toContainText("Each wallet receives its first gas tokens once");
  });

  test("a wallet over its hourly limit is told to wait, with a live countdown from Retry-After", async ({ page }) => {
    test.skip(!sponsored, "needs the request of the first test");
    const request = new RequestPage(page);
    await request.goto();
    // Every validated request counts against the wallet's limit (5 an hour), refused ones included.
    const limited = request.refusalTitled("Too many requests");
    for (let attempt = 0; attempt < 8 && !(await limited.isVisible()); attempt++) {
      await request.requestFor(sponsored!.address);
      await expect(request.refusal).toBeVisible();
      await expect(request.submit).toBeEnabled();
    }
    await expect(limited).toBeVisible();
    // The alert states the wait once, in words; the ticking countdown is for the eyes only: inside the alert a
    // screen reader would read the whole alert out again every second.
    await expect(request.refusal).toContainText(/You can try again in about \d+ (minutes?|hours?)\./);
    const countdown = page.getByTestId("retry-countdown");
    expect(await liveRegionAround(countdown)).toBeNull();
    const announced = await recordLiveAnnouncements(page);
    const seconds = async () => {
      const parts = (await countdown.innerText()).split(":").map(Number);
      return parts.reduce((total, part) => total * 60 + part, 0);
    };
    const first = await seconds();
    expect(first).toBeGreaterThan(0);
    await expect.poll(seconds, { timeout: 5_000 }).toBeLessThan(first);
    await expect.poll(seconds, { timeout: 5_000 }).toBeLessThan(first - 1);
    expect(await announced()).toEqual([]);
  });

  test('a refusal\'s countdown ends with a polite "You can try again now.", the only announcement while it runs', async ({ page }) => {
    // A Retry-After of a few seconds, so the end is reached: the one answer of POST /sponsorship/request is a 429
    // as the API words it (registration is the real API's).
    await page.route("**/sponsorship/request", (route) =>
      route.request().method() === "POST"
        ? route.fulfill({
            status: 429,
            headers: { "content-type": "application/problem+json", "retry-after": "3" },
            body: JSON.stringify({ type: "about:blank", title: "Too Many Requests", status: 429, code: "rate_limited", detail: "e2e", requestId: "e2e" }),
          })
        : route.continue(),
    );
    const request = new RequestPage(page);
    await request.goto();
    await request.requestFor(freshAddress());
    await expect(request.refusalTitled("Too many requests")).toBeVisible();
    await expect(request.refusal).toContainText("You can try again in less than a minute.");
    const announced = await recordLiveAnnouncements(page);
    await expect(page.getByRole("status").filter({ hasText: "You can try again now." })).toHaveCount(1, { timeout: 10_000 });
    expect(new Set(await announced())).toEqual(new Set(["status: You can try again now."]));
    await expect(page.getByTestId("retry-countdown")).toHaveCount(0);
  });

  test("an invalid address shows its error before any request is sent", async ({ page }) => {
    const sent: string[] = [];
    page.on("request", (r) => {
      if (API_PATHS.test(new URL(r.url()).pathname)) sent.push(r.url());
    });
    const request = new RequestPage(page);
    await request.goto();

    // The hint is read with the field; what is spoken as it changes is only an error or a complete address, never
    // the character count at each key.
    const announcement = page.getByTestId("address-announcement");
    await expect(announcement).toHaveAttribute("aria-live", "polite");
    await request.address.pressSequentially("0x12");
    expect(await request.fieldMessage()).toBe("Keep typing: 4 of 42 characters.");
    await expect(announcement).toHaveText("");
    await request.address.fill("0x12zz");
    await expect(request.address).toHaveAttribute("aria-invalid", "true");
    expect(await request.fieldMessage()).toBe("Only the digits 0–9 and the letters a–f may follow 0x.");
    await expect(announcement).toHaveText("Only the digits 0–9 and the letters a–f may follow 0x.");
    await expect(page.locator('[aria-live="polite"]', { hasText: "Keep typing" })).toHaveCount(0);

    await request.address.fill("hello");
    expect(await request.fieldMessage()).toBe("A wallet address starts with 0x.");

    // Too short is only a hint while typing, and an error once submitted.
    await request.address.fill("0x1234");
    await expect(request.address).not.toHaveAttribute("aria-invalid", "true");
    await request.submit.click();
    await expect(request.address).toHaveAttribute("aria-invalid", "true");
    expect(await request.fieldMessage()).toBe("Keep typing: 6 of 42 characters.");
    await expect(request.address).toBeFocused();
    await expect(request.progress).toHaveCount(0);
    expect(sent).toEqual([]);
  });

  test("a browser wallet (injected provider) fills the address", async ({ page }) => {
    const address = freshAddress().toLowerCase();
    await page.addInitScript((account) => {
      // A minimal EIP-1193 wallet: it shares one account on the local chain.
      (window as unknown as { ethereum: unknown }).ethereum = {
        request: async ({ method }: { method: string }) => {
          switch (method) {
            case "eth_requestAccounts":
            case "eth_accounts":
              return [account];
            case "eth_chainId":
              return "0x7a69";
            case "wallet_requestPermissions":
            case "wallet_getPermissions":
              return [{ parentCapability: "eth_accounts" }];
            default:
              throw Object.assign(new Error(`unsupported ${method}`), { code: 4200 });
          }
        },
        on: () => {},
        removeListener: () => {},
      };
    }, address);
    const request = new RequestPage(page);
    await request.goto();
    await request.connectWallet.click();
    await expect(request.address).toHaveValue(new RegExp(`^${address}$`, "i"));
    await expect(page.getByText("Wallet connected:")).toBeVisible();
    expect(await request.fieldMessage()).toBe("Looks like a valid address.");
    for (const name of ["Use this address", "Disconnect"]) {
      expect(await heightOf(page.getByRole("button", { name })), name).toBeGreaterThanOrEqual(44);
    }
  });

  test("after completion, a connected browser wallet is offered the network: switch, and add it when the wallet does not know it", async ({ page }) => {
    // No wallet extension can run in this headless Chromium, so the wallet is an EIP-1193 provider injected as
    // window.ethereum. It starts on chain 1, answers wallet_switchEthereumChain for a chain it does not know with
    // 4902 (as MetaMask does), adds a chain on wallet_addEthereumChain and switches to it, and records every call.
    const address = freshAddress().toLowerCase();
    await page.addInitScript((account) => {
      const w = window as unknown as { ethereum: unknown; __walletCalls: { method: string; params: unknown }[] };
      w.__walletCalls = [];
      let chainId = "0x1";
      const known = new Set(["0x1"]);
      w.ethereum = {
        request: async ({ method, params }: { method: string; params?: unknown[] }) => {
          if (method.startsWith("wallet_") && !method.includes("Permissions")) w.__walletCalls.push({ method, params });
          switch (method) {
            case "eth_requestAccounts":
            case "eth_accounts":
              return [account];
            case "eth_chainId":
              return chainId;
            case "wallet_requestPermissions":
            case "wallet_getPermissions":
              return [{ parentCapability: "eth_accounts" }];
            case "wallet_switchEthereumChain": {
              const wanted = (params?.[0] as { chainId: string }).chainId;
              if (!known.has(wanted)) throw Object.assign(new Error("Unrecognized chain ID"), { code: 4902 });
              chainId = wanted;
              return null;
            }
            case "wallet_addEthereumChain": {
              const added = (params?.[0] as { chainId: string }).chainId;
              known.add(added);
              chainId = added;
              return null;
            }
            default:
              throw Object.assign(new Error(`unsupported ${method}`), { code: 4200 });
          }
        },
        on: () => {},
        removeListener: () => {},
      };
    }, address);
    const request = new RequestPage(page);
    await request.goto();
    await request.connectWallet.click();
    // wagmi hands over the checksummed address.
    await expect(request.address).toHaveValue(new RegExp(`^${address}$`, "i"));
    await request.submit.click();
    await request.waitForStatus("Completed");

    const addNetwork = request.progress.getByRole("button", { name: "Add Local development chain to your wallet" });
    await addNetwork.click();
    await expect(request.progress.getByRole("status").filter({ hasText: "Your wallet is on Local development chain." })).toBeVisible();
    await expect(addNetwork).toHaveCount(0);
    const calls = await page.evaluate(() => (window as unknown as { __walletCalls: unknown[] }).__walletCalls);
    expect(calls).toEqual([
      { method: "wallet_switchEthereumChain", params: [{ chainId: "0x7a69" }] },
      {
        method: "wallet_addEthereumChain",
        params: [
          {
            chainId: "0x7a69",
            chainName: "Local development chain",
            nativeCurrency: { name: "ETH", symbol: "ETH", decimals: 18 },
            // PUBLIC_RPC_URL is unset on the e2e stack: the local chain's loopback RPC_URL is offered.
            rpcUrls: [E2E.rpcUrl],
            blockExplorerUrls: [E2E.explorerUrl],
          },
        ],
      },
    ]);
  });

  test("the form works from the keyboard alone, with a visible focus", async ({ page }) => {
    const request = new RequestPage(page);
    await request.goto();
    await page.keyboard.press("Tab");
    await expect(request.address).toBeFocused();
    await page.keyboard.type(freshAddress());
    await page.keyboard.press("Tab"); // the wallet button
    await page.keyboard.press("Tab"); // submit
    await expect(request.submit).toBeFocused();
    const outline = await request.submit.evaluate((el) => getComputedStyle(el).outlineStyle);
    expect(outline).not.toBe("none");
    await page.keyboard.press("Enter");
    await expect(request.progress).toBeVisible();
    // The button was disabled while the request was sent, which drops the focus to the page: it goes to the
    // progress's heading instead, and the next Tab leads on from there.
    await expect(page.getByRole("heading", { name: "Your request" })).toBeFocused();
    await expect(request.status).toHaveText(/Status: (Pending|Approved|Relayed|Completed)/);
  });

  test("a page opened on a closed faucet asks again when the tab comes back into view", async ({ page }) => {
    let answers = 0;
    // A budget spent for an hour: the page's next timed read would come in an hour, and a hidden tab skips it.
    await page.route("**/faucet", async (route) => {
      answers++;
      const response = await route.fetch();
      const body = { ...(await response.json()), state: answers === 1 ? "budget_exhausted" : "operating", retryAfterSeconds: answers === 1 ? 3600 : null };
      await route.fulfill({ response, json: body });
    });
    const request = new RequestPage(page);
    await request.goto();
    await expect(page.getByTestId("faucet-state")).not.toHaveText("Operating");
    await expect(request.submit).toBeDisabled();
    // The tab hidden, then shown again (what a return to it after the hour dispatches).
    await page.evaluate(() => {
      for (const state of ["hidden", "visible"]) {
        Object.defineProperty(document, "visibilityState", { configurable: true, get: () => state });
        document.dispatchEvent(new Event("visibilitychange", { bubbles: true }));
      }
    });
    // Before: no read until the hour's timer, so the form stayed closed past the countdown's end.
    await expect(page.getByTestId("faucet-state")).toHaveText("Operating");
    await expect(request.submit).toBeEnabled();
  });
});

test.describe("a request still open", () => {
  test("is explained, with a link that follows it to the end", async ({ page, request: api }) => {
    // Hold the pipeline so the first request stays open: SIGSTOP the stack's worker (npm start records its pid),
    // and let it go again whatever happens.
    const processes = JSON.parse(readFileSync(path.join(E2E.dataDir, "processes.json"), "utf8")) as { worker?: number };
    // npm start always records it: a missing pid is a failure, not a reason to skip.
    expect(processes.worker, "the stack's worker pid in processes.json").toBeGreaterThan(0);
    const address = freshAddress();
    process.kill(processes.worker!, "SIGSTOP");
    let openId: string;
    try {
      expect((await api.post("/wallets/register", { data: { walletAddress: address } })).ok()).toBe(true);
      const created = await api.post("/sponsorship/request", { data: { walletAddress: address } });
      expect(created.status()).toBe(201);
      openId = ((await created.json()) as { id: string }).id;
      const { requestedAt } = (await (await api.get(`/sponsorship/${openId}`)).json()) as { requestedAt: string };
      // Past the replay window, a second request is refused as open (409) instead of answered with the first.
      await expect.poll(() => Date.now() - Date.parse(requestedAt), { timeout: 10_000 }).toBeGreaterThan(E2E.replayWindowMs + 500);

      const request = new RequestPage(page);
      await request.goto();
      await request.requestFor(address);
      await expect(request.refusalTitled("A request for this wallet is still in progress")).toBeVisible();
      await request.refusal.getByRole("link", { name: "Follow the open request" }).click();
      await expect.poll(() => request.requestIdFromUrl()).toBe(openId);
      await expect(request.progress).toContainText(openId);
      const progressHeading = page.getByRole("heading", { name: "Your request" });
      await expect(progressHeading).toBeFocused();
      await request.waitForStatus("Pending", 15_000);
      // Asked again while it is still open: refused again, and the link leads to the request already shown (nothing
      // new is mounted). The focus goes to it all the same; before, it stayed on the page, the link gone.
      await request.submit.click();
      await expect(request.refusalTitled("A request for this wallet is still in progress")).toBeVisible();
      await request.refusal.getByRole("link", { name: "Follow the open request" }).click();
      await expect(progressHeading).toBeFocused();
    } finally {
      process.kill(processes.worker!, "SIGCONT");
    }
    // Once the worker runs again, the followed request completes on the same page.
    await new RequestPage(page).waitForStatus("Completed");
  });
});

test.describe.serial("the faucet's status on /request", () => {
  test("shows the network, the amount per wallet and the faucet's state", async ({ page }) => {
    await page.goto("/request");
    await expect(page.getByTestId("faucet-network")).toHaveText("Local development chain (chain id 31337)");
    await expect(page.getByTestId("faucet-amount")).toHaveText("0.01 ETH");
    await expect(page.getByTestId("faucet-state")).toHaveText("Operating");
    await expect(page.getByRole("button", { name: "Request gas" })).toBeEnabled();
  });

  test("with the treasury paused on-chain the form is disabled with the reason and a countdown", async ({ page }) => {
    const { treasuryAddress } = readLocalDeployment(E2E.dataDir)!;
    const clients = createChainClients({ rpcUrl: E2E.rpcUrl, chainId: 31337 });
    const owner = clients.walletClient(LOCAL_DEPLOYER_KEY);
    const setPaused = async (paused: boolean) => {
      const hash = await owner.writeContract({ address: treasuryAddress, abi: treasuryAbi, functionName: paused ? "pause" : "unpause" });
      await clients.waitForTransactionReceipt({ hash });
    };
    await setPaused(true);
    try {
      await openRequestShowingFaucet(page, "Paused");
      const button = page.getByRole("button", { name: "Request gas" });
      await expect(button).toBeDisabled();
      await expect(page.getByRole("status").filter({ hasText: "The faucet is paused by its operator" })).toBeVisible();
      await expect(page.getByTestId("retry-countdown")).toBeVisible();
      await saveScreenshot(page, "request-faucet-paused");
    } finally {
      await setPaused(false);
    }
    await openRequestShowingFaucet(page, "Operating");
  });

  test("while sponsorships are paused the countdown is shown, the wait said once in words, and nothing is read out every second", async ({
    page,
    request: api,
  }) => {
    await signInApi(api);
    expect((await api.post("/admin/pause", { data: { reason: "e2e: the closed notice's countdown" } })).ok()).toBe(true);
    try {
      await openRequestShowingFaucet(page, "Paused");
      const notice = page.getByRole("status").filter({ hasText: "The faucet is paused by its operator" });
      // A pause has no end: the wait is when the page looks again, not when a try would succeed.
      await expect(notice).toContainText(/This page checks again in (about \d+ minutes?|less than a minute)\./);
      await expect(notice).not.toContainText("You can try again");
      const countdown = page.getByTestId("retry-countdown");
      await expect(countdown).toBeVisible();
      await expect(page.getByText(/^Checking again in \d+:\d\d\.$/)).toBeVisible();
      expect(await liveRegionAround(countdown)).toBeNull();
      const announced = await recordLiveAnnouncements(page);
      const first = await countdown.innerText();
      await expect.poll(() => countdown.innerText(), { timeout: 5_000 }).not.toBe(first);
      const second = await countdown.innerText();
      await expect.poll(() => countdown.innerText(), { timeout: 5_000 }).not.toBe(second);
      expect(await announced()).toEqual([]);
    } finally {
      expect((await api.post("/admin/resume", { data: { reason: "e2e: done" } })).ok()).toBe(true);
    }
  });

  test('says "Status unavailable" when GET /faucet fails, and leaves the form usable', async ({ page }) => {
    await page.route("**/faucet", (route) =>
      route.fulfill({
        status: 503,
        headers: { "content-type": "application/problem+json", "retry-after": "5" },
        body: JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, code: "unavailable", detail: "e2e", requestId: "e2e" }),
      }),
    );
    await page.goto("/request");
    await expect(page.getByTestId("faucet-state")).toHaveText("Status unavailable");
    await expect(page.getByRole("button", { name: "Request gas" })).toBeEnabled();
  });

  test("an answer that was right once is not kept when GET /faucet starts failing", async ({ page }) => {
    await page.goto("/request");
    await expect(page.getByTestId("faucet-state")).toHaveText("Operating");
    await page.route("**/faucet", (route) =>
      route.fulfill({
        status: 503,
        headers: { "content-type": "application/problem+json" },
        body: JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, code: "unavailable", detail: "e2e", requestId: "e2e" }),
      }),
    );
    // The next poll (every 15 s) fails.
    await expect(page.getByTestId("faucet-state")).toHaveText("Status unavailable", { timeout: 25_000 });
    await page.unroute("**/faucet");
    await expect(page.getByTestId("faucet-state")).toHaveText("Operating", { timeout: 25_000 });
  });

  test("a refusal because sponsorships are paused brings the faucet's status up to date at once", async ({ page, request: api }) => {
    await signInApi(api);
    const request = new RequestPage(page);
    await request.goto();
    await expect(page.getByTestId("faucet-state")).toHaveText("Operating");
    await request.address.fill(freshAddress());
    expect((await api.post("/admin/pause", { data: { reason: "e2e: the summary follows a refusal" } })).ok()).toBe(true);
    try {
      // GET /faucet is a snapshot at most a second old: wait until it has the pause, so the page's next read has it.
      await expect.poll(async () => ((await (await api.get("/faucet")).json()) as { state: string }).state).toBe("paused");
      // The page itself would look again only after 15 s: the refusal must make it look now.
      await request.submit.click();
      await expect(request.refusalTitled("The faucet is paused")).toBeVisible();
      await expect(page.getByTestId("faucet-state")).toHaveText("Paused", { timeout: 5_000 });
      await expect(request.submit).toBeDisabled();
    } finally {
      expect((await api.post("/admin/resume", { data: { reason: "e2e: done" } })).ok()).toBe(true);
    }
  });
});
