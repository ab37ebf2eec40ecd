// An upstream with forms, for the tests of forms that survive a sign-in (routes[].preserveBody):
// GET `<prefix>form` serves a urlencoded form that posts to `<prefix>form?draft=1`, GET
// `<prefix>upload` a multipart one with a file field; every POST is recorded with its exact bytes
// and answered with a page saying how many POSTs arrived; GET `<prefix>hold` is answered only on
// `release()` (it holds its connection meanwhile). Also a raw form POST over node:http,
// which (unlike fetch) sends no Sec-Fetch-Mode of its own, as a browser's form submission does not
// send `cors`.
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http'
import { close, listen } from './net.js'

export interface PostSeen {
  url: string
  contentType: string | undefined
  body: Buffer
  cookie: string | undefined
  origin: string | undefined
  referer: string | undefined
}

export interface FormUpstream {
  url: string
  posts: PostSeen[]
  /** How many GET `hold` requests wait for `release()`. */
  holding (): number
  /** Answers the GET `hold` requests waiting so far. */
  release (): void
  close (): Promise<void>
}

const FORM = `<!doctype html><html><body><h1>Comment</h1>
<form method="post" action="form?draft=1"><input name="title"><textarea name="comment"></textarea><button type="submit">Send</button></form>
</body></html>`

const UPLOAD = `<!doctype html><html><body><h1>Upload</h1>
<form method="post" action="upload" enctype="multipart/form-data"><input name="title"><input type="file" name="file"><button type="submit">Upload</button></form>
</body></html>`

export async function startFormUpstream (): Promise<FormUpstream> {
  const posts: PostSeen[] = []
  const held: Array<() => void> = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      res.setHeader('content-type', 'text/html; charset=utf-8')
      if (req.method === 'GET' && req.url?.endsWith('/hold') === true) {
        held.push(() => res.end('held'))
        return
      }
      if (req.method === 'GET') {
        res.end(req.url?.includes('upload') === true ? UPLOAD : FORM)
        return
      }
      posts.push({ url: req.url ?? '', contentType: req.headers['content-type'], body: Buffer.concat(chunks), cookie: req.headers.cookie, origin: req.headers.origin, referer: req.headers.referer })
      res.end(`<!doctype html><html><body><h1>Received</h1><p id="count">${posts.length}</p></body></html>`)
    })
  })
  const url = await listen(server)
  return {
    url,
    posts,
    holding: () => held.length,
    release: () => { for (const answer of held.splice(0)) answer() },
    close: async () => {
      for (const answer of held.splice(0)) answer()
      await close(server)
    },
  }
}

export interface Answer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** One request over node:http (no Sec-Fetch-Mode unless given; Accept text/html unless given). */
/** `chunks`: the body sent chunked (no Content-Length), each piece a chunk of its own, instead of `body`. */
export async function send (url: string, options: { method?: string, headers?: Record<string, string>, body?: Buffer | string, chunks?: readonly string[] } = {}): Promise<Answer> {
  return await new Promise((resolve, reject) => {
    const headers = { accept: 'text/html,application/xhtml+xml', ...options.headers }
    const body = options.body === undefined ? undefined : Buffer.from(options.body)
    const outgoing = httpRequest(url, { method: options.method ?? 'POST', headers: body === undefined ? headers : { 'content-length': String(body.length), ...headers } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    outgoing.on('error', reject)
    for (const chunk of options.chunks ?? []) outgoing.write(chunk)
    outgoing.end(body)
  })
}
