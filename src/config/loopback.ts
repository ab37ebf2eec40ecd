// Which host names never leave this machine: what the config's rules for plain http, shipped
// secrets, `trustProxy: true` and one server behind two upstream names ask.

/** `localhost`, `*.localhost`, 127.0.0.0/8 and `[::1]`: names that never leave this machine (RFC 6761 §6.3). */
export function isLoopbackHost (hostname: string): boolean {
  return hostname === 'localhost' || hostname.endsWith('.localhost') || hostname === '[::1]' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
}
