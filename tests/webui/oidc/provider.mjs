// A real OpenID Connect provider for the dashboard's tests: node's oidc-provider with one static client and
// test accounts whose "groups" claim the dashboard maps to roles. Its development login form accepts any
// password; the account name picks the groups below.
// Usage: node provider.mjs PORT REDIRECT_URI CLIENT_SECRET   (prints "ready <issuer>" once it listens)
import Provider from 'oidc-provider';

const [port, redirect, secret] = process.argv.slice(2);
const groups = {
  alice: ['asynq-admins'],
  olivia: ['asynq-operators', 'staff'],
  victor: ['staff', 'asynq-viewers'],
  mallory: ['contractors'],
};
const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: [{
    client_id: 'asynqpy-dashboard',
    client_secret: secret,
    redirect_uris: [redirect],
    response_types: ['code'],
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  claims: { openid: ['sub'], profile: ['name', 'groups'], email: ['email', 'email_verified'] },
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ['asynqpy-test-cookie-key'] },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, name: id, email: `${id}@example.com`, email_verified: true, groups: groups[id] || [] };
      },
    };
  },
});
provider.proxy = false;
provider.on('server_error', (ctx, err) => { console.error('server_error', err.stack); });
provider.listen(Number(port), '127.0.0.1', () => { console.log(`ready ${issuer}`); });
