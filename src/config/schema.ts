// gateway.yaml's schema: the one source of the raw config's TypeScript types (`GatewayYaml`), of
// the validation that `--check` and start-up run (ajv, see schema-check.ts), of the published
// gateway.schema.json and of the reference table in docs/configuration.md (see scripts/publish-config.ts).
// Types, enums, ranges, required keys and unknown keys are said here; rules that need two keys or a
// parsed URL stay as code in validate.ts.
//
// Two annotations of our own, besides the standard `description`, `default` and `examples`:
// `expected` is the phrase a problem uses ("must be <expected>, got ..."), `defaultText` says a
// default that depends on other keys (docs only).
/* eslint-disable no-template-curly-in-string -- examples show ${VAR} references as written in gateway.yaml */
import Type, { type Static, type TArray, type TObject, type TOptional, type TProperties, type TRecord, type TSchema } from 'typebox'
import { PRESET_NAMES } from './preset-names.js'
import { type Defaulted, DURATION_EXPECTED, DURATION_PATTERN, FILLED_HEADER, Duration, Flag, Matching, PUBLIC_RULE, SIZE_PATTERN, Section, Size, Strings, Text, filled } from './schema-nodes.js'

const Server = Section({
  host: filled(Text('Listen address (the shipped gateway.yaml uses 127.0.0.1; 0.0.0.0 listens on every interface).', { default: '0.0.0.0', minLength: 1 })),
  port: filled(Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, default: 8080, description: 'Listen port.' }))),
  baseUrl: Text('The address browsers use. `redirect_uri` is `{baseUrl}/oauth/authorized/<provider>/`; an origin, written as such (lower case, no default port, an IDN host in its ASCII form): no path (the gateway serves at the root of its host: give it a host name of its own), query, fragment or user name.', {
    defaultText: 'http://localhost:<port>', examples: ['https://gateway.example.com'],
  }),
  trustProxy: filled(Type.Optional(Type.Union([
    Type.Boolean(),
    Type.String(),
    Type.Array(Type.String({ expected: 'an IP address or CIDR range such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal)' })),
  ], {
    default: false,
    description: 'Which peers may set X-Forwarded-* (client address, rate-limit key, forward-auth): `false`, `true` (only with a loopback `server.host`: every peer is a proxy on this machine, and only the peer is trusted: the client is the address it appended), or the addresses and CIDR ranges of the proxies in front (a list, or a comma-separated string from a variable; no range wider than /8 for IPv4 or /7 for IPv6); `loopback`, `linklocal`, `uniquelocal` name those groups.',
    expected: 'true, false or a list of addresses and CIDR ranges such as ["127.0.0.1", "10.0.0.0/8"]',
    examples: [['10.0.0.0/8']],
  }))),
  shutdownTimeout: Duration('How long a shutdown waits for in-flight requests (at most 5m).', '10s'),
  workers: filled(Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 64 }), Type.Literal('auto')], {
    default: 1,
    description: 'Worker processes sharing the port (node:cluster), or `auto` for one per core. More than 1 needs `store.type: redis`.',
    expected: 'an integer from 1 to 64 or auto',
  }))),
}, 'Where the gateway listens and how it is reached.')

const Session = Section({
  cookieName: filled(Text('The session cookie; the sign-in flow cookie is `<cookieName>_flow`. On https, `__Host-gw` gives every gateway cookie Path=/, Secure and no Domain.', {
    default: 'gw_session', pattern: "^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$", expected: 'a cookie name (letters, digits, - and _)',
  })),
  secret: Text('At least 32 random characters (`openssl rand -base64 32`); a guessable one is refused. Signs the state and keys the encryption of stored sessions. Absent: a random one per process, with a warning (sessions then die with the process and cannot be shared).', {
    defaultText: 'random per process (warned)', examples: ['${GATEWAY_SESSION_SECRET}'],
  }),
  ttl: Duration('Idle session lifetime: each request renews it (1m to 30d).', '8h'),
  maxAge: Duration('Absolute session lifetime from the sign-in, however active the session is (5m to 400d); a refresh never extends it. A `ttl` longer than `maxAge` changes nothing. Past it, browsers sign in again and API clients get 401.', '7d'),
  previousSecrets: filled(Strings('Earlier values of `secret` that still open what they sealed (sessions, sign-ins in flight, sign-out cookies) while everything new is sealed with `secret`: a rolling change of the secret signs nobody out (operations.md, "Rotating the session secret"). At most 4; each follows the rules for `secret`. Drop it when `gateway_sessions_previous_secret` is 0 on every instance (each up for `ttl` since it stopped being `secret`), or `maxAge` after, to sign nobody out.', { default: [], examples: [['${GATEWAY_PREVIOUS_SECRET}']], maxItems: 4, expected: 'a list of at most 4 secrets' })),
  cookieSecure: filled(Type.Optional(Type.Union([Type.Boolean(), Type.Literal('auto')], {
    default: 'auto', description: '`auto` sets Secure when `server.baseUrl` is https; `false` with an https baseUrl is refused.', expected: 'auto, true or false',
  }))),
  cacheTtl: Duration('How long an instance serves a session it has read from memory before reading the store again (0 turns the cache off; at most 10s). Sign-out and refresh drop it on every instance at once.', '1s'),
  cookieDomain: Text('Share the sign-in across hosts of one parent domain (forward-auth): the session cookie gets this Domain. Not with a `__Host-` cookie name; see forward-auth.md.', { examples: ['.example.com'] }),
}, 'The session cookie and the secret that protects what the gateway keeps.')

