/**
 * A minimal HTTP/1.1 client for one kind of exchange: POST a small JSON body
 * to one endpoint over kept-alive connections (TCP, TLS or a Unix socket)
 * and read a small answer. node:http costs more per call than the sidecar's
 * decision; this writes each request in one write and parses the answer in
 * place. Answers with Content-Length, chunked, or ended by close are read.
 * @internal
 */
import * as net from "node:net";
import * as tls from "node:tls";

export interface Target {
  host: string;
  port: number | undefined;
  socketPath: string | undefined;
  tls: boolean;
  /** The request path, /v1/evaluate with any prefix. */
  path: string;
}

export interface Answer {
  status: number;
  body: string;
}

type Done = (err: Error | null, answer?: Answer) => void;

const CRLFCRLF = Buffer.from("\r\n\r\n");
/** Idle connections are closed before the sidecar's 60 s idle timeout. */
const IDLE_MS = 50_000;

class Conn {
  readonly socket: net.Socket;
  /** The exchange in flight, if any. */
  done: Done | undefined;
  /** Bytes of the current answer received so far. */
  private buf: Buffer | undefined;
  private received = 0;
  /** Set once the first answer completed: a reused connection may be stale. */
  used = false;
  closed = false;

  constructor(
    private readonly pool: Pool,
    socket: net.Socket,
  ) {
    this.socket = socket;
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (err: NodeJS.ErrnoException) => this.onGone(err));
    socket.on("close", () => this.onGone(undefined));
    socket.on("end", () => this.onEnd());
    socket.on("timeout", () => {
      // Only idle connections have a timeout set.
      if (!this.done) this.destroy();
    });
  }

  send(data: string, done: Done): void {
    this.done = done;
    this.buf = undefined;
    this.received = 0;
    this.socket.setTimeout(0);
    this.socket.ref();
    this.socket.write(data, "utf8");
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.pool.forget(this);
    this.socket.destroy();
  }

  private onEnd(): void {
    // An answer read until close ends here.
    if (this.done && this.buf) {
      const parsed = parseAnswer(this.buf, true);
      if (parsed && !(parsed instanceof Error)) {
        this.finish(null, parsed.answer, false);
        return;
      }
    }
    this.onGone(undefined);
  }

  private onGone(err: NodeJS.ErrnoException | undefined): void {
    const done = this.done;
    const fresh = this.received === 0;
    this.done = undefined;
    this.destroy();
    if (!done) return;
    const e: Error & { code?: string; stale?: boolean } = err ?? Object.assign(new Error("the connection was closed before an answer"), { code: "ECONNRESET" });
    // A kept-alive connection the peer closed while idle fails on reuse
    // before any byte of an answer: the request was not served.
    e.stale = this.used && fresh;
    done(e);
  }

  private onData(chunk: Buffer): void {
    if (!this.done) {
      // Bytes nobody asked for: this connection is out of step.
      this.destroy();
      return;
    }
    this.received += chunk.length;
    if (this.received > this.pool.maxAnswer) {
      this.finish(new Error(`the answer is larger than ${this.pool.maxAnswer} bytes`), undefined, false);
      return;
    }
    this.buf = this.buf === undefined ? chunk : Buffer.concat([this.buf, chunk]);
    const parsed = parseAnswer(this.buf, false);
    if (parsed === undefined) return;
    if (parsed instanceof Error) {
      this.finish(parsed, undefined, false);
      return;
    }
    this.finish(null, parsed.answer, parsed.keepAlive);
  }

  private finish(err: Error | null, answer: Answer | undefined, keepAlive: boolean): void {
    const done = this.done!;
    this.done = undefined;
    this.buf = undefined;
    if (keepAlive && !err) {
      this.used = true;
      this.pool.release(this);
    } else {
      this.destroy();
    }
    done(err, answer);
  }

  /** Back in the pool: it must not keep the process alive. */
  idle(): void {
    this.socket.setTimeout(IDLE_MS);
    this.socket.unref();
  }
}

/**
 * Parses a complete answer in buf: undefined when more bytes are needed, an
 * Error when it is not HTTP/1.x. atEOF: the peer closed, so an answer
 * without a length ends here.
 */
function parseAnswer(buf: Buffer, atEOF: boolean): { answer: Answer; keepAlive: boolean } | Error | undefined {
  let start = 0;
  for (;;) {
    const end = buf.indexOf(CRLFCRLF, start);
    if (end < 0) return atEOF ? new Error("the answer ended inside its headers") : undefined;
    const head = buf.toString("latin1", start, end);
    const bodyStart = end + 4;
    if (!head.startsWith("HTTP/1.")) return new Error("the answer is not HTTP/1.x");
    const status = Number(head.slice(9, 12));
    if (!(status >= 100 && status <= 999)) return new Error("the answer has no status");
    if (status >= 100 && status < 200) {
      // 100 Continue and friends: the real answer follows.
      start = bodyStart;
      continue;
    }
    let length = -1;
    let chunked = false;
    let keepAlive = head.charCodeAt(7) === 0x31; // HTTP/1.1
    let from = head.indexOf("\r\n") + 2;
    while (from > 1 && from < head.length) {
      let to = head.indexOf("\r\n", from);
      if (to < 0) to = head.length;
      const colon = head.indexOf(":", from);
      if (colon > from && colon < to) {
        const name = head.slice(from, colon).trim().toLowerCase();
        if (name === "content-length") {
          length = Number(head.slice(colon + 1, to).trim());
          if (!Number.isInteger(length) || length < 0) return new Error("the answer's Content-Length is not a length");
        } else if (name === "transfer-encoding") {
          chunked = head.slice(colon + 1, to).toLowerCase().includes("chunked");
        } else if (name === "connection") {
          const v = head.slice(colon + 1, to).trim().toLowerCase();
          if (v === "close") keepAlive = false;
          else if (v === "keep-alive") keepAlive = true;
        }
      }
      from = to + 2;
    }
    if (status === 204 || status === 304) return { answer: { status, body: "" }, keepAlive };
    if (chunked) {
      const body = dechunk(buf, bodyStart);
      if (body === undefined) return atEOF ? new Error("the answer ended inside a chunk") : undefined;
      if (body instanceof Error) return body;
      return { answer: { status, body }, keepAlive };
    }
    if (length >= 0) {
      if (buf.length < bodyStart + length) return atEOF ? new Error("the answer is shorter than its Content-Length") : undefined;
      return { answer: { status, body: buf.toString("utf8", bodyStart, bodyStart + length) }, keepAlive };
    }
    // No length: the body runs to the end of the connection.
    if (!atEOF) return undefined;
    return { answer: { status, body: buf.toString("utf8", bodyStart) }, keepAlive: false };
  }
}

