// A real OpenID Connect provider for the SSO tests: the certified `oidc-provider` package
// (installed by scripts/ensure-oidc-provider into var/node/oidc/node_modules).
//
//   node tests/sso/oidc_provider.mjs <port> <state.json>
//
// state.json (re-read on every request, so a test changes users between logins):
//   {"clients": [{"client_id", "client_secret", "redirect_uris": [...]}],
//    "users": {"<login>": {"email", "name", "groups": [...]}},
//    "clock_offset": <seconds added to the provider's clock, e.g. -3600>,
//    "tamper": null | "audience" | "forged" | "payload" | "unsigned" | "replace",
//    "id_token": <any JSON: what "replace" answers instead of the ID token>}
//
// Logins use the provider's own login form (any password, the login must be a user in
// state.json). Consent is granted without a prompt, as a company IdP does for its own
// apps. `clock_offset` makes the provider issue tokens from the past (expired ones);
// `tamper` rewrites the id_token in the token endpoint's answer the way a hostile network
// or a misconfigured IdP would: signed by the provider's key for another client
// ("audience"), signed by a key the provider never published ("forged"), or with its
// payload changed under the original signature ("payload"), not signed at all (`alg: none`,
// "unsigned"), or replaced by the state's `id_token`, any JSON value ("replace"). A user's
// `email_verified` is true unless the state sets it (null: the claim is left out).
// Prints "READY <issuer>".
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const modules = process.env.OIDC_NODE_MODULES
  || join(here, '..', '..', 'var', 'node', 'oidc', 'node_modules');
const resolve = createRequire(join(modules, 'noop.js')).resolve;
const { default: Provider } = await import(pathToFileURL(resolve('oidc-provider')));
const jose = await import(pathToFileURL(resolve('jose')));

const [port, statePath] = process.argv.slice(2);
const state = () => JSON.parse(readFileSync(statePath, 'utf8'));

// The provider's clock: real time plus the state's offset, applied per request.
const realNow = Date.now;
let offsetMs = 0;
Date.now = () => realNow() + offsetMs;

async function signingKey(kid) {
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  return { ...(await jose.exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}
const providerJwk = await signingKey('hitl-test-key');
const strangerJwk = await signingKey('hitl-test-key');

const issuer = `http://127.0.0.1:${port}`;
const initial = state();
const provider = new Provider(issuer, {
  clients: initial.clients.map((client) => ({
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
    ...client,
  })),
  jwks: { keys: [providerJwk] },
  cookies: { keys: ['hitl-test-cookie-key'] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  // Cookies outlive any clock_offset a test sets (the browser keeps real time).
  ttl: { IdToken: 600, AccessToken: 600, AuthorizationCode: 60, Session: 86400, Interaction: 86400, Grant: 86400 },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    const user = state().users[id];
    if (!user) return undefined;
    return {
      accountId: id,
      async claims() {
        const now = state().users[id] || {};
        const verified = 'email_verified' in now ? now.email_verified : true;
        return {
          sub: id,
          email: now.email,
          ...(verified === null ? {} : { email_verified: verified }),
          name: now.name,
          preferred_username: id,
          groups: now.groups || [],
        };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

async function tampered(idToken, mode) {
  const payload = jose.decodeJwt(idToken);
  if (mode === 'payload') {
    const [header, , signature] = idToken.split('.');
    const body = Buffer.from(JSON.stringify({ ...payload, sub: 'someone-else' })).toString('base64url');
    return `${header}.${body}.${signature}`;
  }
  if (mode === 'unsigned') {
    return new jose.UnsecuredJWT(payload).encode();
  }
  if (mode === 'replace') return state().id_token;
  const jwk = mode === 'forged' ? strangerJwk : providerJwk;
  const claims = mode === 'audience' ? { ...payload, aud: 'another-app' } : payload;
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: jwk.kid })
    .sign(await jose.importJWK(jwk, 'RS256'));
}

provider.use(async (ctx, next) => {
  const { clock_offset: offset = 0, tamper = null } = state();
  offsetMs = offset * 1000;
  await next();
  if (tamper && ctx.path === '/token' && ctx.body?.id_token !== undefined) {
    ctx.body = { ...ctx.body, id_token: await tampered(ctx.body.id_token, tamper) };
  }
});

createServer(provider.callback()).listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`READY ${issuer}\n`);
});