const Store = Section({
  type: filled(Type.Optional(Type.Union([Type.Literal('redis'), Type.Literal('memory')], {
    default: 'memory', description: '`memory` (one instance only, warned at start) or `redis` (shared by every instance).',
  }))),
  url: Text('One Redis: `redis://` or `rediss://`. Give only one of `url`, `cluster` and `sentinel`.', {
    defaultText: 'redis://127.0.0.1:6379/0 (type redis)', examples: ['rediss://redis.internal:6380/0'],
  }),
  cluster: Strings('Redis Cluster seed nodes, a list of `redis://host:port`.', { minItems: 1, expected: 'a non-empty list of redis:// URLs', examples: [['redis://10.0.0.1:7000', 'redis://10.0.0.2:7000']] }),
  sentinel: Type.Optional(Type.Object({
    name: Type.String({ minLength: 1, description: 'The monitored master\'s name.' }),
    // The phrase sits on the item too: a node that fails the pattern is an item's problem, and an
    // item without one would be said to need "a string" (it is one).
    nodes: Type.Array(Type.String({ pattern: '^[^\\s:@/]+:\\d+$', expected: '"host:port" (a password goes in sentinelPassword, not here)' }), {
      minItems: 1, description: 'Sentinels as `host:port`.', expected: 'a non-empty list of "host:port" strings',
    }),
    username: Text('The ACL user of the Redis nodes (master and replicas); needs `password`.', { minLength: 1 }),
    password: Text('The Redis nodes\' password (their `requirepass`, or `username`\'s ACL password).', { minLength: 1, examples: ['${REDIS_PASSWORD}'] }),
    sentinelUsername: Text('The sentinels\' ACL user; needs `sentinelPassword`.', { minLength: 1 }),
    sentinelPassword: Text('The sentinels\' own password, when they require one (their `requirepass` or ACL user); `password` is never sent to them.', { minLength: 1, examples: ['${SENTINEL_PASSWORD}'] }),
    tls: Flag('TLS to the sentinels and to the Redis nodes they name, verified like `rediss://`: against the system CAs and `NODE_EXTRA_CA_CERTS`.', false),
  }, {
    additionalProperties: false,
    description: 'Redis Sentinel. The gateway leaves a master as soon as the sentinels announce its replacement (`+switch-master`), even one that is frozen rather than dead.',
    examples: [{ name: 'mymaster', nodes: ['10.0.0.1:26379'], password: '${REDIS_PASSWORD}', tls: true }],
  })),
  keyPrefix: filled(Text('Prefix of every key the gateway writes. A brace in it only as a Redis Cluster hash tag (`{gw}:`, every key in one slot): the gateway sets hash tags of its own (an ending\'s mark must share its key\'s slot), which a stray `{` or `}`, or an empty tag, would move to another slot.', {
    default: 'gw:', pattern: '^(?:[^{}]*|[^{]*\\{[^}]+\\}[\\s\\S]*)$', expected: 'a prefix without { or }, or whose first { opens a Redis Cluster hash tag ({gw}:)',
  })),
  timeout: Duration('How long one store command may take (50ms to 30s; connecting may take twice as long); then the request answers 503 `session_store_unavailable`. Raise it for a Redis far away.', '500ms'),
  waitForReplica: Type.Optional(Type.Union([Type.Boolean(), Type.Integer({ minimum: 1, maximum: 16 })], {
    description: 'A new session (and a token refresh, and an ended one: sign-out, sign out everywhere, revoke, back-channel logout) counts as written only once a replica has acknowledged it (`WAIT 1 <timeout>`), else 503 `session_store_unavailable` and no cookie: a master cut off from its replicas cannot take a sign-in with it when it is demoted, nor a sign-out. A number waits for that many replicas: with two or more, set it to all of them to hold through a planned failover and a partition that leaves the master one replica, at the cost that one replica down refuses every sign-in. With `url`, only for a master that has replicas (with none, every sign-in is a 503). See operations.md.',
    defaultText: 'true (one replica) with `sentinel` or `cluster`, false with `url`',
  })),
  readiness: filled(Type.Optional(Type.Union([Type.Literal('required'), Type.Literal('ignored')], {
    default: 'required', description: '`required`: /readyz answers 503 when no part of the store answers; `ignored`: always 200, with the store\'s state in the body (see operations.md).',
  }))),
}, 'The session store.')

