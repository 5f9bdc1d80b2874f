// What the transport suites' scripted servers share: a Unix socket in a
// temporary directory of the test file's own (removed after its tests),
// the connections it accepted (to break them), and its stop.

import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { after } from "node:test";

/** The directory of the test file's sockets. */
export const socketDir = mkdtempSync("/tmp/cdts-scripted-");
after(() => rmSync(socketDir, { recursive: true, force: true }));
let nsock = 0;

/** A scripted server listening on its Unix socket. */
export interface Listening {
  /** Its socket's path. */
  file: string;
  /** Destroys the connections open (the server keeps listening). */
  closeAll: () => void;
  /** Destroys the connections open and stops listening. */
  stop: () => Promise<void>;
}

/** Listens on a new Unix socket, handing each connection to serve. */
export async function listenUnix(serve: (s: net.Socket) => void): Promise<Listening> {
  const file = path.join(socketDir, `s${nsock++}.sock`);
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    serve(s);
  });
  await new Promise<void>((res) => srv.listen(file, res));
  return {
    file,
    closeAll: () => sockets.forEach((s) => s.destroy()),
    stop: () =>
      new Promise<void>((res) => {
        sockets.forEach((s) => s.destroy());
        srv.close(() => res());
      }),
  };
}
