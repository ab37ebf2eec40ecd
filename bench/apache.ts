// Apache httpd + mod_auth_openidc as a comparison target, when both are installed (Debian:
// apt-get install -y apache2 libapache2-mod-auth-openidc): the tool operators already run for this
// job, set up like the gateway (Redis-backed sessions, the access token injected as a bearer
// header, proxying to the same upstream) and loaded in the same run.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomToken } from '../src/session/seal.js'
import { started, which, type Target } from './targets.js'

const MODULES = '/usr/lib/apache2/modules'

/** The httpd binary when Apache and mod_auth_openidc are both installed. */
export function apacheBinary (): string | undefined {
  const httpd = which('apache2') ?? (existsSync('/usr/sbin/apache2') ? '/usr/sbin/apache2' : undefined)
  return httpd && existsSync(join(MODULES, 'mod_auth_openidc.so')) ? httpd : undefined
}

export interface ApacheOptions {
  port: number
  upstream: string
  issuer: string
  clientId: string
  clientSecret: string
  redisUrl: string
}

export const APACHE_SESSION_COOKIE = 'mod_auth_openidc_session'

/** The redirect URI the provider must accept for this Apache. */
export const apacheRedirectUri = (port: number) => `http://127.0.0.1:${port}/app/redirect_uri`

export async function startApache (httpd: string, options: ApacheOptions): Promise<Target> {
  const dir = await mkdtemp(join(tmpdir(), 'gw-bench-apache-'))
  const redis = new URL(options.redisUrl)
  const modules = ['mpm_event', 'authz_core', 'authz_user', 'authn_core', 'headers', 'proxy', 'proxy_http', 'auth_openidc']
  await writeFile(join(dir, 'httpd.conf'), `${modules.map((m) => `LoadModule ${m}_module ${MODULES}/mod_${m}.so`).join('\n')}
ServerName 127.0.0.1
Listen 127.0.0.1:${options.port}
PidFile ${dir}/httpd.pid
ErrorLog ${dir}/error.log
LogLevel warn
User nobody
Group nogroup
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 60

OIDCProviderMetadataURL ${options.issuer}/.well-known/openid-configuration
OIDCClientID ${options.clientId}
OIDCClientSecret ${options.clientSecret}
OIDCRedirectURI ${apacheRedirectUri(options.port)}
OIDCCryptoPassphrase ${randomToken()}
OIDCScope "openid profile email"
OIDCPKCEMethod S256
OIDCCacheType redis
OIDCRedisCacheServer ${redis.hostname}:${redis.port}
OIDCSessionType server-cache

# The bench signs in with Node's fetch, which always says Sec-Fetch-Mode: cors; mod_auth_openidc
# would take that for an XHR and answer 401 instead of starting the sign-in a browser gets.
RequestHeader unset Sec-Fetch-Mode early

<Location /app/>
  AuthType openid-connect
  Require valid-user
  RequestHeader set Authorization "Bearer %{OIDC_access_token}e" env=OIDC_access_token
  ProxyPass ${options.upstream}/app/
</Location>
`)
  const child = spawn(httpd, ['-f', join(dir, 'httpd.conf'), '-D', 'FOREGROUND'], { stdio: 'ignore' })
  return await started('Apache + mod_auth_openidc', child, `http://127.0.0.1:${options.port}`, '/')
}