const State = Section({
  ttl: Duration('Lifetime of the signed `state` and of the sign-in flow it belongs to (10s to 1h).', '5m'),
}, 'The sign-in flow.')

const Claims = Type.Object({
  user: filled(Text('The user name (X-Forwarded-User, `sub` of the assertion).', { default: 'sub', minLength: 1 })),
  email: filled(Text('The e-mail address.', { default: 'email', minLength: 1 })),
  name: filled(Text('The display name.', { default: 'name', minLength: 1 })),
  groups: filled(Text('The groups (a list or one string).', { default: 'groups', minLength: 1 })),
}, {
  additionalProperties: false,
  default: {},
  description: 'Where each identity field is found in the ID token claims and the userinfo JSON: dotted paths (`contact.email`; `teams.slug` maps over a list) or JSON pointers (`/profile/display name`). A preset sets the provider\'s usual ones.',
})

const Provider = Type.Object({
  clientId: Type.Optional(Type.String({ minLength: 1, description: '`client_id` registered at the provider. Without `clientId` and `clientSecret` the provider is a token-only issuer (CI systems, workloads): only `issuer` is needed, and it can be named only in a route\'s `bearer.issuers` (see machine-clients.md).', examples: ['${GITHUB_CLIENT_ID}'] })),
  clientSecret: Type.Optional(Type.String({ minLength: 1, description: '`client_secret`; sent only to the provider\'s token endpoint (and its revocation endpoint at sign-out), in the form body. Required with `clientId`.', examples: ['${GITHUB_CLIENT_SECRET}'] })),
  preset: Type.Optional(Type.Union(PRESET_NAMES.map((name) => Type.Literal(name)), {
    description: 'Fill the endpoints, scope and claims of a well-known provider (recipes in docs/providers.md); keys given here win.',
  })),
  tenant: Text('`preset: microsoft`: the directory (tenant) ID or domain; the issuer is `https://login.microsoftonline.com/<tenant>/v2.0`.', { minLength: 1 }),
  baseUrl: Text('`preset: keycloak`, `gitlab` or `github`: the server of a self-hosted Keycloak, GitLab or GitHub Enterprise.', { examples: ['https://keycloak.example.com'] }),
  realm: Text('`preset: keycloak`: the realm (with `baseUrl`); the issuer is `<baseUrl>/realms/<realm>`.', { minLength: 1 }),
  issuer: Text('OIDC issuer: `<issuer>/.well-known/openid-configuration` is read at start for the endpoints and keys; callbacks\' and ID tokens\' `iss` must match it. Required when the scope has `openid`, and for a token-only issuer.', {
    examples: ['https://accounts.google.com'],
  }),
  authorizeUrl: Text('The provider\'s authorization endpoint. Required without `issuer` or a preset; wins over discovery.', { defaultText: 'from discovery or the preset' }),
  tokenUrl: Text('The provider\'s token endpoint. Required without `issuer` or a preset; wins over discovery.', { defaultText: 'from discovery or the preset' }),
  userinfoUrl: Text('Identity for plain OAuth 2.0 providers, called once at sign-in with the access token.', { defaultText: 'from discovery or the preset', examples: ['https://api.github.com/user'] }),
  scope: Text('`scope` of the authorize request; with `openid` an ID token is required and validated. Required without a preset; refused on a token-only issuer.', { defaultText: 'the preset\'s', examples: ['openid profile email'] }),
  pkce: Flag('PKCE with S256.', true),
  claims: filled(Type.Optional(Claims)),
  timeout: Duration('How long any one call to the provider may take, name lookup and connect included: discovery, its keys (JWKS), token, userinfo, revocation (100ms to 2m). Then 502 `token_exchange_failed` (`provider_unavailable` while discovery has not succeeded).', '10s'),
  endSession: Flag('Sign-out reaches the provider too: its tokens are revoked where discovery advertises `revocation_endpoint`, and the browser signs out there where it advertises `end_session_endpoint` (register `{baseUrl}/oauth/logout/<provider>/` as its post-logout redirect URI). `false`: sign-out ends the gateway\'s session only (see endpoints.md).', true),
  dangerouslyAllowInsecureHttp: Flag('Allow this provider\'s endpoints over plain http to a host that is not loopback (otherwise the config is refused).', false),
}, { additionalProperties: false, description: 'One provider (its name is the `<provider>` in /oauth/login/<provider>/): a client registered there, or, with only `issuer`, a token-only issuer whose tokens machine clients bring.' })

