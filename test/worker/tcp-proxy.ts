/**
 * A loopback TCP proxy for partition and failover tests: forwards connections to a target
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
  /** Client connections open through the proxy now. */
  connectionCount(): number
  close(): Promise<void>
  /** Listens again on the same port after close(). */
  reopen(): Promise<void>
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>()
  const clients = new Set<Socket>()
  let dropping = false
  const handle = (client: Socket) => {
    const upstream = connect(target.port, target.host)
    clients.add(client)
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
      clients.delete(client)
    }
    client.on('error', close).on('close', close)
    upstream.on('error', close).on('close', close)
  }
  let server = createServer(handle)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (typeof address !== 'object' || !address) throw new Error('proxy has no port')
  const port = address.port
  return {
    port,
    blackhole: () => {
      dropping = true
    },
    heal: () => {
      dropping = false
    },
    connectionCount: () => clients.size,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
    reopen: async () => {
      server = createServer(handle)
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
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
