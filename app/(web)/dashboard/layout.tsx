import type { Metadata } from "next";
import type { ReactNode } from "react";
import { isDatabaseOutage } from "@/db/unavailable";
import { currentAdminSession } from "@/lib/admin/request-context";
import { link, secondaryButton } from "../_components/styles";
import { signOutAction } from "./actions";
import { DashboardNav } from "./_components/dashboard-nav";

export const metadata: Metadata = {
  title: { default: "Dashboard · Gas sponsorship", template: "%s · Dashboard" },
  robots: { index: false, follow: false },
};

/**
 * The dashboard's frame. The navigation and sign-out appear only with a session; each page checks the session
 * again itself before it reads anything (a layout is not re-rendered on every navigation). During a database
 * outage the session cannot be checked: the frame shows no navigation and the page shows the outage notice
 * (_components/database-outage.tsx).
 */
export default async function DashboardLayout({ children }: { children: ReactNode }) {
  const session = await currentAdminSession().catch((error: unknown) => {
    if (isDatabaseOutage(error)) return null;
    throw error;
  });
  return (
    <div className="min-h-screen">
      <a href="#main" className="sr-only focus:not-sr-only focus:absolute focus:top-2 focus:left-2 focus:rounded focus:bg-white focus:p-2">
        Skip to content
      </a>
      <header className="border-b border-slate-300 bg-white">
        <div className="mx-auto flex max-w-7xl flex-wrap items-center justify-between gap-3 px-4 py-3">
          <p className="font-semibold text-slate-900">Gas sponsorship · Dashboard</p>
          {session && (
            <div className="flex flex-wrap items-center gap-3">
              <DashboardNav />
              <form action={signOutAction}>
                <button type="submit" className={secondaryButton}>
                  Sign out
                </button>
              </form>
            </div>
          )}
        </div>
      </header>
      <main id="main" className="mx-auto max-w-7xl px-4 py-6">
        {children}
      </main>
      <footer className="mx-auto max-w-7xl px-4 pb-6 text-sm text-slate-700">
        {/* /docs is a route handler (an HTML document), not a page: a full navigation, not <Link>. */}
        {/* eslint-disable-next-line @next/next/no-html-link-for-pages */}
        <a className={link} href="/docs">
          API reference
        </a>
      </footer>
    </div>
  );
}
