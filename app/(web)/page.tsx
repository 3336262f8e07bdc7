import Link from "next/link";
import { link } from "./_components/styles";

/** The root: where people go. */
export default function HomePage() {
  return (
    <main id="main" className="mx-auto w-full max-w-2xl px-4 py-12">
      <h1 className="text-3xl font-semibold tracking-tight text-slate-900">Gas sponsorship</h1>
      <p className="mt-2 text-slate-700">First gas tokens for new wallets on the test network.</p>
      <ul className="mt-6 space-y-2">
        <li>
          <Link className={link} href="/request">
            Request gas for a wallet
          </Link>
        </li>
        <li>
          <Link className={link} href="/dashboard">
            Administrator dashboard
          </Link>
        </li>
        <li>
          {/* /docs is a route handler (an HTML document), not a page: a full navigation, not <Link>. */}
          {/* eslint-disable-next-line @next/next/no-html-link-for-pages */}
          <a className={link} href="/docs">
            API reference
          </a>{" "}
          (
          <a className={link} href="/openapi.json">
            OpenAPI document
          </a>
          )
        </li>
      </ul>
    </main>
  );
}
