# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""How a run signs in to Azure: which identity, from where, decided before any call.

The options are azure.azcollection's (``auth_source``, ``profile``, ``cloud_environment``,
``x509_certificate_path``, the ``AZURE_*`` variables), plus the certificate's PEM text and
password and the workload identity's federated token file, which azure-identity reads.
:func:`resolve_sign_in` turns them into one :class:`SignIn` (the kind of credential, its
fields, and a sentence saying which identity and where it came from, for the -v output); the
clients build the azure-identity credential from it (``sdk.py`` is the file that imports
the SDKs). Every problem names the option (or the variable, or the profile's key) and never a
secret. Apart from the clients, so that the configuration check reads it without the SDKs.

``auth_source: auto`` takes the first of:

1. ``profile`` given: that profile of ``~/.azure/credentials``;
2. a service principal's credential in the options (or their ``AZURE_*`` variables): a client
   ``secret``, else a certificate (``x509_certificate_path`` or ``x509_certificate``), else a
   federated token file (``federated_token_file``, which AKS workload identity injects as
   ``AZURE_FEDERATED_TOKEN_FILE``); another one given as well is named in a warning;
3. the ``[default]`` profile of ``~/.azure/credentials``, when the file has one;
4. managed identity, when the host announces its endpoint (``IDENTITY_ENDPOINT``, ``MSI_ENDPOINT``,
   ``IMDS_ENDPOINT`` or ``AZURE_POD_IDENTITY_AUTHORITY_HOST``): a plain Azure VM's IMDS is never
   probed (that costs a timeout off Azure), so such a VM says ``auth_source: msi``;
5. the Azure CLI, when ``az`` is on PATH.

A client id or tenant given without any credential of step 2 is a service principal missing
its secret: the run fails naming what is missing rather than signing in as someone else.

The subscription is the ``subscription_id`` option (the offering's ``backend_settings``), whatever
the sign-in: a source that names another one (``AZURE_SUBSCRIPTION_ID`` in the environment, which
AWX's Azure credential injects, or the ``subscription_id`` of the credential file's profile) is
refused, naming both, before any call. Taking that other subscription built machines outside the
offering and billed them. Only without the option does the sign-in's own subscription count.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
from dataclasses import dataclass, field
from typing import List, Optional

try:
    import configparser
except ImportError:  # pragma: no cover - Python 2 is not supported, but sanity imports it
    configparser = None

AUTH_SOURCES = ("auto", "cli", "credential_file", "env", "msi")
# name (lower case) -> (name, authority host, ARM endpoint), as azure-identity's AzureAuthorityHosts
CLOUD_ENVIRONMENTS = {
    "azurecloud": ("AzureCloud", "https://login.microsoftonline.com", "https://management.azure.com"),
    "azureusgovernment": ("AzureUSGovernment", "https://login.microsoftonline.us",
                          "https://management.usgovcloudapi.net"),
    "azurechinacloud": ("AzureChinaCloud", "https://login.chinacloudapi.cn", "https://management.chinacloudapi.cn"),
}
DEFAULT_CLOUD = "AzureCloud"
CREDENTIAL_FILE = "~/.azure/credentials"

# option -> environment variables, first set wins: azure.azcollection's names, then those
# azure-identity and AKS workload identity use.
OPTION_ENV = (
    ("auth_source", ("ANSIBLE_AZURE_AUTH_SOURCE", "AZURE_AUTH_SOURCE")),  # AWX cannot inject ANSIBLE_*
    ("profile", ("AZURE_PROFILE",)),
    ("subscription_id", ("AZURE_SUBSCRIPTION_ID",)),
    ("tenant", ("AZURE_TENANT", "AZURE_TENANT_ID")),
    ("client_id", ("AZURE_CLIENT_ID",)),
    ("secret", ("AZURE_SECRET",)),
    ("x509_certificate_path", ("AZURE_X509_CERTIFICATE_PATH", "AZURE_CLIENT_CERTIFICATE_PATH")),
    ("x509_certificate_password", ("AZURE_CLIENT_CERTIFICATE_PASSWORD",)),
    ("federated_token_file", ("AZURE_FEDERATED_TOKEN_FILE",)),
    ("cloud_environment", ("AZURE_CLOUD_ENVIRONMENT",)),
    ("arm_endpoint", ("AZURE_ARM_ENDPOINT",)),
    ("authority_host", ("AZURE_AUTHORITY_HOST",)),
)
ENV_OF = dict(OPTION_ENV)
# Variables by which a host announces a managed-identity endpoint (App Service, Functions,
# Container Apps, Cloud Shell, Azure Arc, AAD pod identity).
MANAGED_IDENTITY_ENV = ("IDENTITY_ENDPOINT", "MSI_ENDPOINT", "IMDS_ENDPOINT", "AZURE_POD_IDENTITY_AUTHORITY_HOST")
# The keys a credential-file profile may hold, as azure.azcollection reads them.
PROFILE_KEYS = ("subscription_id", "tenant", "client_id", "secret", "x509_certificate_path",
                "x509_certificate_password", "cloud_environment")


class SignInProblem(Exception):
    """Why no sign-in can be made; the message names the option or variable, never a secret."""

    def __init__(self, message):
        super(SignInProblem, self).__init__(message)
        self.message = message


# repr=False: the generated repr would show the secret, the certificate and its password.
@dataclass(repr=False, eq=False)
class SignIn:
    """One way of signing in: ``kind`` is ``secret``, ``certificate``, ``workload_identity``,
    ``msi`` or ``cli``; ``origin`` says where it came from."""

    kind: str
    origin: str
    subscription_id: Optional[str] = None
    tenant: Optional[str] = None
    client_id: Optional[str] = None
    secret: Optional[str] = None
    certificate_path: Optional[str] = None
    certificate_data: Optional[str] = None
    certificate_password: Optional[str] = None
    token_file: Optional[str] = None
    warnings: List[str] = field(default_factory=list)
    # where the subscription came from, for messages (the option, a variable, a profile)
    subscription_from: str = field(default="subscription_id", init=False)
    # (subscription, where, key) of the sources the sign-in reads that name one (a profile)
    named_subscriptions: list = field(default_factory=list, init=False)
    auth_source: Optional[str] = field(default=None, init=False)  # set by resolve_sign_in

    def __post_init__(self):
        self.warnings = list(self.warnings or [])

    @property
    def secrets(self):
        """Values no message may show (blanked by the clients' error translation)."""
        values = [self.secret, self.certificate_data, self.certificate_password]
        if self.token_file:
            try:
                with open(self.token_file) as handle:
                    values.append(handle.read().strip())
            except (IOError, OSError):
                pass
        return tuple(value for value in values if value)

    def identity(self):
        """Which identity signs in, in a few words (the pass's one line of an offering is short);
        :meth:`describe` says where it came from."""
        if self.kind == "msi":
            who = ("the user-assigned managed identity %s" % self.client_id if self.client_id
                   else "the system-assigned managed identity")
        elif self.kind == "cli":
            who = "the Azure CLI's signed-in account"
        else:
            who = "service principal %s" % self.client_id
        return "%s (auth_source %s)" % (who, self.auth_source) if self.auth_source else who

    def describe(self):
        """Which identity signs in, and from where (no secret), e.g. for the -v output."""
        if self.kind == "msi":
            who = ("the user-assigned managed identity %s" % self.client_id if self.client_id
                   else "the system-assigned managed identity")
            return "%s (%s)" % (who, self.origin)
        if self.kind == "cli":
            return "the Azure CLI's signed-in account%s (%s)" % (
                " in tenant %s" % self.tenant if self.tenant else "", self.origin)
        how = {"secret": "a client secret",
               "certificate": ("the client certificate of x509_certificate_path (%s)" % self.certificate_path
                               if self.certificate_path else "the client certificate of x509_certificate (PEM text)"),
               "workload_identity": "the federated token of federated_token_file (%s; workload identity)"
                                    % self.token_file}[self.kind]
        return "service principal %s in tenant %s with %s (%s)" % (self.client_id, self.tenant, how, self.origin)


def _given(value):
    return value is not None and not (isinstance(value, str) and not value.strip())


def cloud_endpoints(params):
    """``(authority_host, arm_endpoint)``: the explicit options, else those of ``cloud_environment``."""
    name = params.get("cloud_environment") or DEFAULT_CLOUD
    cloud = CLOUD_ENVIRONMENTS.get(str(name).strip().lower())
    if cloud is None:
        raise SignInProblem("cloud_environment: expected one of %s, got %r"
                            % (", ".join(item[0] for item in CLOUD_ENVIRONMENTS.values()), name))
    authority = params.get("authority_host") if _given(params.get("authority_host")) else cloud[1]
    arm = params.get("arm_endpoint") if _given(params.get("arm_endpoint")) else cloud[2]
    return authority.strip().rstrip("/"), arm.strip().rstrip("/")


def _env_params(environ):
    params = {}
    for option, names in OPTION_ENV:
        for name in names:
            if _given(environ.get(name)):
                params[option] = environ[name]
                break
    return params


def _read_profile(profile, required):
    """The named profile of the credential file as options, or None (when not ``required``)."""
    path = os.path.expanduser(CREDENTIAL_FILE)
    where = "profile [%s] of %s" % (profile, path)
    parser = configparser.ConfigParser()
    try:
        with open(path) as handle:
            parser.read_file(handle)
    except (IOError, OSError) as exc:
        if required:
            raise SignInProblem("%s: the credential file cannot be read (%s)" % (where, exc.strerror or exc))
        return None
    except configparser.Error as exc:
        raise SignInProblem("%s: not an INI file (%s)" % (path, str(exc).splitlines()[0]))
    if not parser.has_section(profile):
        if required:
            raise SignInProblem("profile: %s has no profile [%s] (it has: %s)"
                                % (path, profile, ", ".join(parser.sections()) or "none"))
        return None
    values = dict((key, parser.get(profile, key)) for key in PROFILE_KEYS if parser.has_option(profile, key))
    return values, where


def _service_principal(fields, origin, name_of, required, needs=("tenant", "client_id")):
    """The service principal sign-in the ``fields`` hold, or None when they hold no credential
    (and it is not ``required``). ``name_of(option)`` names an option in messages."""
    kinds = []
    if _given(fields.get("secret")):
        kinds.append(("secret", "secret"))
    if _given(fields.get("x509_certificate_path")) or _given(fields.get("x509_certificate")):
        kinds.append(("certificate", "x509_certificate_path" if _given(fields.get("x509_certificate_path"))
                      else "x509_certificate"))
    if _given(fields.get("federated_token_file")):
        kinds.append(("workload_identity", "federated_token_file"))
    if not kinds:
        if not required:
            return None
        raise SignInProblem("no service principal credential in the %s: give %s, %s or %s" % (
            origin, name_of("secret"), name_of("x509_certificate_path"), name_of("federated_token_file")))
    kind, key = kinds[0]
    missing = [name_of(option) for option in needs if not _given(fields.get(option))]
    if missing:
        raise SignInProblem("Azure credentials missing: %s (a service principal signing in with %s needs a "
                            "tenant and a client id)" % (", ".join(missing), name_of(key)))
    warnings = ["%s is also given and is not used: the service principal signs in with %s (auth_source auto "
                "takes a client secret, then a certificate, then a federated token file)"
                % (name_of(other), name_of(key)) for _kind, other in kinds[1:]]
    sign_in = SignIn(kind, origin, subscription_id=fields.get("subscription_id"), tenant=fields["tenant"].strip(),
                     client_id=fields["client_id"].strip(), warnings=warnings)
    if kind == "secret":
        sign_in.secret = fields["secret"]
    elif kind == "certificate":
        _certificate(sign_in, fields, name_of)
    else:
        path = os.path.expanduser(str(fields["federated_token_file"]).strip())
        if not os.path.isfile(path):
            raise SignInProblem("%s: no such file: %s (workload identity reads the federated token from it)"
                                % (name_of("federated_token_file"), path))
        sign_in.token_file = path
    return sign_in


def _certificate(sign_in, fields, name_of):
    if _given(fields.get("x509_certificate_path")) and _given(fields.get("x509_certificate")):
        raise SignInProblem("%s and x509_certificate: give one certificate, not both"
                            % name_of("x509_certificate_path"))
    if _given(fields.get("x509_certificate_path")):
        path = os.path.expanduser(str(fields["x509_certificate_path"]).strip())
        if not os.path.isfile(path):
            raise SignInProblem("%s: no such file: %s" % (name_of("x509_certificate_path"), path))
        sign_in.certificate_path = path
    else:
        text = fields["x509_certificate"]
        if "-----BEGIN" not in text or "PRIVATE KEY-----" not in text or "CERTIFICATE-----" not in text:
            raise SignInProblem("x509_certificate: expected PEM text holding the private key and its certificate")
        sign_in.certificate_data = text.encode("utf-8")
    if _given(fields.get("x509_certificate_password")):
        sign_in.certificate_password = fields["x509_certificate_password"]


def _option_name(option):
    names = ENV_OF.get(option)
    return "%s (env %s)" % (option, " or ".join(names)) if names else option


def _managed_identity(params, environ, origin):
    announced = [name for name in MANAGED_IDENTITY_ENV if _given(environ.get(name))]
    where = "endpoint from %s" % announced[0] if announced else "the instance metadata service (IMDS)"
    client_id = params.get("client_id") if _given(params.get("client_id")) else None
    return SignIn("msi", "%s, %s" % (origin, where), subscription_id=params.get("subscription_id"),
                  client_id=client_id.strip() if client_id else None)


def _cli(params, origin, which):
    path = which("az")
    if not path:
        raise SignInProblem("auth_source cli: the Azure CLI (az) is not on PATH")
    tenant = params.get("tenant") if _given(params.get("tenant")) else None
    return SignIn("cli", "%s, %s" % (origin, path), subscription_id=params.get("subscription_id"),
                  tenant=tenant.strip() if tenant else None)


def resolve_sign_in(params, environ=None, which=None):
    """The :class:`SignIn` the options (``params``, env fallbacks applied) ask for; raises
    :class:`SignInProblem`."""
    environ = os.environ if environ is None else environ
    which = which or shutil.which
    source = (params.get("auth_source") or "auto").strip().lower()
    if source not in AUTH_SOURCES:
        raise SignInProblem("auth_source: expected one of %s, got %r" % (", ".join(AUTH_SOURCES), source))
    if source == "msi":
        sign_in = _managed_identity(params, environ, "auth_source msi")
    elif source == "cli":
        sign_in = _cli(params, "auth_source cli", which)
    elif source == "env":
        fields = _env_params(environ)
        sign_in = _service_principal(fields, "the AZURE_* environment variables (auth_source env)",
                                     lambda option: " or ".join(ENV_OF.get(option, (option,))), True)
    elif source == "credential_file":
        sign_in = _from_profile(params, params.get("profile") or "default", True, "auth_source credential_file")
    else:
        sign_in = _auto(params, environ, which)
    sign_in.auth_source = source
    _pin_subscription(sign_in, params, environ)
    return sign_in


def _same_subscription(one, other):
    return str(one).strip().lower() == str(other).strip().lower()


def _pin_subscription(sign_in, params, environ):
    """Set the sign-in's subscription: the ``subscription_id`` option, always. Every other source
    that names one (the environment's ``AZURE_SUBSCRIPTION_ID``, the profile the sign-in reads) must
    name the same; else :class:`SignInProblem` naming both and where each came from."""
    named = list(sign_in.named_subscriptions)
    for variable in ENV_OF["subscription_id"]:
        if _given(environ.get(variable)):
            named.append((environ[variable].strip(), "%s in the environment" % variable, variable))
    option = params.get("subscription_id")
    if _given(option):
        wanted, wanted_from = option.strip(), "subscription_id"
    elif named:
        # No option (a module used on its own): the sign-in's own subscription, if it names one.
        wanted, wanted_from = named[0][0], named[0][1]
    else:
        raise SignInProblem("Azure credentials missing: %s" % _option_name("subscription_id"))
    for value, where, key in named:
        if not _same_subscription(value, wanted):
            # both subscriptions first: the pass's line of the offering is cut at 300 characters
            raise SignInProblem(
                "%s but %s names %s: an offering works only in its own subscription, so nothing is done; make %s "
                "the same or remove it" % ("subscription_id is %s" % wanted if wanted_from == "subscription_id"
                                           else "%s names %s" % (wanted_from, wanted), where, value, key))
    sign_in.subscription_id = wanted
    sign_in.subscription_from = wanted_from


def _from_profile(params, profile, required, why):
    profile = str(profile).strip()
    found = _read_profile(profile, required)
    if found is None:
        return None
    values, where = found
    sign_in = _service_principal(values, "%s, %s" % (why, where),
                                 lambda option: "%s in %s" % (option, where), True)
    # the profile's subscription is compared with the option, never taken over it (_pin_subscription)
    if _given(values.get("subscription_id")):
        sign_in.named_subscriptions = [(values["subscription_id"].strip(),
                                        "profile [%s] of %s" % (profile, CREDENTIAL_FILE), "its subscription_id")]
    return sign_in


def _auto(params, environ, which):
    if _given(params.get("profile")):
        return _from_profile(params, params["profile"], True, "auth_source auto, profile")
    sign_in = _service_principal(params, "auth_source auto, the module options or AZURE_* variables",
                                 _option_name, False, needs=("subscription_id", "tenant", "client_id"))
    if sign_in is not None:
        return sign_in
    if _given(params.get("tenant")) or _given(params.get("client_id")):
        # A service principal is meant: say what it lacks instead of signing in as another identity.
        missing = [_option_name(option) for option in ("subscription_id", "tenant", "client_id", "secret")
                   if not _given(params.get(option))]
        raise SignInProblem("Azure credentials missing: %s (or a certificate or federated token file instead of "
                            "the secret; auth_source msi for a user-assigned managed identity)" % ", ".join(missing))
    sign_in = _from_profile(params, "default", False, "auth_source auto, the default profile")
    if sign_in is not None:
        return sign_in
    if any(_given(environ.get(name)) for name in MANAGED_IDENTITY_ENV):
        return _managed_identity(params, environ, "auth_source auto")
    if which("az"):
        return _cli(params, "auth_source auto", which)
    raise SignInProblem(
        "Azure credentials missing: no service principal (%s with %s and %s), no profile in %s, no managed identity "
        "endpoint in the environment and no Azure CLI (az) on PATH; set auth_source (msi on an Azure VM)"
        % (_option_name("secret"), _option_name("tenant"), _option_name("client_id"), CREDENTIAL_FILE))


# ---- the site agent configuration's backend_settings -----------------------------------------

# backend_settings key -> the module option it feeds (roles/agent_pass/defaults/main.yml)
SETTINGS_OPTIONS = (
    ("auth_source", "auth_source"), ("profile", "profile"), ("tenant_id", "tenant"), ("client_id", "client_id"),
    ("client_secret", "secret"), ("x509_certificate_path", "x509_certificate_path"),
    ("x509_certificate", "x509_certificate"), ("x509_certificate_password", "x509_certificate_password"),
    ("federated_token_file", "federated_token_file"), ("cloud_environment", "cloud_environment"),
)
# The sign-in keys of backend_settings that hold secrets (no_log, scrubbed, never shown).
SECRET_SETTINGS = ("client_secret", "x509_certificate", "x509_certificate_password")


def settings_problems(settings):
    """Problems of the sign-in keys of an Azure offering's ``backend_settings``, as
    ``(key, message)``: the ones a configuration check can see without signing in (the
    credential file, managed identity and the CLI are only found at run time)."""
    problems = []
    if not _given(settings.get("subscription_id")):
        problems.append(("subscription_id", "required"))
    source = settings.get("auth_source")
    if _given(source) and str(source).strip().lower() not in AUTH_SOURCES:
        problems.append(("auth_source", "expected one of %s, got %r" % (", ".join(AUTH_SOURCES), source)))
        return problems
    if _given(settings.get("cloud_environment")):
        try:
            cloud_endpoints({"cloud_environment": settings["cloud_environment"]})
        except SignInProblem as problem:
            problems.append(("cloud_environment", problem.message.partition(": ")[2]))
    for key, given_by in (("x509_certificate_path", ""),
                          ("federated_token_file", " (given here or by AZURE_FEDERATED_TOKEN_FILE)")):
        value = settings.get(key)
        if _given(value) and not (isinstance(value, str) and os.path.isfile(os.path.expanduser(value.strip()))):
            problems.append((key, "expected the path of a readable file%s, %s is not a file" % (given_by, value)))
    if _given(settings.get("x509_certificate_path")) and _given(settings.get("x509_certificate")):
        problems.append(("x509_certificate", "give x509_certificate_path or x509_certificate, not both"))
    pem = settings.get("x509_certificate")
    if _given(pem) and not (isinstance(pem, str) and "PRIVATE KEY-----" in pem and "CERTIFICATE-----" in pem):
        problems.append(("x509_certificate", "expected PEM text holding the private key and its certificate"))
    if (source or "auto").strip().lower() != "auto":
        return problems  # msi, cli, credential_file and env take no more from the file
    credential = [key for key in ("client_secret", "x509_certificate_path", "x509_certificate",
                                  "federated_token_file") if _given(settings.get(key))]
    if credential or _given(settings.get("tenant_id")) or _given(settings.get("client_id")):
        for key in ("tenant_id", "client_id"):
            if not _given(settings.get(key)):
                problems.append((key, "required"))
        if not credential:
            problems.append(("client_secret", "required (or x509_certificate_path, x509_certificate or "
                                              "federated_token_file; or auth_source msi, cli or credential_file)"))
    return problems