/** A condition's values: a non-empty list (an empty one would match nobody, or read as "not given"). */
function Values (description: string, item = Type.String({ minLength: 1 })) {
  return Type.Optional(Type.Array(item, { description, expected: 'a non-empty list of strings', minItems: 1 }))
}

const Rule = Type.Object({
  users: Values('People by the provider\'s subject (`sub`; GitHub: the numeric `id`): exactly in `allow`, in any letter case in `deny`; a user name matches in `allow` only when it is the person\'s verified e-mail address, in `deny` always.'),
  emails: Values('E-mail addresses; an address the provider has not verified matches no `allow` rule, and does match a `deny` rule.',
    Matching('^\\s*[^\\s@*]+@[^\\s@*]+\\s*$', 'one e-mail address such as alice@example.com (no wildcard: use domains)')),
  domains: Values('E-mail domains (the whole domain of the address); unverified addresses as for `emails`.',
    Matching('^\\s*@?[^\\s@*/:.]+(?:\\.[^\\s@*/:.]+)*\\s*$', 'a domain such as example.com (the whole domain of an address; no wildcard, scheme or path)')),
  groups: Values('Groups: exactly in `allow`; in `deny`, in any letter case, compatibility form (fullwidth) or with invisible characters, and each word of groups sent as one string.'),
  claims: Type.Optional(Type.Record(Type.String(), Type.Array(Type.Union([Type.String({ minLength: 1 }), Type.Number(), Type.Boolean()]), { minItems: 1 }), {
    description: 'Claim path (dotted, such as `realm_access.roles`, or a JSON pointer) to the accepted values; an array claim matches when any element does. Numbers and booleans compare as written (`1.10` is `1.10`); exactly in `allow`, in any letter case in `deny`.',
    expected: 'a mapping of claim path to a non-empty list of values, such as { realm_access.roles: [reporter] }',
    examples: [{ 'realm_access.roles': ['reporter'] }],
  })),
  methods: Values('Request methods (`GET`, `POST`, ...; any case). In `allow`, GET does not cover HEAD; in `deny` it does, and PUT and PATCH cover each other (routers send both to one update).',
    Matching('^\\s*[A-Za-z]+\\s*$', 'a request method such as GET or POST')),
  paths: Values('Globs on the canonical request path (`/app/admin/*`; `*` matches any characters, `/` included); the query is not part of it.'),
  providers: Values('Providers by their names under `providers:` (not their issuer URLs): the one the person signed in at (a machine client: its token\'s issuer; at forward-auth: the one `/oauth/auth/<provider>/` names). On a route, each must be one of its providers or bearer issuers.'),
  networks: Values('Client addresses: IPv4 and IPv6 CIDR ranges and single addresses (`10.0.0.0/8`, `"2001:db8::/32"`, `192.0.2.7`); after `!`, a network the address must be outside of (`"!10.8.0.0/16"`). Matched on the address as the gateway resolved it (`server.trustProxy` decides whether X-Forwarded-For counts). Alone in a rule it still needs a signed-in person or token.'),
}, { additionalProperties: false, description: 'One rule: it holds when every condition it gives holds (a list inside a condition matches any of its values).' })

/** `allow` or `deny`: a list of rules, or one rule object. */
function RuleList (description: string) {
  return Type.Optional(Type.Union([Rule, Type.Array(Rule)], { description, expected: 'a rule such as { groups: [admins] } or a list of rules' }))
}

const IdentityHeaders = Type.Object({
  user: filled(Text('Header with the user name.', { default: 'X-Forwarded-User', ...FILLED_HEADER })),
  email: filled(Text('Header with the e-mail address.', { default: 'X-Forwarded-Email', ...FILLED_HEADER })),
  groups: filled(Text('Header with the groups, comma-joined (each group\'s `%`, `,`, `;`, `"` and white space at its ends percent-encoded).', { default: 'X-Forwarded-Groups', ...FILLED_HEADER })),
}, { additionalProperties: false, default: {}, description: 'Names of the identity headers sent upstream.' })