function dechunk(buf: Buffer, at: number): string | Error | undefined {
  const parts: Buffer[] = [];
  for (;;) {
    const eol = buf.indexOf("\r\n", at, "latin1");
    if (eol < 0) return undefined;
    const size = parseInt(buf.toString("latin1", at, eol).split(";")[0]!.trim(), 16);
    if (!Number.isInteger(size) || size < 0) return new Error("the answer's chunk size is not a number");
    at = eol + 2;
    if (size === 0) {
      // Trailers, if any, end with an empty line.
      const end = buf.indexOf(CRLFCRLF, at - 2);
      if (end < 0) return undefined;
      return Buffer.concat(parts).toString("utf8");
    }
    if (buf.length < at + size + 2) return undefined;
    parts.push(buf.subarray(at, at + size));
    at += size + 2;
  }
}

/** Kept-alive connections to one target, at most maxSockets at a time. */
export class Pool {
  private readonly idleConns: Conn[] = [];
  private readonly all = new Set<Conn>();
  private readonly waiting: Array<(c: Conn) => void> = [];
  private readonly headPrefix: string;

  constructor(
    readonly target: Target,
    readonly maxSockets: number,
    readonly maxAnswer: number,
  ) {
    const host = target.socketPath ? "sidecar" : target.port ? `${hostHeader(target.host)}:${target.port}` : hostHeader(target.host);
    this.headPrefix = `POST ${target.path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: `;
  }

  /** Connections currently open (for tests). */
  get size(): number {
    return this.all.size;
  }

  /**
   * POSTs body; done is called once, with the answer or why there is none.
   * Returns a function that abandons the exchange (its connection is closed).
   */
  post(body: string, traceparent: string | undefined, done: Done): () => void {
    let data = this.headPrefix + Buffer.byteLength(body, "utf8") + "\r\n";
    if (traceparent) data += `traceparent: ${traceparent.replace(/[\r\n]/g, "")}\r\n`;
    data += "\r\n" + body;
    let conn: Conn | undefined;
    let abandoned = false;
    let retried = false;
    let queued: ((c: Conn) => void) | undefined;
    const start = (c: Conn) => {
      queued = undefined;
      if (abandoned) {
        this.release(c);
        return;
      }
      conn = c;
      c.send(data, (err, answer) => {
        conn = undefined;
        if (abandoned) return;
        if (err && (err as { stale?: boolean }).stale && !retried) {
          retried = true;
          this.acquire(start, true);
          return;
        }
        done(err, answer);
      });
    };
    queued = this.acquire(start, false);
    return () => {
      abandoned = true;
      if (queued) {
        const i = this.waiting.indexOf(queued);
        if (i >= 0) this.waiting.splice(i, 1);
      }
      conn?.destroy();
    };
  }

  /** Calls use with a connection now or when one frees up; returns the queued callback when it waits. */
  private acquire(use: (c: Conn) => void, fresh: boolean): ((c: Conn) => void) | undefined {
    if (!fresh) {
      const c = this.idleConns.pop();
      if (c) {
        use(c);
        return undefined;
      }
    }
    if (this.all.size < this.maxSockets || fresh) {
      use(this.open());
      return undefined;
    }
    this.waiting.push(use);
    return use;
  }

  private open(): Conn {
    const t = this.target;
    let socket: net.Socket;
    if (t.socketPath) socket = net.connect({ path: t.socketPath });
    else if (t.tls) socket = tls.connect({ host: t.host, port: t.port ?? 443, servername: net.isIP(t.host) ? undefined : t.host, ALPNProtocols: ["http/1.1"] });
    else socket = net.connect({ host: t.host, port: t.port ?? 80, noDelay: true });
    if (!t.socketPath) socket.setNoDelay(true);
    const c = new Conn(this, socket);
    this.all.add(c);
    return c;
  }

  release(c: Conn): void {
    if (c.closed) return;
    const next = this.waiting.shift();
    if (next) {
      next(c);
      return;
    }
    c.idle();
    this.idleConns.push(c);
  }

  forget(c: Conn): void {
    this.all.delete(c);
    const i = this.idleConns.indexOf(c);
    if (i >= 0) this.idleConns.splice(i, 1);
    // A waiter can have the freed slot.
    const next = this.waiting.shift();
    if (next) next(this.open());
  }

  /** Closes every connection; the pool still works after it. */
  destroy(): void {
    for (const c of [...this.all]) c.destroy();
  }
}

function hostHeader(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}
