import type { ReactNode } from "react";
import { card, focusRing, primaryButton, textInput } from "../../_components/styles";

/**
 * A card with a heading (`id` is the heading's). `focusableHeading` lets a script move the focus to the heading
 * (tabIndex -1: not a tab stop), for a change that removes the control that had it.
 */
export function Section({
  title,
  id,
  children,
  actions,
  focusableHeading,
}: {
  title: string;
  id: string;
  children: ReactNode;
  actions?: ReactNode;
  focusableHeading?: boolean;
}) {
  return (
    <section aria-labelledby={id} className={`${card} min-w-0`}>
      <div className="mb-3 flex flex-wrap items-baseline justify-between gap-2">
        <h2 id={id} tabIndex={focusableHeading ? -1 : undefined} className={`text-lg font-semibold text-slate-900 ${focusableHeading ? focusRing : ""}`}>
          {title}
        </h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

/** A table that scrolls sideways on a phone; focusable so the keyboard can scroll it too. */
export function TableScroll({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div
      className="-mx-4 overflow-x-auto px-4 focus-visible:outline-2 focus-visible:outline-blue-700 sm:mx-0 sm:px-0"
      tabIndex={0}
      role="region"
      aria-label={`${label} (table)`}
    >
      {children}
    </div>
  );
}

export const th = "border-b border-slate-300 py-2 pr-4 text-left text-sm font-semibold whitespace-nowrap text-slate-900";
export const td = "border-b border-slate-200 py-2 pr-4 align-top text-sm text-slate-800";

export function Notice({ tone = "info", children }: { tone?: "info" | "warning" | "error"; children: ReactNode }) {
  const styles = {
    info: "border-slate-300 bg-slate-50 text-slate-800",
    warning: "border-amber-400 bg-amber-50 text-amber-950",
    error: "border-red-300 bg-red-50 text-red-950",
  }[tone];
  return <p className={`rounded-md border px-3 py-2 text-sm ${styles}`}>{children}</p>;
}

/**
 * The dashboard's data table: scrolls sideways on a phone (TableScroll), an optional caption for screen readers,
 * one header row of column names, and the caller's rows as its body.
 */
export function DataTable({ label, caption, columns, children }: { label: string; caption?: string; columns: readonly ReactNode[]; children: ReactNode }) {
  return (
    <TableScroll label={label}>
      <table className="w-full">
        {caption && <caption className="sr-only">{caption}</caption>}
        <thead>
          <tr>
            {columns.map((column, i) => (
              <th key={i} scope="col" className={th}>
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </TableScroll>
  );
}

/**
 * A one-field lookup (GET form, role search): a labelled search input described by `hintId` (the caller renders the
 * hint, which says what is wrong when `invalid`), and its button.
 */
export function SearchField(props: {
  action: string;
  formLabel: string;
  id: string;
  name: string;
  label: string;
  value: string;
  placeholder: string;
  invalid: boolean;
  hintId: string;
  button: string;
  className?: string;
}) {
  return (
    <form
      method="get"
      action={props.action}
      role="search"
      aria-label={props.formLabel}
      className={`flex flex-col gap-2 sm:flex-row sm:items-end ${props.className ?? ""}`}
    >
      <div className="flex-1 space-y-1">
        <label htmlFor={props.id} className="block text-sm font-medium text-slate-900">
          {props.label}
        </label>
        <input
          id={props.id}
          name={props.name}
          type="search"
          defaultValue={props.value}
          placeholder={props.placeholder}
          spellCheck={false}
          autoComplete="off"
          aria-invalid={props.invalid ? true : undefined}
          aria-describedby={props.hintId}
          className={`${textInput} font-mono text-sm`}
        />
      </div>
      <button type="submit" className={primaryButton}>
        {props.button}
      </button>
    </form>
  );
}
