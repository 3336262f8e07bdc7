import { connect, createServer, type Server, type Socket } from "node:net";
import { freePort } from "./ports";

export type TcpRelay = {
  port: number;
  /** Drops every connection and refuses new ones (the listener is closed). */
  cut: () => Promise<void>;
  /** Listens again on the same port. */
  restore: () => Promise<void>;
  /**
   * From now on nothing passes in either direction, and nothing is closed: a connection whose packets are dropped
   * without a reset (a partition, a frozen peer). New connections are accepted and get nothing either, until
   * `cut` and `restore`.
   */
  blackhole: () => void;
  /**
   * Resets every connection (RST, as a client sees when the server process is killed: "read ECONNRESET") and keeps
   * listening: a new connection reaches the server again.
   */
  reset: () => void;
  /** The next connection whose client sends `text` is reset (RST) at that moment, instead of passing it on. */
  resetWhenClientSends: (text: string) => void;
  /**
   * The next connection whose client sends `text` gets, instead of passing it on, a FATAL with `code` from "the
   * server", and is closed (FIN): a server shutting down (57P01) or a backend terminated at that moment.
   */
  fatalWhenClientSends: (text: string, code: string) => void;
  /**
   * While on, every new connection is answered as by a PostgreSQL still starting up: its startup message gets the
   * FATAL "the database system is starting up" (57P03), then the connection is closed.
   */
  startingUp: (on: boolean) => void;
  /**
   * While on, every new connection is accepted and closed at once, without a byte and without a reset: a TCP proxy
   * in front of PostgreSQL whose server is gone (the Cloud SQL Auth Proxy, HAProxy without a healthy backend).
   */
  hangUp: (on: boolean) => void;
  /** How many connections the relay has accepted so far. */
  readonly accepted: number;
  close: () => Promise<void>;
};

/** PostgreSQL's ErrorResponse message: a FATAL with `code` and `message`. */
function fatal(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`);
  const head = Buffer.alloc(5);
  head.write("E", 0);
  head.writeUInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

/**
 * A TCP relay on 127.0.0.1 in front of a real server (PostgreSQL), which a test can cut and restore: a real network
 * failure, not a mocked one.
 */
export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  const clients = new Set<Socket>();
  let server: Server | undefined;
  let dropping = false;
  let resetOn: string | undefined;
  let fatalOn: { text: string; code: string } | undefined;
  let refusing = false;
  let hangingUp = false;
  let accepted = 0;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer((client) => {
        accepted++;
        if (hangingUp) {
          // Tracked until closed, so that `cut` (whose listener waits for every connection) ends it too.
          sockets.add(client);
          client.on("error", () => {}).on("close", () => sockets.delete(client));
          client.end();
          return;
        }
        if (refusing) {
          client.on("error", () => {});
          client.once("data", () => client.end(fatal("57P03", "the database system is starting up")));
          return;
        }
        const upstream = connect(target.port, target.host);
        let hungUp = false;
        sockets.add(client).add(upstream);
        clients.add(client);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
          clients.delete(client);
        };
        client.on("error", drop).on("close", drop);
        upstream.on("error", drop).on("close", drop);
        client.on("data", (chunk: Buffer) => {
          if (resetOn !== undefined && chunk.includes(resetOn)) {
            resetOn = undefined;
            client.resetAndDestroy();
            return;
          }
          if (fatalOn !== undefined && chunk.includes(fatalOn.text)) {
            const { code } = fatalOn;
            fatalOn = undefined;
            hungUp = true;
            // The server's side goes (its close must not destroy the client before the FATAL is written).
            upstream.removeAllListeners("close").on("error", () => {});
            upstream.destroy();
            client.end(fatal(code, "terminating connection due to administrator command"));
            return;
          }
          if (!dropping) upstream.write(chunk);
        });
        upstream.on("data", (chunk: Buffer) => void (dropping || hungUp || client.write(chunk)));
      });
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
  const cut = async () => {
    const closed = new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    for (const s of sockets) s.destroy();
    sockets.clear();
    clients.clear();
    await closed;
  };
  await listen();
  return {
    port,
    cut,
    restore: () => {
      dropping = false;
      return listen();
    },
    blackhole: () => {
      dropping = true;
    },
    reset: () => {
      for (const client of clients) client.resetAndDestroy();
    },
    resetWhenClientSends: (text) => {
      resetOn = text;
    },
    fatalWhenClientSends: (text, code) => {
      fatalOn = { text, code };
    },
    startingUp: (on) => {
      refusing = on;
    },
    hangUp: (on) => {
      hangingUp = on;
    },
    get accepted() {
      return accepted;
    },
    close: cut,
  };
}
