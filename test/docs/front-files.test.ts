// The front files docs/forward-auth.md ships. The nginx file, as an operator drops it into an http
// block without settings of its own (Debian's nginx.conf has none for this): `nginx -t` passes
// without a warning. And both it and the Caddyfile clear the headers applications read as the
// original URL (X-Original-URL, X-Rewrite-URL).
// A newcomer's finding: its ~90 proxy_set_header lines made every test and reload warn "could not
// build optimal proxy_headers_hash" with nginx's default hash sizes.
import { spawnSync } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { FRONT_TEMPLATES, frontBinary } from '../helpers/front-proxy.js'

describe('docs/forward-auth/nginx.conf', () => {
  it('passes nginx -t in a plain http block, without a warning', async () => {
    const nginx = frontBinary('nginx')
    if (nginx === undefined) return
    const dir = await mkdtemp(join(tmpdir(), 'gw-nginx-t-'))
    try {
      await writeFile(join(dir, 'site.conf'), (await readFile(FRONT_TEMPLATES.nginx, 'utf8')).replaceAll('listen 80', 'listen 127.0.0.1:1'))
      await writeFile(join(dir, 'nginx.conf'), `pid ${dir}/nginx.pid;\nerror_log ${dir}/error.log;\nevents {}\nhttp {\n  access_log off;\n  include ${dir}/site.conf;\n}\n`)
      const run = spawnSync(nginx, ['-t', '-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' })
      expect(run.stderr).toContain('test is successful')
      expect(run.stderr).not.toContain('[warn]')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

// An attacker's hint: X-Rewrite-URL, which legacy Zend Framework and Symfony read as the request's
// URL, reached the application through both files (the gateway drops it on its own routes).
describe('the docs\' forward-auth files clear what applications read as the original URL', () => {
  const names = ['X-Original-URL', 'X-Original-URI', 'X-Rewrite-URL']
  it.each(names)('%s: cleared by nginx.conf and the Caddyfile', async (name) => {
    const nginx = await readFile(FRONT_TEMPLATES.nginx, 'utf8')
    const caddy = await readFile(FRONT_TEMPLATES.caddy, 'utf8')
    expect(nginx.toLowerCase()).toContain(`proxy_set_header ${name.toLowerCase()} "";`)
    expect(caddy.toLowerCase()).toContain(`request_header -${name.toLowerCase()}`)
  })
})
