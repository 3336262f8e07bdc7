/** Advisory-lock keys: every change to one subject's counters or blocks happens under its key. */
export const walletLockKey = (address: string) => `wallet:${address}`;
export const sponsorshipIpLockKey = (ip: string) => `sponsorship_ip:${ip}`;
export const registerIpLockKey = (ip: string) => `register_ip:${ip}`;
