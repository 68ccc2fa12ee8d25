/**
 * Which network addresses the built-in `http` handler may connect to. By default every address a
 * tenant could use to reach into the network the workers run in is refused: loopback, private
 * (RFC 1918, unique-local), link-local (cloud metadata at 169.254.169.254 among them), carrier-grade
 * NAT, unspecified, multicast, reserved and documentation ranges, NAT64 IPv6, and IPv4-mapped IPv6
 * forms of all of these. An
 * allowlist of host names and CIDR ranges (SCHEDULER_HTTP_ALLOW) admits internal targets on purpose.
 */
import { BlockList, isIP } from 'node:net'

interface Rule {
  name: string
  ranges: ReadonlyArray<readonly [string, number, 'ipv4' | 'ipv6']>
}

const RULES: readonly Rule[] = [
  {
    name: 'loopback',
    ranges: [
      ['127.0.0.0', 8, 'ipv4'],
      ['::1', 128, 'ipv6'],
    ],
  },
  {
    name: 'unspecified ("this network")',
    ranges: [
      ['0.0.0.0', 8, 'ipv4'],
      ['::', 128, 'ipv6'],
    ],
  },
  {
    name: 'private',
    ranges: [
      ['10.0.0.0', 8, 'ipv4'],
      ['172.16.0.0', 12, 'ipv4'],
      ['192.168.0.0', 16, 'ipv4'],
    ],
  },
  {
    name: 'unique-local or site-local (private IPv6)',
    ranges: [
      ['fc00::', 7, 'ipv6'],
      // deprecated (RFC 3879), still routed privately by some networks
      ['fec0::', 10, 'ipv6'],
    ],
  },
  {
    name: 'link-local (cloud metadata among them)',
    ranges: [
      ['169.254.0.0', 16, 'ipv4'],
      ['fe80::', 10, 'ipv6'],
    ],
  },
  { name: 'carrier-grade NAT (shared)', ranges: [['100.64.0.0', 10, 'ipv4']] },
  {
    name: 'multicast',
    ranges: [
      ['224.0.0.0', 4, 'ipv4'],
      ['ff00::', 8, 'ipv6'],
    ],
  },
  {
    name: 'reserved or documentation',
    ranges: [
      ['192.0.0.0', 24, 'ipv4'],
      ['192.0.2.0', 24, 'ipv4'],
      ['198.18.0.0', 15, 'ipv4'],
      ['198.51.100.0', 24, 'ipv4'],
      ['203.0.113.0', 24, 'ipv4'],
      ['240.0.0.0', 4, 'ipv4'],
      ['100::', 64, 'ipv6'],
      ['2001:db8::', 32, 'ipv6'],
    ],
  },
  // IPv4-mapped IPv6 (::ffff:a.b.c.d) needs no rule: BlockList matches it against the IPv4 ranges
  {
    name: 'NAT64, 6to4, IPv4-compatible or IPv4-translated IPv6',
    ranges: [
      ['64:ff9b::', 96, 'ipv6'],
      ['64:ff9b:1::', 48, 'ipv6'],
      ['2002::', 16, 'ipv6'],
      ['::', 96, 'ipv6'],
      // ::ffff:0:a.b.c.d (RFC 2765 SIIT)
      ['::ffff:0:0:0', 96, 'ipv6'],
    ],
  },
]

const BLOCKS = RULES.map((rule) => {
  const list = new BlockList()
  for (const [network, prefix, family] of rule.ranges) list.addSubnet(network, prefix, family)
  return { name: rule.name, list }
})

/** The allowlist: host names (exact, case-insensitive) and CIDR ranges or single addresses. */
export interface AddressPolicy {
  hosts: ReadonlySet<string>
  ranges: BlockList
  /** The allowlist as written, for messages. */
  text: string
}

/** Strips the brackets of an IPv6 URL host. */
export const bareHost = (host: string): string => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host)

/**
 * Parses a comma-separated allowlist ("127.0.0.1, 10.0.0.0/8, internal.example"); throws an Error
 * naming the entry that is neither a host name nor an address nor a CIDR range.
 */
export function parseAddressPolicy(text: string): AddressPolicy {
  const hosts = new Set<string>()
  const ranges = new BlockList()
  for (const entry of text
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')) {
    const [address = '', prefixText, extra] = bareHost(entry).split('/')
    const family = isIP(address)
    if (family !== 0) {
      const max = family === 4 ? 32 : 128
      const prefix = prefixText === undefined ? max : Number(prefixText)
      if (extra !== undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > max || (prefixText !== undefined && !/^\d+$/.test(prefixText))) {
        throw new Error(`"${entry}" is not a valid CIDR range (the prefix must be 0 to ${max})`)
      }
      ranges.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6')
    } else if (prefixText === undefined && /^[a-z0-9]([a-z0-9-]{0,62})(\.[a-z0-9]([a-z0-9-]{0,62}))*\.?$/i.test(entry)) {
      hosts.add(entry.toLowerCase().replace(/\.$/, ''))
    } else {
      throw new Error(`"${entry}" is neither a host name, an IP address nor a CIDR range`)
    }
  }
  return { hosts, ranges, text }
}

/** Why connecting to `address` (an IP) is refused under `policy`, or undefined when it is allowed. */
export function refusedAddress(address: string, policy: AddressPolicy): string | undefined {
  const family = isIP(address)
  if (family === 0) return 'not an IP address'
  const type = family === 4 ? 'ipv4' : 'ipv6'
  if (policy.ranges.check(address, type)) return undefined
  return BLOCKS.find((b) => b.list.check(address, type))?.name
}

/** Whether `host` (a URL's hostname) is allowed by name, whatever it resolves to. */
export function allowedHost(host: string, policy: AddressPolicy): boolean {
  return policy.hosts.has(bareHost(host).toLowerCase().replace(/\.$/, ''))
}

/**
 * The Fetch standard's "bad ports" (https://fetch.spec.whatwg.org/#bad-port): services (mail, shell,
 * file sharing, chat, …) a browser never sends an HTTP request to, because a crafted request body
 * can be read as commands of their protocols.
 */
const BAD_PORTS = new Set([
  0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137,
  139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
])

/** Whether `port` is one of the Fetch standard's bad ports. */
export function badPort(port: number): boolean {
  return BAD_PORTS.has(port)
}

/** Whether the policy admits `host` by name, or (an address literal) by an allowed range. */
export function allowedExplicitly(host: string, policy: AddressPolicy): boolean {
  if (allowedHost(host, policy)) return true
  const literal = bareHost(host)
  const family = isIP(literal)
  return family !== 0 && policy.ranges.check(literal, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * Why every request to `url` would be refused under `policy`, from the URL alone (no name is
 * resolved): its port is a bad port, or its host is an address literal in a refused range, or
 * `localhost`, unless the policy admits the host. Undefined when the URL does not say (a name is checked against what it resolves to
 * when the request is made). For a subscription that can never be delivered to, refused at once.
 */
export function refusedUrlHost(url: URL, policy: AddressPolicy): string | undefined {
  const host = bareHost(url.hostname)
  if (allowedExplicitly(host, policy)) return undefined
  const name = host.toLowerCase().replace(/\.$/, '')
  if (name === 'localhost' || name.endsWith('.localhost')) return `${host} is a loopback name`
  const rule = isIP(host) === 0 ? undefined : refusedAddress(host, policy)
  if (rule !== undefined) return `${host} is a ${rule} address`
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80))
  if (badPort(port)) return `port ${port} is on the Fetch standard's list of bad ports (mail, shell and other services a crafted request could talk to)`
  return undefined
}
