/**
 * A loopback TCP proxy for partition tests: forwards connections to a target
 * until `blackhole()`, after which it keeps every socket open but passes no
 * byte in either direction (as a network partition that drops packets does,
 * unlike a reset). `heal()` forwards again; `close()` destroys everything.
 */
import { createServer, connect, type Socket } from 'node:net'

export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number
  blackhole(): void
  heal(): void
  close(): Promise<void>
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>()
  let dropping = false
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host)
    sockets.add(client)
    sockets.add(upstream)
    const forward = (from: Socket, to: Socket) =>
      from.on('data', (chunk: Buffer) => {
        if (!dropping) to.write(chunk)
      })
    forward(client, upstream)
    forward(upstream, client)
    const close = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('error', close).on('close', close)
    upstream.on('error', close).on('close', close)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (typeof address !== 'object' || !address) throw new Error('proxy has no port')
  return {
    port: address.port,
    blackhole: () => {
      dropping = true
    },
    heal: () => {
      dropping = false
    },
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** `url` with its host and port replaced by the proxy's. */
export function viaProxy(url: string, proxy: TcpProxy): string {
  const u = new URL(url)
  u.hostname = '127.0.0.1'
  u.port = String(proxy.port)
  return u.toString()
}