/** Machine clients with their own access tokens (`bearer:` on a route or a forward-auth host). */
const Bearer = Type.Object({
  audience: Type.String({ minLength: 1, description: 'What the token\'s `aud` must contain: the API\'s identifier at the provider (`api://orders`; at Entra ID, the API\'s application (client) ID; for MCP clients, the route\'s `{baseUrl}<path>`).', examples: ['api://orders'] }),
  issuers: Strings('Providers (by name) whose tokens are accepted; each needs an `issuer` (its keys and introspection endpoint come from discovery).', { defaultText: 'the route\'s provider; on a forward-auth host, the provider the forward-auth URL names (`/oauth/auth/<provider>/`)', minItems: 1, expected: 'a non-empty list of provider names' }),
  scopes: filled(Strings('Scopes the token must all carry, one scope per entry (found in its `scope` or `scp` claim); one missing is 403 `insufficient_scope`.', { default: [] })),
  header: filled(Type.Optional(Type.Union([Type.Literal('authorization'), Type.Literal('proxy-authorization')], {
    default: 'authorization',
    description: 'Where callers put the token: `authorization`, or `proxy-authorization` so that the application keeps its own Authorization header (routes only: on a forward-auth host the proxy in front sets the application\'s Authorization). A token in the other header is not read: the request counts as one without a token.',
  }))),
  claimsFrom: filled(Type.Optional(Type.Union([Type.Literal('token'), Type.Literal('userinfo'), Type.Literal('introspection')], {
    default: 'token',
    description: 'Where rules read the person claims (e-mail, groups, `claims`) a token does not carry: `token` (a rule on a claim the token lacks cannot be told: `deny` refuses, `allow` does not admit), `userinfo` (the issuer\'s userinfo endpoint, called with the token), or `introspection` (the issuer\'s RFC 7662 answer); the answer is reused until the token expires (see machine-clients.md).',
  }))),
  introspect: filled(Type.Optional(Type.Union([Type.Boolean(), Type.String({ minLength: 1 })], {
    default: false,
    expected: 'true, false or the name of one of `issuers`',
    description: 'Also accept tokens that are not JWTs: each is checked at an issuer\'s RFC 7662 introspection endpoint with this gateway\'s `clientId` and `clientSecret` (a positive answer is reused at most 60 s). `true`: at each of `issuers` in turn until one calls it active (an opaque token names no issuer, so each sees those of the issuers after it); the name of one of `issuers`: at that one only, the others\' tokens being JWTs. `false`: such tokens are refused.',
    examples: ['corp'],
  }))),
}, { additionalProperties: false, description: 'Machine clients (CI jobs, CLIs, services, MCP clients) that bring their own access token: a request with one is judged by the token instead of a session, never redirected to sign in, and the token goes upstream unchanged (see machine-clients.md).' })

