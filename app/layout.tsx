import type { Metadata } from "next";
import type { ReactNode } from "react";
import "./globals.css";

/**
 * Every page renders per request: the Content-Security-Policy allows only scripts carrying the request's nonce
 * (lib/http/security-headers.ts), and a page prerendered at build time would carry none.
 */
export const dynamic = "force-dynamic";

export const metadata: Metadata = {
  title: "Gas sponsorship",
  description: "First gas tokens for new wallets on the test network.",
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body className="min-h-screen bg-slate-50 text-slate-900 antialiased">{children}</body>
    </html>
  );
}
