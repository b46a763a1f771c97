"""The Entra ID (AAD) side: OpenID metadata, client-credentials tokens, and the
bearer-token check ARM applies to every call.

A service principal signs in with its client secret, or with a client assertion
(``client_assertion_type`` jwt-bearer) that is either a JWT signed by one of its registered
certificates (MSAL signs PS256 with an ``x5t#S256`` header, RS256 with ``x5t`` for ADFS; the
signature is checked against the certificate's public key, ``aud`` must be the token endpoint,
``iss`` and ``sub`` the client id) or a federated token (workload identity: a JWT of an OIDC
issuer the principal trusts, here signed by the simulator's own issuer key, matched on issuer,
subject and the ``api://AzureADTokenExchange`` audience). Managed identities get their tokens
from the App Service endpoint (``X-IDENTITY-HEADER``) or IMDS (``Metadata: true``); the Azure
CLI's account is a user whose token :meth:`TokenAuthority.user_token` mints.

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
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
FEDERATED_AUDIENCE = "api://AzureADTokenExchange"


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
        # managed identities: client id (lower, "" for the system-assigned one) -> {tenant, object_id}
        self.identities: dict[str, dict] = {}
        self._issuer_key = None  # the OIDC issuer's signing key (workload identity), made on first use

    def register(self, tenant: str, client_id: str, secret: str, object_id: str) -> None:
        self.tenants.add(tenant.lower())
        self.principals[client_id.lower()] = {"tenant": tenant.lower(), "secret": secret,
                                              "object_id": object_id, "client_id": client_id,
                                              "certificates": [], "federated": []}

    def register_certificate(self, client_id: str, certificate_pem: bytes) -> None:
        """Upload a certificate (its public part) to the principal's credentials."""
        from cryptography import x509

        self.principals[client_id.lower()]["certificates"].append(x509.load_pem_x509_certificate(certificate_pem))

    def register_federated(self, client_id: str, issuer: str, subject: str) -> None:
        """A federated identity credential: tokens of ``issuer`` for ``subject`` sign in as the principal."""
        self.principals[client_id.lower()]["federated"].append({"issuer": issuer, "subject": subject})

    def register_managed_identity(self, tenant: str, client_id: str | None, object_id: str) -> None:
        """A managed identity of this host: ``client_id`` None is the system-assigned one."""
        self.tenants.add(tenant.lower())
        self.identities[(client_id or "").lower()] = {"tenant": tenant.lower(), "object_id": object_id,
                                                      "client_id": client_id or object_id}

    def federated_token(self, issuer: str, subject: str, lifetime: int = 3600) -> str:
        """What the OIDC issuer (AKS) projects into the pod: a service-account JWT for ``subject``."""
        import jwt

        now = int(time.time())
        return jwt.encode({"iss": issuer, "sub": subject, "aud": [FEDERATED_AUDIENCE], "iat": now, "nbf": now,
                           "exp": now + lifetime}, self._issuer(), algorithm="RS256", headers={"kid": "simulator-oidc"})

    def _issuer(self):
        if self._issuer_key is None:
            from cryptography.hazmat.primitives.asymmetric import rsa

            self._issuer_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self._issuer_key

    def user_token(self, tenant: str, upn: str, object_id: str) -> dict:
        """An access token of a signed-in user (the Azure CLI's account), as the token grant issues it."""
        now = int(time.time())
        claims = {"aud": ARM_AUDIENCE, "iss": f"https://sts.windows.net/{tenant.lower()}/", "iat": now, "nbf": now,
                  "exp": now + self.lifetime, "upn": upn, "oid": object_id, "sub": object_id,
                  "tid": tenant.lower(), "ver": "1.0", "idtyp": "user", "uti": uuid.uuid4().hex[:22]}
        return {"access_token": self._sign(claims), "expires_on": claims["exp"]}

    def managed_identity_token(self, client_id: str | None, resource: str, arm_url: str = "") -> dict:
        """The token of a managed identity for ``resource``; raises KeyError for an unknown identity
        and ValueError for a resource that is neither ARM's nor the simulator's own ``arm_url``
        (tokens are asked for the ARM endpoint a client calls)."""
        identity = self.identities[(client_id or "").lower()]
        if resource.rstrip("/") not in (ARM_AUDIENCE.rstrip("/"), arm_url.rstrip("/")):
            raise ValueError(resource)
        now = int(time.time())
        claims = {"aud": ARM_AUDIENCE, "iss": f"https://sts.windows.net/{identity['tenant']}/", "iat": now,
                  "nbf": now, "exp": now + self.lifetime, "appid": identity["client_id"], "idtyp": "app",
                  "oid": identity["object_id"], "sub": identity["object_id"], "tid": identity["tenant"],
                  "ver": "1.0", "uti": uuid.uuid4().hex[:22]}
        return {"access_token": self._sign(claims), "client_id": identity["client_id"],
                "expires_in": str(self.lifetime), "expires_on": str(claims["exp"]),
                "ext_expires_in": str(self.lifetime), "not_before": str(now), "resource": resource,
                "token_type": "Bearer"}

    def revoke_all(self) -> None:
        """Invalidate every token issued so far (rotate the signing key)."""
        self._key = os.urandom(32)

    def check_tenant(self, tenant: str) -> None:
        if tenant.lower() not in self.tenants:
            raise AadError(400, "invalid_request", 90002,
                           f"Tenant '{tenant}' not found. Check to make sure you have the correct "
                           "tenant ID and are signing into the correct cloud.")

    def issue(self, tenant: str, form: dict, token_url: str = "") -> dict:
        """The client-credentials grant (``form`` is the POSTed form, ``token_url`` the endpoint's
        URL, which a certificate's assertion must name as its audience)."""
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
        secret, assertion = form.get("client_secret"), form.get("client_assertion")
        if assertion:
            if form.get("client_assertion_type") != JWT_BEARER:
                raise AadError(400, "invalid_request", 70002, "The client_assertion_type must be "
                               f"'{JWT_BEARER}'.")
            self._check_assertion(principal, assertion, token_url)
        elif not secret:
            raise AadError(401, "invalid_client", 7000216,
                           "'client_assertion', 'client_secret' or 'request' is required for the "
                           "'client_credentials' grant type.")
        elif not hmac.compare_digest(secret.encode(), principal["secret"].encode()):
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

    def _check_assertion(self, principal: dict, assertion: str, token_url: str) -> None:
        import jwt

        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError:
            raise AadError(401, "invalid_client", 50027,
                           "JWT token is invalid or malformed.") from None
        if "x5t#S256" in header or "x5t" in header:
            self._check_certificate_assertion(principal, assertion, header, token_url)
        else:
            self._check_federated_assertion(principal, assertion)

    def _check_certificate_assertion(self, principal: dict, assertion: str, header: dict, token_url: str) -> None:
        import jwt
        from cryptography.hazmat.primitives import hashes

        wanted, digest = ((header["x5t#S256"], hashes.SHA256()) if "x5t#S256" in header
                          else (header["x5t"], hashes.SHA1()))
        certificate = next((cert for cert in principal["certificates"] if _b64(cert.fingerprint(digest)) == wanted.rstrip("=")),
                           None)
        if certificate is None:
            raise AadError(401, "invalid_client", 700027,
                           "The certificate with identifier used to sign the client assertion is not registered "
                           f"on application. [Reason - The key was not found., Thumbprint of key used by client: "
                           f"'{_unb64(wanted).hex().upper()}', Please visit the Azure Portal, Graph Explorer or "
                           "directly use MS Graph to see configured keys for app Id "
                           f"'{principal['client_id']}'.]")
        try:
            claims = jwt.decode(assertion, certificate.public_key(), algorithms=["PS256", "RS256"],
                                audience=token_url, options={"require": ["exp", "aud", "iss", "sub"]})
        except jwt.InvalidSignatureError:
            raise AadError(401, "invalid_client", 700027, "Client assertion failed signature validation.") from None
        except jwt.ExpiredSignatureError:
            raise AadError(401, "invalid_client", 700024,
                           "Client assertion is not within its valid time range.") from None
        except jwt.PyJWTError as exc:
            raise AadError(401, "invalid_client", 700027, f"Client assertion is invalid: {exc}.") from None
        if claims.get("iss", "").lower() != principal["client_id"].lower() or claims.get("sub") != claims.get("iss"):
            raise AadError(401, "unauthorized_client", 700021,
                           "Client assertion application identifier doesn't match 'client_id' parameter.")

    def _check_federated_assertion(self, principal: dict, assertion: str) -> None:
        import jwt

        try:
            claims = jwt.decode(assertion, self._issuer().public_key(), algorithms=["RS256"],
                                audience=FEDERATED_AUDIENCE)
        except jwt.ExpiredSignatureError:
            raise AadError(400, "invalid_client", 700024,
                           "Client assertion is not within its valid time range.") from None
        except jwt.PyJWTError:
            unverified = jwt.decode(assertion, options={"verify_signature": False})
            raise AadError(400, "invalid_client", 700211,
                           "No matching federated identity record found for presented assertion issuer "
                           f"'{unverified.get('iss')}'. Please check your federated identity credential Subject, "
                           "Audience and Issuer against the presented assertion.") from None
        if not any(record["issuer"] == claims.get("iss") and record["subject"] == claims.get("sub")
                   for record in principal["federated"]):
            raise AadError(400, "invalid_client", 700213,
                           "No matching federated identity record found for presented assertion subject "
                           f"'{claims.get('sub')}'. Please check your federated identity credential Subject, "
                           "Audience and Issuer against the presented assertion.")

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


def client_certificate(common_name: str = "waldur-site-agent") -> bytes:
    """A new RSA key and its self-signed certificate as one PEM text (what ``az ad sp create-for-rbac
    --create-cert`` writes): the private key first, then the certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=365)).sign(key, hashes.SHA256()))
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
            + certificate.public_bytes(serialization.Encoding.PEM))


def certificate_part(pem: bytes) -> bytes:
    """The certificate block of a key-and-certificate PEM text."""
    start = pem.index(b"-----BEGIN CERTIFICATE-----")
    return pem[start:]
