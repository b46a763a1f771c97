"""The Entra ID (AAD) side: OpenID metadata, client-credentials tokens, and the
bearer-token check ARM applies to every call.

Tokens are JWT-shaped and HMAC-signed with a key of the simulator instance, so
checking one needs no token table: a token stays valid across ``reset()`` (like
a real token across a test's cleanup) until it expires or ``revoke_all()``
rotates the key.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import json
import os
import time
import uuid

from tests.simulators.azure.arm import ArmError

ARM_AUDIENCE = "https://management.azure.com/"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class AadError(Exception):
    """An AAD OAuth error: ``{"error", "error_description", "error_codes", ...}``."""

    def __init__(self, status: int, error: str, aadsts: int, description: str):
        super().__init__(f"{status} {error}: AADSTS{aadsts}")
        self.status = status
        self.error = error
        self.aadsts = aadsts
        self.description = description

    def body(self) -> dict:
        return aad_error_body(self.error, self.aadsts, self.description)


def aad_error_body(error: str, aadsts: int, description: str) -> dict:
    trace_id, correlation_id = str(uuid.uuid4()), str(uuid.uuid4())
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return {
        "error": error,
        "error_description": (f"AADSTS{aadsts}: {description}\r\nTrace ID: {trace_id}\r\n"
                              f"Correlation ID: {correlation_id}\r\nTimestamp: {stamp}"),
        "error_codes": [aadsts],
        "timestamp": stamp,
        "trace_id": trace_id,
        "correlation_id": correlation_id,
        "error_uri": f"https://login.microsoftonline.com/error?code={aadsts}",
    }


def openid_configuration(base: str, tenant: str) -> dict:
    """What MSAL reads from ``/{tenant}/v2.0/.well-known/openid-configuration``."""
    root = f"{base}/{tenant}"
    return {
        "token_endpoint": f"{root}/oauth2/v2.0/token",
        "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt",
                                                  "client_secret_basic"],
        "jwks_uri": f"{root}/discovery/v2.0/keys",
        "response_modes_supported": ["query", "fragment", "form_post"],
        "subject_types_supported": ["pairwise"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
        "scopes_supported": ["openid", "profile", "email", "offline_access"],
        "issuer": f"{root}/v2.0",
        "request_uri_parameter_supported": False,
        "userinfo_endpoint": "https://graph.microsoft.com/oidc/userinfo",
        "authorization_endpoint": f"{root}/oauth2/v2.0/authorize",
        "device_authorization_endpoint": f"{root}/oauth2/v2.0/devicecode",
        "http_logout_supported": True,
        "frontchannel_logout_supported": True,
        "end_session_endpoint": f"{root}/oauth2/v2.0/logout",
        "claims_supported": ["sub", "iss", "cloud_instance_name", "cloud_instance_host_name",
                             "cloud_graph_host_name", "msgraph_host", "aud", "exp", "iat",
                             "auth_time", "acr", "nonce", "preferred_username", "name", "tid",
                             "ver", "at_hash", "c_hash", "email"],
        "kerberos_endpoint": f"{root}/kerberos",
        "tenant_region_scope": "EU",
        "cloud_instance_name": "microsoftonline.com",
        "cloud_graph_host_name": "graph.windows.net",
        "msgraph_host": "graph.microsoft.com",
        "rbac_url": "https://pas.windows.net",
    }


class TokenAuthority:
    """Issues and checks access tokens for registered service principals."""

    def __init__(self, lifetime: int = 3599):
        self.lifetime = lifetime
        self.principals: dict[str, dict] = {}  # client id (lower) -> {secret, tenant, object_id}
        self.tenants: set[str] = set()
        self._key = os.urandom(32)

    def register(self, tenant: str, client_id: str, secret: str, object_id: str) -> None:
        self.tenants.add(tenant.lower())
        self.principals[client_id.lower()] = {"tenant": tenant.lower(), "secret": secret,
                                              "object_id": object_id, "client_id": client_id}

    def revoke_all(self) -> None:
        """Invalidate every token issued so far (rotate the signing key)."""
        self._key = os.urandom(32)

    def check_tenant(self, tenant: str) -> None:
        if tenant.lower() not in self.tenants:
            raise AadError(400, "invalid_request", 90002,
                           f"Tenant '{tenant}' not found. Check to make sure you have the correct "
                           "tenant ID and are signing into the correct cloud.")

    def issue(self, tenant: str, form: dict) -> dict:
        """The client-credentials grant (``form`` is the POSTed form)."""
        self.check_tenant(tenant)
        grant = form.get("grant_type")
        if not grant:
            raise AadError(400, "invalid_request", 900144,
                           "The request body must contain the following parameter: 'grant_type'.")
        if grant != "client_credentials":
            raise AadError(400, "unsupported_grant_type", 70003,
                           f"The app requested an unsupported grant type '{grant}'.")
        client_id = form.get("client_id") or ""
        if not client_id:
            raise AadError(400, "invalid_request", 900144,
                           "The request body must contain the following parameter: 'client_id'.")
        principal = self.principals.get(client_id.lower())
        if principal is None or principal["tenant"] != tenant.lower():
            raise AadError(400, "unauthorized_client", 700016,
                           f"Application with identifier '{client_id}' was not found in the "
                           f"directory '{tenant}'. This can happen if the application has not been "
                           "installed by the administrator of the tenant or consented to by any "
                           "user in the tenant.")
        secret = form.get("client_secret")
        if not secret:
            raise AadError(401, "invalid_client", 7000216,
                           "'client_assertion', 'client_secret' or 'request' is required for the "
                           "'client_credentials' grant type.")
        if not hmac.compare_digest(secret.encode(), principal["secret"].encode()):
            raise AadError(401, "invalid_client", 7000215,
                           "Invalid client secret provided. Ensure the secret being sent in the "
                           "request is the client secret value, not the client secret ID, for a "
                           f"secret added to app '{principal['client_id']}'.")
        scope = form.get("scope") or ""
        if not any(item.endswith("/.default") for item in scope.split()):
            raise AadError(400, "invalid_scope", 1002012,
                           f"The provided value for scope {scope} is not valid. Client credential "
                           "flows must have a scope value with /.default suffixed to the resource "
                           "identifier (application ID URI).")
        now = int(time.time())
        claims = {
            "aud": ARM_AUDIENCE, "iss": f"https://sts.windows.net/{principal['tenant']}/",
            "iat": now, "nbf": now, "exp": now + self.lifetime,
            "appid": principal["client_id"], "appidacr": "1", "idtyp": "app",
            "oid": principal["object_id"], "sub": principal["object_id"],
            "tid": principal["tenant"], "ver": "1.0", "uti": uuid.uuid4().hex[:22],
        }
        return {"token_type": "Bearer", "expires_in": self.lifetime,
                "ext_expires_in": self.lifetime, "access_token": self._sign(claims)}

    def _sign(self, claims: dict) -> str:
        header = _b64(json.dumps({"typ": "JWT", "alg": "HS256", "kid": "simulator"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(signature)}"

    def verify(self, authorization: str | None, tenant: str) -> dict:
        """The claims of a valid bearer token, else an ARM 401."""
        if not authorization:
            raise ArmError(401, "AuthenticationFailed",
                           "Authentication failed. The 'Authorization' header is missing.")
        scheme, _space, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ArmError(401, "AuthenticationFailedInvalidHeader",
                           "Authentication failed. The 'Authorization' header is provided in an "
                           "invalid format.")
        invalid = ArmError(401, "InvalidAuthenticationToken", "The access token is invalid.")
        try:
            header, payload, signature = token.strip().split(".")
            expected = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(signature)):
                raise invalid
            claims = json.loads(_unb64(payload))
        except (ValueError, binascii.Error):
            raise invalid from None
        now = int(time.time())
        if claims.get("exp", 0) <= now:
            expired = datetime.datetime.fromtimestamp(claims.get("exp", 0), datetime.timezone.utc)
            current = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
            raise ArmError(401, "ExpiredAuthenticationToken",
                           f"The access token expiry UTC time '{expired:%m/%d/%Y %I:%M:%S %p}' is "
                           f"earlier than current UTC time '{current:%m/%d/%Y %I:%M:%S %p}'.")
        if claims.get("tid") != tenant.lower():
            raise ArmError(401, "InvalidAuthenticationTokenTenant",
                           f"The access token is from the wrong issuer '{claims.get('iss')}'. It "
                           f"must match the tenant 'https://sts.windows.net/{tenant}/' associated "
                           "with this subscription.")
        return claims
