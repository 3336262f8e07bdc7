"use client";

import { useConnect, useConnection, useConnectors, useDisconnect } from "wagmi";
import { linkButton, secondaryButton } from "../../_components/styles";

function shorten(address: string): string {
  return `${address.slice(0, 6)}…${address.slice(-4)}`;
}

function explain(error: Error | null): string | null {
  if (!error) return null;
  const name = error.name;
  if (name === "ProviderNotFoundError") return "No browser wallet was found. Install a wallet extension, or paste the address instead.";
  if (name === "UserRejectedRequestError" || /rejected/i.test(error.message)) return "The wallet did not share an address. You can paste it instead.";
  return "The browser wallet could not be connected. You can paste the address instead.";
}

/**
 * Fills the address from the browser's wallet (wagmi's injected connector; EIP-6963 wallets are preferred when
 * the browser announces them). The page only needs the address: no signature, no transaction.
 */
export function ConnectWallet({ onAddress, disabled }: { onAddress: (address: string) => void; disabled?: boolean }) {
  const connection = useConnection();
  const connectors = useConnectors();
  const connect = useConnect();
  const disconnect = useDisconnect();
  const connector = connectors.find((c) => c.id !== "injected") ?? connectors[0];
  const message = explain(connect.error);

  if (connection.status === "connected") {
    return (
      <div className="flex flex-wrap items-center gap-x-3 gap-y-1 text-sm text-slate-700">
        <span>
          Wallet connected: <span className="font-mono text-slate-900">{shorten(connection.address)}</span>
        </span>
        <button type="button" className={linkButton} onClick={() => onAddress(connection.address)} disabled={disabled}>
          Use this address
        </button>
        <button type="button" className={linkButton} onClick={() => disconnect.mutate()}>
          Disconnect
        </button>
      </div>
    );
  }

  return (
    <div className="flex flex-col gap-1">
      <div>
        <button
          type="button"
          className={secondaryButton}
          disabled={disabled || !connector || connect.isPending}
          onClick={() => {
            if (!connector) return;
            connect.mutate({ connector }, { onSuccess: (data) => data.accounts[0] && onAddress(data.accounts[0]) });
          }}
        >
          {connect.isPending ? "Waiting for your wallet…" : "Connect browser wallet"}
        </button>
      </div>
      <p className="min-h-5 text-sm text-red-800" aria-live="polite">
        {message}
      </p>
    </div>
  );
}