const Route = Type.Object({
  // Not under the gateway's own endpoints (/oauth/..., /healthz, /readyz, /metrics), in any trailing-slash spelling.
  path: Matching('^(?!/(?:oauth|healthz|readyz|metrics)(?:/|$))/[^*?#:\\s]*$', 'a path prefix such as /app/, outside the gateway\'s own /oauth/, /healthz, /readyz and /metrics', { description: 'Path prefix: `/app/` matches `/app` and `/app/...`, not `/application`. Written as the router matches it, decoded (`/café/`, not `/caf%C3%A9/`).', examples: ['/app/'] }),
  upstream: Type.String({ description: 'The application behind this route: an origin such as `http://127.0.0.1:9100`.', examples: ['http://127.0.0.1:9100'] }),
  provider: Text('Whose access token is injected; required when `auth: required`, unless `providers` is given.'),
  providers: Strings('Several providers for one route, in place of `provider` (at least two, none of them token-only issuers; not with `reauth` or `agents`): a browser without a session meets a chooser page (one button each), a session at any of them passes, and that provider\'s token is injected (endpoints.md, "Several providers on one route").', { minItems: 2, uniqueItems: true, expected: 'a list of at least two provider names', examples: [['corp', 'github']] }),
  rewritePrefix: Text('Replaces `path` in the upstream request (`/app/x` with `rewritePrefix: /` becomes `/x`); the query goes as sent, and a `Location` the upstream answers under it comes back under `path` (upstreams.md). Written as the gateway spells paths (non-ASCII as `%XX`, no `%7E` for `~`, no `;` or `\\`).', { defaultText: 'the path is forwarded unchanged', pattern: '^/', expected: 'a path that starts with /' }),
  timeout: Duration('Upstream answer timeout, waiting for a connection included (100ms to 1d); then 504 `gateway_timeout`.', '30s'),
  maxConnections: filled(Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, default: 128, description: 'Connections to the upstream per process; requests beyond wait for one (see upstreams.md).' }))),
  auth: filled(Type.Optional(Type.Union([Type.Literal('required'), Type.Literal('none')], { default: 'required', description: '`required`, or `none` for a public route (still proxied, no token).' }))),
  websocket: Flag('Also proxy WebSocket upgrades, through the same gate, with the bearer in the upstream handshake.', false),
  allow: RuleList('Who may pass: one of these rules must hold, otherwise 403 `forbidden` and the upstream is not called; absent: any signed-in person (see endpoints.md, "Rules").'),
  deny: RuleList('Who may not pass, even when an `allow` rule holds: `deny` wins.'),
  headers: Type.Optional(Type.Record(Type.String(), Type.String({ minLength: 1 }), {
    description: 'Upstream request headers filled from the session\'s claims: `X-Roles: claims.realm_access.roles` (arrays comma-joined; in each element `%`, `,`, `;`, `"` and white space at its ends percent-encoded). The same names sent by clients are dropped on every route.',
    expected: 'a mapping of header name to claims.<path>',
    propertyNames: FILLED_HEADER,
    examples: [{ 'X-Roles': 'claims.realm_access.roles', 'X-Tenant': 'claims.tid' }],
  })),
  public: filled(Type.Optional(Type.Array(Matching(PUBLIC_RULE, '"METHOD /path/glob" such as "GET /app/static/*" or "OPTIONS *"'), {
    description: '`"METHOD /path/glob"` rules that pass without a session (`*` matches anything; METHOD may be `*`).', expected: 'a list of strings', default: [], examples: [['OPTIONS *', 'GET /app/static/*']],
  }))),
  identityHeaders: filled(Type.Optional(IdentityHeaders)),
  websocketMaxMessage: Size('WebSocket routes: the largest message either way, a size (`64KiB`, `1MiB`) or a number of bytes, 1KiB to 1GiB; a larger one closes both sockets with 1009 (message too big). Each message is held whole in memory while it passes.', '1MiB'),
  methodOverrideMaxBody: Size('Routes whose rules name `methods` (or whose `deny` rules name paths): the largest form (urlencoded, multipart, JSON or untyped POST) body read to find a `_method` field (or a front controller\'s `r`), a size (`1MiB`, `50MiB`) or a number of bytes, 1KiB to 1GiB; a larger one is refused with 413 `payload_too_large`. The body is held whole in memory while it is read (see endpoints.md, "Rules").', '1MiB'),
  allowedOrigins: filled(Strings('WebSocket routes: origins besides the gateway\'s own whose pages may open websockets.', { default: [], examples: [['https://app.example.com']] })),
  assertion: Flag('Send the signed identity assertion to this upstream (needs `auth: required`; see assertion.md).', false),
  bearer: Type.Optional(Bearer),
  agents: Flag('MCP clients and CLIs get tokens for this route from the gateway itself, its OAuth authorization server (needs `auth: required`; see agents.md).', false),
  reauth: Type.Optional(Type.Object({
    maxAge: Type.Unsafe<string | number>({ type: ['string', 'number'], pattern: DURATION_PATTERN, minimum: 0, description: 'How old the sign-in at the provider may be (1m to 30d; the provider\'s `auth_time` is allowed 60 s of clock skew); an older one signs in again with `max_age`.', expected: DURATION_EXPECTED, examples: ['15m'] }),
    // Sent space-separated in acr_values and quoted in a WWW-Authenticate challenge.
    acr: Type.Optional(Type.Array(Matching('^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$', 'printable ASCII without spaces, quotes or backslashes'), {
      description: 'Authentication context classes (`acr`) of which the sign-in must have one; requested with `acr_values`.', expected: 'a list of strings', examples: [['urn:mace:incommon:iap:silver']],
    })),
  }, { additionalProperties: false, description: 'Step-up: this route needs a recent sign-in (and one of the `acr` values); other routes keep using the session (see endpoints.md, "Step-up").' })),
  preserveBody: Type.Optional(Type.Union([Type.Unsafe<string | number>({ type: ['string', 'integer'], pattern: SIZE_PATTERN, minimum: 0 }), Type.Literal(false)], {
    description: 'A browser form POST (urlencoded or multipart, at most this size, 1KiB to 10MiB) that meets a missing or expired session is kept, sealed, through the sign-in and then delivered to the upstream once. `false` or absent: off.',
    defaultText: 'false (off)',
    expected: 'a size such as 64KiB, or false',
    examples: ['64KiB'],
  })),
}, { additionalProperties: false, description: 'One proxied path prefix.' })

/** `600/min`, `10/s`, `5000/h` (1 to 7 digits, at least 1), or `off`. */
export const RATE_PATTERN = '^\\s*(?:0*[1-9]\\d{0,6}\\s*/\\s*(?:s|sec|second|min|minute|h|hour)|off)\\s*$'

const RateLimit = Section({
  // `off` and `false` both turn it off: YAML 1.1 habits write `off`, and some tools write `false`.
  login: filled(Type.Optional(Type.Union([Type.String({ pattern: RATE_PATTERN }), Type.Literal('off'), Type.Literal(false)], {
    default: '600/min',
    description: 'Sign-in requests (/oauth/login/, /oauth/authorized/, and "Use another account": /oauth/logout/ with `switch`) per client address, shared by instances on one Redis: `N/s`, `N/min` or `N/h`; `off` (or `false`): no limit.',
    expected: 'a rate such as 600/min, 10/s or 5000/h (at least 1), or off',
  }))),
}, 'Per client address request budgets (429 `rate_limited`).')

