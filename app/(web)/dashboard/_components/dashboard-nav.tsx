"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";
import { focusRing } from "../../_components/styles";

const LINKS = [
  { href: "/dashboard", label: "Overview" },
  { href: "/dashboard/requests", label: "Requests" },
  { href: "/dashboard/wallets", label: "Wallets" },
  { href: "/dashboard/controls", label: "Controls" },
  { href: "/dashboard/webhooks", label: "Webhooks" },
];

export function DashboardNav() {
  const pathname = usePathname();
  return (
    <nav aria-label="Dashboard">
      <ul className="flex flex-wrap gap-1">
        {LINKS.map((link) => {
          const current = link.href === "/dashboard" ? pathname === "/dashboard" : pathname.startsWith(link.href);
          return (
            <li key={link.href}>
              <Link
                href={link.href}
                aria-current={current ? "page" : undefined}
                className={`inline-flex min-h-11 items-center rounded-md px-3 font-medium ${
                  current ? "bg-slate-900 text-white" : "text-slate-800 hover:bg-slate-200"
                } ${focusRing}`}
              >
                {link.label}
              </Link>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}
