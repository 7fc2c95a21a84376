// A real OIDC provider (panva's oidc-provider, pinned in package.json) for the inbox
// sign-in tests: `node oidc_provider.mjs <port> '<client JSON>'`.
//
// The client JSON is {"clientId", "clientSecret", "redirectUri", "postLogoutRedirectUri"}:
// one confidential client (client_secret_basic) of the authorization code flow, PKCE
// required. The issuer is http://127.0.0.1:<port>. Its built-in development interactions
// sign in anyone whose login is an account below (any password), then ask for consent.
// ID tokens carry the `groups` claim (scope `groups`). Prints one line when listening.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import Provider from "oidc-provider";

const ACCOUNTS = {
  alice: [],
  carol: ["finance"],
  dave: ["finance"],
  erin: ["ops"],
};

const [port, clientJson] = process.argv.slice(2);
if (!port || !clientJson) {
  console.error("usage: node oidc_provider.mjs <port> '<client JSON>'");
  process.exit(2);
}
const client = JSON.parse(clientJson);
const issuer = `http://127.0.0.1:${port}`;

// A signing key of its own each run: the gateway must read it from the provider's JWKS.
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: "jwk" }), kid: "test-signing-key", use: "sig", alg: "RS256" };

// Pages with no resource from elsewhere: the test machine has no internet.
const page = (title, body) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head><body>${body}</body></html>`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: client.clientId,
      client_secret: client.clientSecret,
      redirect_uris: [client.redirectUri],
      post_logout_redirect_uris: [client.postLogoutRedirectUri],
      response_types: ["code"],
      grant_types: ["authorization_code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  scopes: ["openid", "profile", "groups"],
  claims: { openid: ["sub"], profile: ["name"], groups: ["groups"] },
  // Claims of the scopes granted go in the ID token itself, not only in userinfo.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource: async (ctx, form) => {
        ctx.body = page(
          "Sign out",
          `${form}<button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>`,
        );
      },
      postLogoutSuccessSource: async (ctx) => {
        ctx.body = page("Signed out", "<p>Signed out.</p>");
      },
    },
  },
  renderError: async (ctx, out) => {
    ctx.type = "html";
    ctx.body = page("Error", `<pre>${JSON.stringify(out).replace(/</g, "&lt;")}</pre>`);
  },
  findAccount: async (_ctx, id) =>
    id in ACCOUNTS
      ? { accountId: id, claims: async () => ({ sub: id, name: id, groups: ACCOUNTS[id] }) }
      : undefined,
});

const server = provider.listen(Number(port), "127.0.0.1", () => {
  console.log(`oidc-provider listening at ${issuer}`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