const Metrics = Section({
  listen: Text('`host:port` to serve /metrics on instead of the public port (which then answers 404).', { examples: ['127.0.0.1:9090'] }),
}, 'Prometheus metrics.')

const Tracing = Section({
  otlp: Text('The OTLP/HTTP endpoint spans are sent to (spans go to `<otlp>/v1/traces`); absent: the standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, and with neither, tracing is off.', {
    examples: ['http://otel-collector:4318'],
  }),
  serviceName: filled(Text('`service.name` of the spans (`OTEL_SERVICE_NAME` wins when set).', { default: 'oauth-gateway', minLength: 1 })),
  sampleRatio: filled(Type.Optional(Type.Number({
    minimum: 0, maximum: 1, default: 1, description: 'Share of traces begun here that are recorded (0 to 1); a request that arrives with a sampled `traceparent` follows its caller\'s decision.',
  }))),
}, 'OpenTelemetry traces (off unless an OTLP endpoint is given); see operations.md.')

const Assertion = Section({
  header: filled(Text('The request header that carries the assertion.', { default: 'X-Gateway-Assertion', ...FILLED_HEADER })),
  ttl: Duration('Lifetime of one assertion (5s to 10m).', '60s'),
  rotateEvery: Duration('How often the shared signing key is replaced (1h to 90d); the previous key stays published one more period.', '24h'),
}, 'The signed identity assertion (ES256 JWT) sent to routes with `assertion: true`; keys at /.well-known/jwks.json.')

/** A host as in a URL: a name, or an IP address (IPv6 in brackets); no scheme, port or path. */
const HOST = Type.String({ pattern: '^(?:[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*|\\[[0-9A-Fa-f:.]+\\])$', expected: 'a host name or IP address, without scheme, port or path (such as agents.corp.internal, or [fd00::1])' })

const Agents = Section({
  accessTokenTtl: Duration('Lifetime of the access tokens the gateway issues to agents and CLIs (1m to 1h).', '10m'),
  refreshTokenTtl: Duration('Lifetime of a refresh token (1h to 90d); each use rotates it. A grant also ends with the session it is (session.maxAge).', '30d'),
  registration: filled(Type.Optional(Type.Union([Type.Literal('open'), Type.Literal('off')], {
    default: 'open',
    description: '`open`: any client may register itself (RFC 7591: public clients, 10 per minute per address, at most 8 KiB each, one nobody allowed kept 1 h); `off`: no registration endpoint, and so no new client (clients cannot be configured in gateway.yaml yet).',
  }))),
  registrationsPerHour: filled(Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, default: 1000, description: 'Registrations accepted per hour from all addresses together (each address also at most 10 a minute): a client nobody allows is kept 1 h, so this bounds the clients the store holds that no person has allowed.' }))),
  tokenRequestsPerMinute: filled(Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, default: 600, description: 'Requests to the token and revocation endpoints per minute from one client address, every client there together (IPv6: per /64); each code, refresh token or device code being polled is also at most 30 of them. An office behind one NAT address shares this: a CLI polling at the 5 s interval takes 12.' }))),
  clientMetadataDocuments: Flag('Clients named by an https URL whose JSON document describes them (OAuth Client ID Metadata Documents, as MCP clients use): fetched when first used (2.5 s at most, 5 KiB at most, no redirects, never from a private or loopback address unless its host is in `clientMetadataPrivateHosts`), kept for its Cache-Control max-age (1 min to 1 day).', false),
  clientMetadataPrivateHosts: filled(Strings('Hosts (as in the client_id URL) whose client metadata documents may be fetched although they resolve to a private or loopback address: your own agents\' hosts inside the network.', {
    default: [], maxItems: 32, expected: 'a list of host names or IP addresses such as [agents.corp.internal]', examples: [['agents.corp.internal']],
  }, HOST)),
  deviceFlow: Flag('The device flow (RFC 8628) for CLIs on a machine without a browser: the person confirms a code at /oauth/agents/device. Off unless set: a person can be talked into entering a code someone else started (see agents.md).', false),
}, 'The gateway as the OAuth authorization server of MCP clients and CLIs for routes with `agents: true` (see agents.md).')

const ForwardAuthHost = Type.Object({
  allow: RuleList('Who may pass: one of these rules must hold; absent: any signed-in person.'),
  deny: RuleList('Who may not pass, even when an allow rule holds.'),
  bearer: Type.Optional(Bearer),
}, { additionalProperties: false, description: 'The rules of one host behind the proxy in front.' })

/** What forwardAuth.proxySecret and its previous values are written in: what a proxy's configuration sends as written. */
const PROXY_SECRET = { pattern: '^[A-Za-z0-9+/=._~-]+$', expected: 'a secret of letters, digits and + / = . _ ~ - (what a proxy\'s configuration can send as a header value as written)' }

