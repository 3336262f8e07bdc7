/**
 * Shared Tailwind class lists. Focus is always visible (a 2 px outline offset from the control), colours keep a
 * contrast ratio of at least 4.5:1 on their backgrounds (slate-700+ text on white, white on blue-700/red-700).
 */
export const focusRing = "focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-blue-700";

export const primaryButton = `inline-flex min-h-11 items-center justify-center gap-2 rounded-md bg-blue-700 px-4 py-2 font-medium text-white hover:bg-blue-800 disabled:cursor-not-allowed disabled:bg-slate-400 disabled:text-white ${focusRing}`;

export const secondaryButton = `inline-flex min-h-11 items-center justify-center gap-2 rounded-md border border-slate-400 bg-white px-4 py-2 font-medium text-slate-900 hover:bg-slate-100 disabled:cursor-not-allowed disabled:text-slate-500 ${focusRing}`;

export const dangerButton = `inline-flex min-h-11 items-center justify-center gap-2 rounded-md bg-red-700 px-4 py-2 font-medium text-white hover:bg-red-800 disabled:cursor-not-allowed disabled:bg-slate-400 ${focusRing}`;

export const textInput = `block w-full rounded-md border border-slate-400 bg-white px-3 py-2 text-slate-900 placeholder:text-slate-500 aria-[invalid=true]:border-red-700 ${focusRing}`;

/** A link in running text: as tall as its line. */
export const link = `font-medium text-blue-800 underline underline-offset-2 hover:text-blue-950 ${focusRing}`;

/**
 * A button (or a stand-alone link) that looks like a link: still a touch target at least 44 px high, as every
 * control (docs/ui.md, "Accessibility and layout").
 */
export const linkButton = `inline-flex min-h-11 items-center disabled:cursor-not-allowed disabled:text-slate-500 disabled:no-underline ${link}`;

export const card = "rounded-lg border border-slate-300 bg-white p-4 shadow-sm sm:p-6";
