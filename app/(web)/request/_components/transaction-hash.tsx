"use client";

import { useState } from "react";
import { link, linkButton } from "../../_components/styles";

/** Where a transaction hash leads: the block explorer's page when EXPLORER_URL is set, and the API's public record of it. */
export function transactionLinks(hash: string, explorerUrl: string | null): { explorer: string | null; record: string } {
  return { explorer: explorerUrl ? `${explorerUrl}/tx/${hash}` : null, record: `/sponsorship/tx/${hash}` };
}

const HASH_PLACEHOLDER = "0x" + "0".repeat(64);

function CopyButton({ text }: { text: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  return (
    <>
      <button
        type="button"
        className={linkButton}
        onClick={() =>
          navigator.clipboard.writeText(text).then(
            () => setState("copied"),
            () => setState("failed"),
          )
        }
      >
        {state === "copied" ? "Copied" : "Copy hash"}
      </button>
      <span role="status" className="text-slate-700">
        {state === "copied" ? (
          <span className="sr-only">The transaction hash is copied.</span>
        ) : state === "failed" ? (
          "Could not copy: select the hash instead."
        ) : (
          ""
        )}
      </span>
    </>
  );
}

/**
 * The relay's transaction hash. With an explorer configured the hash links to it; without one, a bare hash would be
 * a dead end, so the page offers the service's own public record of the transaction (GET /sponsorship/tx/:hash).
 * The hash can be copied either way. The rows keep their height before and after the hash arrives: no layout shift.
 */
export function TransactionHash({ hash, explorerUrl, terminal }: { hash: string | null; explorerUrl: string | null; terminal: boolean }) {
  const links = hash ? transactionLinks(hash, explorerUrl) : null;
  return (
    <dd className="font-mono break-all text-slate-800" data-testid="transaction-hash">
      <div className="relative">
        {/* The placeholder has the hash's length, so the row's height does not change when the hash arrives. */}
        <span aria-hidden className="invisible">
          {HASH_PLACEHOLDER}
        </span>
        <span className="absolute inset-0">
          {hash && links ? (
            links.explorer ? (
              <a className={link} href={links.explorer} target="_blank" rel="noreferrer">
                {hash}
                <span className="sr-only"> (opens the block explorer)</span>
              </a>
            ) : (
              hash
            )
          ) : (
            <span className="font-sans text-slate-700">{terminal ? "none" : "not sent yet"}</span>
          )}
        </span>
      </div>
      {/* As tall as its buttons (44 px) before the hash arrives too: no layout shift. */}
      <div className="flex min-h-11 flex-wrap items-center gap-x-4 font-sans text-sm">
        {hash && links && (
          <>
            <CopyButton key={hash} text={hash} />
            {!links.explorer && (
              <a className={linkButton} href={links.record} target="_blank" rel="noreferrer">
                The service&apos;s record of it (JSON)
                <span className="sr-only"> (opens in a new tab)</span>
              </a>
            )}
          </>
        )}
      </div>
    </dd>
  );
}