const ForwardAuth = Section({
  allowedRedirectHosts: filled(Strings('Hosts outside the gateway a browser may be sent back to after signing in: `app.example.org`, `.example.com` (that domain and its subdomains), `host:8443`.', { default: [] })),
  hosts: filled(Type.Optional(Type.Record(Type.String(), ForwardAuthHost, {
    default: {},
    description: 'Rules per host behind the proxy in front, by host name without port (`payroll.example.com`): the host a trusted proxy names in X-Forwarded-Host must pass them as well as the query\'s rules. Only these hosts and the gateway\'s own origin get an identity assertion.',
    expected: 'a mapping of host name to { allow, deny, bearer }',
    examples: [{ 'payroll.example.com': { allow: [{ groups: ['payroll'] }] } }],
  }))),
  proxySecret: Text('A secret the proxy in front sends in X-Forward-Auth-Secret with each of its auth requests (at least 32 random characters: `openssl rand -base64 32`; letters, digits and + / = . _ ~ -). Set: /oauth/auth/ answers only requests that carry it (403 otherwise), so that no page\'s script can ask for the token through a proxy that relays the gateway\'s host. Absent: any request from a server.trustProxy address is answered. See forward-auth.md.', {
    examples: ['${GATEWAY_FORWARD_AUTH_SECRET}'], ...PROXY_SECRET,
  }),
  previousProxySecrets: filled(Strings('Earlier values of `proxySecret` still taken while the proxies in front change to the new one: a change of the secret refuses no auth request (forward-auth.md, "Changing the secret"). At most 4; each follows the rules for `proxySecret`. Drop them when `gateway_forward_auth_previous_proxy_secret_total` stops growing on every instance.', {
    default: [], examples: [['${GATEWAY_PREVIOUS_FORWARD_AUTH_SECRET}']], maxItems: 4, expected: 'a list of at most 4 secrets',
  }, Type.String({ minLength: 1, ...PROXY_SECRET }))),
}, 'Forward-auth (/oauth/auth/<provider>/) for a proxy in front; see forward-auth.md.')

/** The whole of gateway.yaml. */
export const GatewayYamlSchema = Type.Object({
  server: filled(Type.Optional(Server)),
  session: filled(Type.Optional(Session)),
  store: filled(Type.Optional(Store)),
  state: filled(Type.Optional(State)),
  providers: Type.Optional(Type.Record(Type.String(), Provider, {
    description: 'The providers, keyed by name (letters, digits, `-` and `_`).',
    expected: 'a mapping of provider name to settings',
    propertyNames: { pattern: '^[A-Za-z0-9_-]+$', expected: 'a provider name (letters, digits, - and _)' },
  })),
  routes: Type.Optional(Type.Array(Route, { description: 'Proxied path prefixes, each with its upstream.', expected: 'a list of routes' })),
  metrics: filled(Type.Optional(Metrics)),
  rateLimit: filled(Type.Optional(RateLimit)),
  assertion: filled(Type.Optional(Assertion)),
  agents: filled(Type.Optional(Agents)),
  tracing: filled(Type.Optional(Tracing)),
  forwardAuth: filled(Type.Optional(ForwardAuth)),
}, { additionalProperties: false, title: 'gateway.yaml', description: 'The configuration of the authenticating gateway.' })

/** gateway.yaml as written (after `${VAR}` substitution and the schema pass), before defaults and cross-checks. */
export type GatewayYaml = Static<typeof GatewayYamlSchema>
export type ProviderYaml = Static<typeof Provider>
export type RouteYaml = Static<typeof Route>

type OptionalKeys<P extends TProperties> = { [K in keyof P]: P[K] extends TOptional<TSchema> ? (P[K] extends Defaulted ? never : K) : never }[keyof P]
type FilledObject<P extends TProperties> = { [K in Exclude<keyof P, OptionalKeys<P>>]: Filled<P[K]> } & { [K in OptionalKeys<P>]?: Filled<P[K]> }

/**
 * The value a schema node describes once ajv has filled in the defaults (schema-check.ts's
 * withDefaults): a key whose node has a `default` (marked with `filled`) is present, at any depth.
 */
export type Filled<T extends TSchema> =
  T extends TObject<infer P> ? { [K in keyof FilledObject<P>]: FilledObject<P>[K] }
    : T extends TArray<infer Item> ? Array<Filled<Item>>
      : T extends TRecord<string, infer Value> ? Record<string, Filled<Value>>
        : Static<T>

/** gateway.yaml after the schema pass, presets and the schema's defaults: what validate.ts reads. */
export type FilledYaml = Filled<typeof GatewayYamlSchema>
